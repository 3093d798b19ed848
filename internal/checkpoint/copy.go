package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// CopyLatest copies the newest intact checkpoint under from to the
// checkpoint id under to, for trial (population-based training hands a
// better trial's state to a worse one this way), and returns the copy.
// The shards go through a temporary directory, so memory stays flat
// whatever their size. When to already holds an intact id (a copy made
// before a crash), that one is returned and nothing is copied again.
//
// A copy cut off before its manifest was written leaves shards without one
// under id; only the caller writes id, so they are deleted and copied anew.
//
// The source may lose checkpoints while it is read (its trial still runs
// and keeps only its newest few); Latest then falls back to an older one.
func (s *Store) CopyLatest(ctx context.Context, from, to string, trial int, id ID) (*hptype.CheckpointRef, error) {
	tmp, err := os.MkdirTemp("", "hpsearch-copy-*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy: %w", err)
	}
	defer os.RemoveAll(tmp)
	done, err := s.Load(ctx, to, id, &Dir{Path: filepath.Join(tmp, "existing")})
	switch {
	case err == nil:
		return done.Ref(), nil
	case !errors.Is(err, ErrNoCheckpoint):
		return nil, fmt.Errorf("checkpoint: copy to %s: look for an earlier copy: %w", to, err)
	}
	if err := s.dropPartial(ctx, to, id); err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "shards")
	src, _, err := s.Latest(ctx, from, &Dir{Path: dir})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy from %s: %w", from, err)
	}
	shards, err := DirShards(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy %s from %s: %w", src.ID, from, err)
	}
	m, err := s.Save(ctx, to, Manifest{Study: src.Study, Trial: trial, ID: id, Resource: src.Resource, Metrics: src.Metrics}, shards)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: copy %s from %s: %w", src.ID, from, err)
	}
	return m.Ref(), nil
}

// dropPartial deletes the objects of checkpoint id under prefix, which has
// no manifest.
func (s *Store) dropPartial(ctx context.Context, prefix string, id ID) error {
	left, err := s.blobs.List(ctx, idDir(prefix, id)+"/")
	if err != nil {
		return fmt.Errorf("checkpoint: copy to %s: list what an earlier copy left: %w", prefix, err)
	}
	keys := make([]string, len(left))
	for i, o := range left {
		keys[i] = o.Key
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.blobs.Delete(ctx, keys...); err != nil {
		return fmt.Errorf("checkpoint: copy to %s: delete what an earlier copy left: %w", prefix, err)
	}
	return nil
}
