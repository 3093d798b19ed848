package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hpsearch/hpsearch/internal/blob"
)

// PutResult stores the result of an attempt of a segment (the trainer's
// SegmentResult JSON) under prefix, next to the trial's checkpoints, so
// that a coordinator that was down while the segment ran can reconcile it.
// A result is written once: storing the same bytes again succeeds, other
// bytes fail with an error wrapping blob.ErrExists.
func (s *Store) PutResult(ctx context.Context, prefix string, segment, attempt int, result []byte) error {
	if err := checkPrefix(prefix); err != nil {
		return fmt.Errorf("checkpoint: put result: %w", err)
	}
	if err := checkAttempt(segment, attempt); err != nil {
		return fmt.Errorf("checkpoint: put result under %s: %w", prefix, err)
	}
	if len(result) > maxDocBytes {
		return fmt.Errorf("checkpoint: put the result of segment %d attempt %d under %s: %d bytes is more than the %d a result may hold",
			segment, attempt, prefix, len(result), maxDocBytes)
	}
	key := resultKey(prefix, segment, attempt)
	err := s.blobs.Put(ctx, key, bytes.NewReader(result), int64(len(result)), blob.PutOptions{IfNotExists: true})
	if err == nil {
		return nil
	}
	if !errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("checkpoint: put the result of segment %d attempt %d under %s: %w", segment, attempt, prefix, err)
	}
	old, err := s.readDoc(ctx, key)
	if err != nil {
		return fmt.Errorf("checkpoint: put the result of segment %d attempt %d under %s: it exists, and reading it to compare failed: %w", segment, attempt, prefix, err)
	}
	if !bytes.Equal(old, result) {
		return fmt.Errorf("checkpoint: the result of segment %d attempt %d under %s already holds other bytes: %w (an attempt has one result; a second one is from a duplicate invocation)",
			segment, attempt, prefix, blob.ErrExists)
	}
	return nil
}

// GetResult returns the result PutResult stored for an attempt of a
// segment, or an error wrapping ErrNoResult (and so blob.ErrNotFound)
// when there is none.
func (s *Store) GetResult(ctx context.Context, prefix string, segment, attempt int) ([]byte, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("checkpoint: get result: %w", err)
	}
	if err := checkAttempt(segment, attempt); err != nil {
		return nil, fmt.Errorf("checkpoint: get result under %s: %w", prefix, err)
	}
	data, err := s.readDoc(ctx, resultKey(prefix, segment, attempt))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("checkpoint: segment %d attempt %d under %s in %s: %w", segment, attempt, prefix, s.blobs.URI(), ErrNoResult)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: get the result of segment %d attempt %d under %s: %w", segment, attempt, prefix, err)
	}
	return data, nil
}

// Cancel marks an attempt of a segment as cancelled: a worker that leases
// its job later drops it, and one running it stops it (with a checkpoint).
// Marking twice is not an error.
func (s *Store) Cancel(ctx context.Context, prefix string, segment, attempt int) error {
	if err := checkPrefix(prefix); err != nil {
		return fmt.Errorf("checkpoint: cancel: %w", err)
	}
	err := s.blobs.Put(ctx, cancelKey(prefix, segment, attempt), bytes.NewReader(nil), 0, blob.PutOptions{IfNotExists: true})
	if err != nil && !errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("checkpoint: cancel segment %d attempt %d under %s: %w", segment, attempt, prefix, err)
	}
	return nil
}

// Cancelled reports whether Cancel marked the attempt.
func (s *Store) Cancelled(ctx context.Context, prefix string, segment, attempt int) (bool, error) {
	if err := checkPrefix(prefix); err != nil {
		return false, fmt.Errorf("checkpoint: cancelled: %w", err)
	}
	key := cancelKey(prefix, segment, attempt)
	infos, err := s.blobs.List(ctx, key)
	if err != nil {
		return false, fmt.Errorf("checkpoint: look for the cancellation of segment %d attempt %d under %s: %w", segment, attempt, prefix, err)
	}
	for _, i := range infos {
		if i.Key == key {
			return true, nil
		}
	}
	return false, nil
}

func cancelKey(prefix string, segment, attempt int) string {
	return fmt.Sprintf("%s/%s/%06d.%03d.cancel", prefix, resultsDir, segment, attempt)
}
