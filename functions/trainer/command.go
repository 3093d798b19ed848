package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpsearch/hpsearch/functions/trainer/workload/command"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// runCommand runs a command workload. Its checkpoint directory is restored
// from the trial's newest checkpoint before the command starts and saved
// after it exits. The command gets SIGTERM a grace period before the
// deadline; if it then exits cleanly, the segment is suspended.
func runCommand(ctx context.Context, s *segment) (hptype.SegmentStatus, error) {
	tmp, err := os.MkdirTemp("", "hpsearch-checkpoint-")
	if err != nil {
		return "", fmt.Errorf("create the checkpoint directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "checkpoint")
	m, err := s.restore(ctx, &checkpoint.Dir{Path: dir})
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the checkpoint directory: %w", err)
	}
	in := command.Inputs{
		Params:        s.req.Params,
		Study:         s.req.StudyName,
		Trial:         s.req.Trial,
		Attempt:       s.req.Attempt,
		Seed:          s.req.Seed,
		Log:           s.logWriter(),
		CheckpointDir: dir,
		Target:        s.req.Resource.To,
	}
	if cp := s.req.Checkpoint; cp != nil {
		in.Grace, in.CheckpointEvery = cp.Grace.Std(), cp.Every.Std()
	}
	runErr := command.Run(ctx, s.req.Workload, in, s.report)
	suspended := errors.Is(runErr, command.ErrSuspended)
	if runErr != nil && !suspended {
		return "", runErr
	}
	resource := s.res.ResourceReached
	if m != nil {
		resource = max(resource, m.Resource)
	}
	shards, err := checkpoint.DirShards(dir)
	if err != nil {
		return "", err
	}
	if len(shards) > 0 {
		if err := s.save(ctx, resource, shards); err != nil {
			return "", err
		}
	}
	if !suspended {
		return hptype.SegmentCompleted, nil
	}
	if len(shards) == 0 {
		return "", fmt.Errorf("the command was stopped (at the segment deadline, backend.max_runtime, or by a stop request) without saving anything in $%s; make it save its state there on SIGTERM, or raise max_runtime", command.EnvCheckpointDir)
	}
	return hptype.SegmentSuspended, nil
}
