package trainer

import (
	"context"
	"fmt"

	"github.com/hpsearch/hpsearch/functions/trainer/workload/digits"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// runDigits trains digits-mlp epoch by epoch, checkpointing between epochs.
// It stops early, with a checkpoint, when the next epoch would not end
// before the deadline less the grace period, or when ctx is cancelled (the
// trainer was asked to stop).
func runDigits(ctx context.Context, s *segment) (hptype.SegmentStatus, error) {
	cfg, err := digits.ConfigFromParams(s.req.Params, s.req.Seed)
	if err != nil {
		return "", err
	}
	run, err := digits.NewRun(cfg)
	if err != nil {
		return "", err
	}
	var mem checkpoint.Memory
	m, err := s.restore(ctx, &mem)
	if err != nil {
		return "", err
	}
	if m != nil {
		shards := map[string][]byte{}
		for _, sh := range m.Shards {
			shards[sh.Name], _ = mem.Bytes(sh.Name)
		}
		restore := run.Restore
		if m.ID.String() == s.req.Checkpoint.Inherited {
			restore = run.Inherit
		}
		if err := restore(shards); err != nil {
			return "", fmt.Errorf("restore checkpoint %s: %w", m.ID, err)
		}
	}
	target := run.Epochs()
	if to := int(s.req.Resource.To); to > 0 && to < target {
		target = to
	}
	savedAt := run.Epoch()
	for run.Epoch() < target {
		if ctx.Err() != nil || s.mustStop(run.EpochDuration()) {
			return hptype.SegmentSuspended, s.saveDigits(ctx, run, savedAt)
		}
		if err := run.TrainEpoch(ctx, s.report); err != nil {
			if ctx.Err() != nil {
				// TrainEpoch rolled the unfinished epoch back.
				return hptype.SegmentSuspended, s.saveDigits(ctx, run, savedAt)
			}
			return "", err
		}
		if s.saveDue() {
			if err := s.saveDigits(ctx, run, savedAt); err != nil {
				return "", err
			}
			savedAt = run.Epoch()
		}
	}
	if err := s.saveDigits(ctx, run, savedAt); err != nil {
		return "", err
	}
	return hptype.SegmentCompleted, nil
}

// saveDigits checkpoints the run unless its epoch is already saved.
func (s *segment) saveDigits(ctx context.Context, run *digits.Run, savedAt int) error {
	if s.res.Checkpoint != nil && run.Epoch() == savedAt {
		return nil
	}
	state, err := run.Save()
	if err != nil {
		return fmt.Errorf("snapshot the training state: %w", err)
	}
	shards := make([]checkpoint.Shard, 0, len(state))
	for name, b := range state {
		shards = append(shards, checkpoint.BytesShard(name, b))
	}
	return s.save(ctx, float64(run.Epoch()), shards)
}
