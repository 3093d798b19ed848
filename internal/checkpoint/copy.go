package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// CopyBelow copies the newest intact checkpoint under from whose resource
// is below the limit to the checkpoint id under to, for trial
// (population-based training hands a better trial's state to a worse one
// this way), and returns the copy. The shards go through a temporary
// directory, so memory stays flat whatever their size.
//
// Whatever id already holds under to is deleted first: a copy, whole or
// cut off, that an earlier coordinator made before it died, perhaps of
// another trial's state. Only the caller writes id.
//
// The source may lose checkpoints while it is read (its trial still runs
// and keeps only its newest few); the next older one is tried then.
func (s *Store) CopyBelow(ctx context.Context, from, to string, trial int, id ID, below float64) (*hptype.CheckpointRef, error) {
	if err := s.Drop(ctx, to, id); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "hpsearch-copy-*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy: %w", err)
	}
	defer os.RemoveAll(tmp)
	list, _, err := s.List(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy from %s: %w", from, err)
	}
	for i, m := range list {
		if m.Resource >= below {
			continue
		}
		dir := filepath.Join(tmp, fmt.Sprintf("shards-%d", i))
		src, err := s.Load(ctx, from, m.ID, &Dir{Path: dir})
		if err != nil {
			continue // deleted or damaged since it was listed: try an older one
		}
		shards, err := DirShards(dir)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: copy %s from %s: %w", src.ID, from, err)
		}
		saved, err := s.Save(ctx, to, Manifest{Study: src.Study, Trial: trial, ID: id, Resource: src.Resource, Metrics: src.Metrics}, shards)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: copy %s from %s: %w", src.ID, from, err)
		}
		return saved.Ref(), nil
	}
	return nil, fmt.Errorf("checkpoint: copy from %s: %w (none intact below resource %g)", from, ErrNoCheckpoint, below)
}

// Drop deletes every object of checkpoint id under prefix, whole or not.
// Dropping a checkpoint that is not there is not an error.
func (s *Store) Drop(ctx context.Context, prefix string, id ID) error {
	left, err := s.blobs.List(ctx, idDir(prefix, id)+"/")
	if err != nil {
		return fmt.Errorf("checkpoint: drop %s under %s: %w", id, prefix, err)
	}
	keys := make([]string, len(left))
	for i, o := range left {
		keys[i] = o.Key
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.blobs.Delete(ctx, keys...); err != nil {
		return fmt.Errorf("checkpoint: drop %s under %s: %w", id, prefix, err)
	}
	return nil
}
