package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
)

// Defaults of the Options.
const (
	// DefaultParallelism is how many shards are moved at once.
	DefaultParallelism = 8
	// DefaultOrphanAge is how old the shards of a checkpoint without a
	// manifest must be before Retain deletes them.
	DefaultOrphanAge = time.Hour
	// DefaultKeepLast is the number of intact checkpoints a trial keeps
	// while it runs: the newest, and one to fall back to.
	DefaultKeepLast = 2
)

// maxDocBytes bounds the manifests and segment results read into memory.
const maxDocBytes = 64 << 20

// Store saves, lists, loads and deletes the checkpoints of trials in a
// blob.Store. It keeps no state of its own; it is safe for concurrent use.
type Store struct {
	blobs       blob.Store
	parallelism int
	orphanAge   time.Duration
	now         func() time.Time
}

// Option changes a default of New.
type Option func(*Store)

// WithParallelism sets how many shards Save uploads and the loaders
// download at once. Defaults to DefaultParallelism (8); n below 1 means 1.
func WithParallelism(n int) Option {
	return func(s *Store) { s.parallelism = max(n, 1) }
}

// WithOrphanAge sets how long Retain leaves alone the shards of a
// checkpoint that has no manifest: they may belong to a Save still
// uploading. Defaults to DefaultOrphanAge (1 hour); keep it above the
// longest upload.
func WithOrphanAge(d time.Duration) Option {
	return func(s *Store) { s.orphanAge = d }
}

// WithClock sets the clock that stamps manifests (CreatedAt) and ages
// orphans. Defaults to time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// New returns a Store writing to b.
func New(b blob.Store, opts ...Option) *Store {
	s := &Store{blobs: b, parallelism: DefaultParallelism, orphanAge: DefaultOrphanAge, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// stored is what a listing shows of one checkpoint's folder.
type stored struct {
	id  ID
	dir string
	// hasManifest is false for a folder without one: an orphan, or a
	// Save in flight.
	hasManifest bool
	// objects are every object in the folder, the manifest included.
	objects []blob.Info
	// newest is the latest modification time among objects.
	newest time.Time
}

func (st *stored) size(key string) (int64, bool) {
	i, ok := slices.BinarySearchFunc(st.objects, key, func(o blob.Info, k string) int { return strings.Compare(o.Key, k) })
	if !ok {
		return 0, false
	}
	return st.objects[i].Size, true
}

// scan lists the checkpoint folders of prefix whose keys start with
// within (a key prefix under ckptRoot(prefix)), newest first. Keys that
// are not in a folder named by an ID are not the package's and are left
// out.
func (s *Store) scan(ctx context.Context, prefix, within string) ([]*stored, error) {
	root := ckptRoot(prefix)
	infos, err := s.blobs.List(ctx, within)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list the checkpoints under %s in %s: %w", within, s.blobs.URI(), err)
	}
	var dirs []*stored
	byID := map[ID]*stored{}
	for _, info := range infos {
		idStr, tail, ok := strings.Cut(strings.TrimPrefix(info.Key, root), "/")
		if !ok {
			continue
		}
		id, err := ParseID(idStr)
		if err != nil {
			continue
		}
		st := byID[id]
		if st == nil {
			st = &stored{id: id, dir: root + idStr}
			byID[id] = st
			dirs = append(dirs, st)
		}
		st.objects = append(st.objects, info)
		st.hasManifest = st.hasManifest || tail == manifestName
		if info.Modified.After(st.newest) {
			st.newest = info.Modified
		}
	}
	for _, st := range dirs {
		slices.SortFunc(st.objects, func(a, b blob.Info) int { return strings.Compare(a.Key, b.Key) })
	}
	slices.SortFunc(dirs, func(a, b *stored) int { return b.id.Compare(a.id) })
	return dirs, nil
}

// readManifest reads and checks the manifest of st and checks that every
// shard it names is in st with its recorded size. It returns the manifest
// of an intact checkpoint, or the Problem of another, or neither when the
// manifest vanished after the listing (a concurrent deletion), or an error
// when the manifest could not be read.
func (s *Store) readManifest(ctx context.Context, st *stored) (*Manifest, *Problem, error) {
	key := manifestKey(st.dir)
	data, err := s.readDoc(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: read its manifest: %w", st.id, err)
	}
	problem := func(shard string, err error) (*Manifest, *Problem, error) {
		return nil, &Problem{Checkpoint: st.id, Manifest: key, Shard: shard, Err: err}, nil
	}
	m := new(Manifest)
	if err := json.Unmarshal(data, m); err != nil {
		return problem("", fmt.Errorf("%w: %v", ErrBadManifest, err))
	}
	if err := m.check(st.dir, st.id); err != nil {
		return problem("", fmt.Errorf("%w: %v", ErrBadManifest, err))
	}
	m.Key = key
	for _, sh := range m.Shards {
		size, ok := st.size(sh.Key)
		switch {
		case !ok:
			return problem(sh.Name, fmt.Errorf("%w: no object %s", ErrMissingShard, sh.Key))
		case size != sh.Size:
			return problem(sh.Name, fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrSizeMismatch, sh.Key, size, sh.Size))
		}
	}
	return m, nil, nil
}

// readDoc reads a small object whole: a manifest or a segment result.
func (s *Store) readDoc(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.blobs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > maxDocBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes; it is not a document this package wrote", key, maxDocBytes)
	}
	return data, nil
}

// parallel calls fn(ctx, i) for every i in [0, n) on at most
// s.parallelism goroutines. The first error cancels the ctx of the other
// calls and is returned; the errors after it are dropped.
func (s *Store) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range min(s.parallelism, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	fed := 0
feed:
	for ; fed < n; fed++ {
		select {
		case next <- fed:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	if fed < n {
		return ctx.Err()
	}
	return nil
}
