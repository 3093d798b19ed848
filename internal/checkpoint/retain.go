package checkpoint

import (
	"context"
	"fmt"
	"time"
)

// Retain deletes the checkpoints of a running trial that it no longer
// needs: it keeps the newest keepLast intact checkpoints (DefaultKeepLast
// is the usual value), the ones named in keep, and the visible ones newer
// than the oldest kept that are not intact (they do not count towards
// keepLast; they are left for inspection and go once keepLast intact ones
// are newer). It deletes everything older, and the folders without a
// manifest (a Save that died) whose newest object is older than the orphan
// age (WithOrphanAge), so that a Save in flight is never touched.
//
// Manifests are deleted first, in one call, then the rest, so a checkpoint
// never stays visible with shards missing. "Intact" is checked from the
// listing, without reading shard bytes: a shard whose bytes rotted but
// kept their size counts, and Latest falls back past it. Retain must not
// run while a restore of a checkpoint it may delete is reading it.
func (s *Store) Retain(ctx context.Context, prefix string, keepLast int, keep ...ID) error {
	if err := checkPrefix(prefix); err != nil {
		return fmt.Errorf("checkpoint: retain: %w", err)
	}
	if keepLast < 1 {
		return fmt.Errorf("checkpoint: retain under %s: keepLast is %d; keep at least 1 (DefaultKeepLast is %d), or call Finish to delete them all", prefix, keepLast, DefaultKeepLast)
	}
	r := retention{keepLast: keepLast, keep: map[ID]bool{}, orphansBefore: s.now().Add(-s.orphanAge)}
	for _, id := range keep {
		r.keep[id] = true
	}
	return s.prune(ctx, prefix, r)
}

// Finish applies a study's end-of-study policy to one trial's checkpoints.
// With keepNewest it keeps only the newest intact checkpoint and deletes
// the rest, broken ones and orphans of any age included; without it, it
// deletes every checkpoint. Segment results are kept: they are small and
// record what ran. For the policies of a study: "all" does not call
// Finish, "best" calls it with keepNewest true for the best trials and
// false for the others, "none" calls it with false.
func (s *Store) Finish(ctx context.Context, prefix string, keepNewest bool) error {
	if err := checkPrefix(prefix); err != nil {
		return fmt.Errorf("checkpoint: finish: %w", err)
	}
	r := retention{dropBroken: true, orphansBefore: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if keepNewest {
		r.keepLast = 1
	}
	return s.prune(ctx, prefix, r)
}

// prune applies a retention policy: it reads what it needs to decide, lets
// r.plan decide, and deletes.
func (s *Store) prune(ctx context.Context, prefix string, r retention) error {
	dirs, err := s.scan(ctx, prefix, ckptRoot(prefix))
	if err != nil {
		return err
	}
	verdicts := make([]verdict, len(dirs))
	found := 0
	for i, st := range dirs {
		if found == r.keepLast {
			break
		}
		if !st.hasManifest {
			continue
		}
		m, p, err := s.readManifest(ctx, st)
		switch {
		case err != nil:
			return fmt.Errorf("checkpoint: delete old checkpoints under %s: %w", prefix, err)
		case m != nil:
			verdicts[i] = intact
			found++
		case p != nil:
			verdicts[i] = broken
		}
	}
	manifests, rest := r.plan(dirs, verdicts)
	if len(manifests) > 0 {
		if err := s.blobs.Delete(ctx, manifests...); err != nil {
			return fmt.Errorf("checkpoint: delete old checkpoints under %s: delete %d manifests: %w", prefix, len(manifests), err)
		}
	}
	if len(rest) > 0 {
		if err := s.blobs.Delete(ctx, rest...); err != nil {
			return fmt.Errorf("checkpoint: delete old checkpoints under %s: delete %d shards: %w (the next Retain deletes them after the orphan age)", prefix, len(rest), err)
		}
	}
	return nil
}

// verdict is what prune learned of a checkpoint folder.
type verdict uint8

const (
	// unread: not read (older than the keepLast intact ones, or without
	// a manifest), or its manifest vanished while prune read it.
	unread verdict = iota
	intact
	broken
)

// retention is a policy of prune.
type retention struct {
	// keepLast is how many intact checkpoints are kept, newest first.
	keepLast int
	// keep names checkpoints kept whatever they are.
	keep map[ID]bool
	// orphansBefore: folders without a manifest whose newest object is
	// older are deleted.
	orphansBefore time.Time
	// dropBroken deletes the checkpoints that are not intact even when
	// they are newer than the oldest kept.
	dropBroken bool
}

// plan decides, without side effects, which keys to delete: the manifests
// first, then the other objects. dirs are newest first, and verdicts[i]
// is the verdict on dirs[i].
func (r retention) plan(dirs []*stored, verdicts []verdict) (manifests, rest []string) {
	kept := 0
	for i, st := range dirs {
		keepIt := r.keep[st.id]
		switch {
		case !st.hasManifest:
			keepIt = keepIt || !st.newest.Before(r.orphansBefore)
		case verdicts[i] == intact && kept < r.keepLast:
			kept++
			keepIt = true
		case verdicts[i] == broken && kept < r.keepLast:
			keepIt = keepIt || !r.dropBroken
		}
		if keepIt {
			continue
		}
		for _, o := range st.objects {
			if o.Key == manifestKey(st.dir) {
				manifests = append(manifests, o.Key)
			} else {
				rest = append(rest, o.Key)
			}
		}
	}
	return manifests, rest
}
