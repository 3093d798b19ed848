package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Blobs is the blob store the checkpoints live in.
func (s *Store) Blobs() blob.Store { return s.blobs }

// URI names the blob store the checkpoints live in.
func (s *Store) URI() string { return s.blobs.URI() }

// Ref describes a checkpoint in the terms of the trainer contract.
func (m *Manifest) Ref() *hptype.CheckpointRef {
	return &hptype.CheckpointRef{ID: m.ID.String(), Key: m.Key, Resource: m.Resource, Bytes: m.Bytes(), CreatedAt: m.CreatedAt}
}

// LastOf returns the newest intact checkpoint that the given attempt of a
// segment wrote under prefix, with the metrics reported up to it, or nil
// when it wrote none.
func (s *Store) LastOf(ctx context.Context, prefix string, segment, attempt int) (*hptype.CheckpointRef, []hptype.Metric, error) {
	m, _, err := s.NewestOfAttempt(ctx, prefix, segment, attempt)
	if errors.Is(err, ErrNoCheckpoint) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return m.Ref(), m.Metrics, nil
}

// Result returns the SegmentResult stored for an attempt of a segment, or
// nil when there is none.
func (s *Store) Result(ctx context.Context, prefix string, segment, attempt int) (*hptype.SegmentResult, error) {
	raw, err := s.GetResult(ctx, prefix, segment, attempt)
	if errors.Is(err, ErrNoResult) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var res hptype.SegmentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("checkpoint: the stored result of segment %d attempt %d under %s is not a segment result: %w", segment, attempt, prefix, err)
	}
	return &res, nil
}

// Handover copies the newest intact checkpoint under from whose resource is
// below the limit into the trial under to, as the last checkpoint the given
// attempt of a segment could write (seq 9999): newer than every checkpoint
// that attempt wrote, older than any of the next segment's, so the next
// segment resumes from it. See CopyBelow.
func (s *Store) Handover(ctx context.Context, from, to string, trial, segment, attempt int, below float64) (*hptype.CheckpointRef, error) {
	return s.CopyBelow(ctx, from, to, trial, handoverID(segment, attempt), below)
}

// DropHandover deletes what Handover wrote for the attempt of a segment,
// if anything: a copy an earlier coordinator made before it died and
// before it recorded the decision that made it.
func (s *Store) DropHandover(ctx context.Context, to string, segment, attempt int) error {
	return s.Drop(ctx, to, handoverID(segment, attempt))
}

func handoverID(segment, attempt int) ID {
	return ID{Segment: segment, Attempt: attempt, Seq: maxSeq}
}
