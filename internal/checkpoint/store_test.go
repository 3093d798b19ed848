package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
)

const prefix = "study-1/trial-7"

// backend makes empty blob stores of one kind.
type backend struct {
	name string
	new  func(t testing.TB) blob.Store
}

// backends are the blob stores every store test runs against.
func backends() []backend {
	return []backend{
		{"fs", func(t testing.TB) blob.Store {
			s, err := fsblob.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"s3", func(t testing.TB) blob.Store {
			bucket := s3test.NewBucket(t)
			// A part threshold under the largest test shards, so that
			// they go up as conditional multipart uploads.
			s, err := s3blob.New(t.Context(), bucket, "ckpt-test", s3blob.WithPartThreshold(2<<20), s3blob.WithPartSize(5<<20))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
}

// TestStore runs each test body against every backend, each subtest on an
// empty store.
func TestStore(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				test func(t *testing.T, b blob.Store)
			}{
				{"RoundTrip", testRoundTrip},
				{"ParallelUploads", testParallelUploads},
				{"ManifestLast", testManifestLast},
				{"CrashBeforeManifest", testCrashBeforeManifest},
				{"Corruption", testCorruption},
				{"NoCheckpoint", testNoCheckpoint},
				{"Zombie", testZombie},
				{"RacingWriter", testRacingWriter},
				{"LostManifestResponse", testLostManifestResponse},
				{"Retain", testRetain},
				{"Orphans", testOrphans},
				{"Finish", testFinish},
				{"NewestOfAttempt", testNewestOfAttempt},
				{"DirRoundTrip", testDirRoundTrip},
				{"Results", testResults},
				{"BadInput", testBadInput},
				{"Canceled", testCanceled},
				{"CopyLatest", testCopyLatest},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.test(t, be.new(t))
				})
			}
		})
	}
}

// content returns n pseudo-random bytes determined by seed.
func content(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	_, _ = r.Read(b)
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// save saves a checkpoint of shards named by the keys of data and fails
// the test on an error.
func save(t *testing.T, s *checkpoint.Store, id checkpoint.ID, data map[string][]byte) *checkpoint.Manifest {
	t.Helper()
	var shards []checkpoint.Shard
	for _, name := range slices.Sorted(maps.Keys(data)) {
		shards = append(shards, checkpoint.BytesShard(name, data[name]))
	}
	m, err := s.Save(t.Context(), prefix, checkpoint.Manifest{Study: "study-1", Trial: 7, ID: id, Resource: float64(id.Segment)}, shards)
	if err != nil {
		t.Fatalf("Save(%v): %v", id, err)
	}
	return m
}

// latest restores the newest checkpoint into memory and fails the test on
// an error.
func latest(t *testing.T, s *checkpoint.Store) (*checkpoint.Manifest, *checkpoint.Memory, []checkpoint.Problem) {
	t.Helper()
	var mem checkpoint.Memory
	m, problems, err := s.Latest(t.Context(), prefix, &mem)
	if err != nil {
		t.Fatalf("Latest: %v (problems %v)", err, problems)
	}
	return m, &mem, problems
}

// keys lists the keys under p.
func keys(t *testing.T, b blob.Store, p string) []string {
	t.Helper()
	infos, err := b.List(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

func put(t *testing.T, b blob.Store, key string, data []byte) {
	t.Helper()
	if err := b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sameManifest fails the test unless got and want describe the same
// checkpoint.
func sameManifest(t *testing.T, got, want *checkpoint.Manifest) {
	t.Helper()
	if got == nil || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("manifest = %+v, want %+v", got, want)
	}
	g, w := *got, *want
	g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
	if g.ID != w.ID || g.Key != w.Key || g.Study != w.Study || g.Trial != w.Trial || g.Resource != w.Resource ||
		g.Version != w.Version || !slices.Equal(g.Shards, w.Shards) {
		t.Fatalf("manifest = %+v, want %+v", got, want)
	}
}

func testRoundTrip(t *testing.T, b blob.Store) {
	ctx := t.Context()
	now := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	s := checkpoint.New(b, checkpoint.WithClock(func() time.Time { return now }))
	data := map[string][]byte{
		"weights":           content(3<<20+17, 1),
		"optimizer":         content(100_000, 2),
		"empty":             nil,
		"nested/state.json": []byte(`{"epoch":3}`),
		"manifest.json":     []byte("a shard may have any name"),
	}
	order := []string{"weights", "optimizer", "empty", "nested/state.json", "manifest.json"}
	var shards []checkpoint.Shard
	var total int64
	for _, name := range order {
		shards = append(shards, checkpoint.BytesShard(name, data[name]))
		total += int64(len(data[name]))
	}
	id := checkpoint.ID{Segment: 3, Attempt: 1, Seq: 2}
	m, err := s.Save(ctx, prefix, checkpoint.Manifest{Study: "study-1", Trial: 7, ID: id, Resource: 12.5}, shards)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != checkpoint.ManifestVersion || m.ID != id || m.Study != "study-1" || m.Trial != 7 || m.Resource != 12.5 ||
		!m.CreatedAt.Equal(now) || m.Key != prefix+"/ckpt/000003.001.0002/manifest.json" || m.Bytes() != total {
		t.Fatalf("Save returned %+v", m)
	}
	for i, sh := range m.Shards {
		want := checkpoint.ShardInfo{Name: order[i], Key: prefix + "/ckpt/000003.001.0002/shards/" + order[i],
			Size: int64(len(data[order[i]])), SHA256: sum(data[order[i]])}
		if sh != want {
			t.Errorf("shard %d = %+v, want %+v", i, sh, want)
		}
	}

	got, mem, problems := latest(t, s)
	sameManifest(t, got, m)
	if len(problems) > 0 {
		t.Errorf("problems: %v", problems)
	}
	for name, want := range data {
		if b, ok := mem.Bytes(name); !ok || !bytes.Equal(b, want) {
			t.Errorf("restored %q: %d bytes (present %v), want %d", name, len(b), ok, len(want))
		}
	}

	list, problems, err := s.List(ctx, prefix)
	if err != nil || len(problems) > 0 || len(list) != 1 {
		t.Fatalf("List = %v, %v, %v", list, problems, err)
	}
	sameManifest(t, list[0], m)

	var mem2 checkpoint.Memory
	loaded, err := s.Load(ctx, prefix, id, &mem2)
	if err != nil {
		t.Fatal(err)
	}
	sameManifest(t, loaded, m)
	if b, _ := mem2.Bytes("weights"); !bytes.Equal(b, data["weights"]) {
		t.Error("Load restored other weights")
	}
	if _, err := s.Load(ctx, prefix, checkpoint.ID{Segment: 3, Attempt: 1, Seq: 3}, &mem2); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Errorf("Load of a missing ID: %v, want ErrNoCheckpoint", err)
	}

	// A checkpoint may hold no shards (all its state in Resource).
	empty, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: 4}, Resource: 13}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, mem, _ = latest(t, s)
	sameManifest(t, got, empty)
	if _, ok := mem.Bytes("weights"); ok || got.Bytes() != 0 {
		t.Error("the empty checkpoint restored shards")
	}
}

// watch wraps a real blob store: it records the calls made to it, counts
// the Puts in flight, and can hold Puts back or fail them.
type watch struct {
	blob.Store

	// barrier, when above 0, makes each Put wait (up to 10 s) until that
	// many are in flight at once.
	barrier int
	// before is called before each Put; an error fails the Put unmade.
	before func(key string) error
	// after is called after each Put that succeeded; an error replaces
	// the Put's result (the response was lost).
	after func(key string) error

	mu          sync.Mutex
	events      []string
	inflight    int
	maxInflight int
	reached     chan struct{}
	closed      bool
}

func newWatch(b blob.Store, barrier int) *watch {
	return &watch{Store: b, barrier: barrier, reached: make(chan struct{})}
}

func (w *watch) record(e string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

func (w *watch) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) error {
	if w.before != nil {
		if err := w.before(key); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.events = append(w.events, "put> "+key)
	w.inflight++
	w.maxInflight = max(w.maxInflight, w.inflight)
	if w.barrier > 0 && w.inflight == w.barrier && !w.closed {
		close(w.reached)
		w.closed = true
	}
	w.mu.Unlock()
	if w.barrier > 0 {
		select {
		case <-w.reached:
		case <-time.After(10 * time.Second):
		}
	}
	err := w.Store.Put(ctx, key, r, size, opts)
	w.mu.Lock()
	w.inflight--
	w.events = append(w.events, "put< "+key)
	w.mu.Unlock()
	if err == nil && w.after != nil {
		err = w.after(key)
	}
	return err
}

func (w *watch) Delete(ctx context.Context, keys ...string) error {
	w.record("delete " + strings.Join(keys, " "))
	return w.Store.Delete(ctx, keys...)
}

func (w *watch) Events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func testParallelUploads(t *testing.T, b blob.Store) {
	for i, tc := range []struct {
		parallelism, shards int
	}{
		{0, 10}, // the default, 8
		{3, 8},
		{1, 3},
		{8, 2},
	} {
		want := min(tc.shards, checkpoint.DefaultParallelism)
		var opts []checkpoint.Option
		if tc.parallelism > 0 {
			want = min(tc.shards, tc.parallelism)
			opts = append(opts, checkpoint.WithParallelism(tc.parallelism))
		}
		w := newWatch(b, want)
		s := checkpoint.New(w, opts...)
		var shards []checkpoint.Shard
		for j := range tc.shards {
			shards = append(shards, checkpoint.BytesShard(fmt.Sprintf("s%d", j), content(64<<10, uint64(j))))
		}
		if _, err := s.Save(t.Context(), prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: i}}, shards); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		got := w.maxInflight
		w.mu.Unlock()
		if got != want {
			t.Errorf("parallelism %d, %d shards: %d Puts in flight at most, want %d", tc.parallelism, tc.shards, got, want)
		}
	}
}

func testManifestLast(t *testing.T, b blob.Store) {
	w := newWatch(b, 0)
	s := checkpoint.New(w)
	m := save(t, s, checkpoint.ID{Segment: 1}, map[string][]byte{"a": content(1<<20, 1), "b": content(10, 2), "c": nil})
	events := w.Events()
	manifestAt := slices.Index(events, "put> "+m.Key)
	if manifestAt < 0 {
		t.Fatalf("no Put of the manifest in %q", events)
	}
	for _, sh := range m.Shards {
		if i := slices.Index(events, "put< "+sh.Key); i < 0 || i > manifestAt {
			t.Errorf("shard %s finished at event %d, the manifest started at %d: %q", sh.Name, i, manifestAt, events)
		}
	}
	if n := strings.Count(strings.Join(events, "\n"), "put> "); n != 4 {
		t.Errorf("%d Puts, want 4: %q", n, events)
	}
}

func testCrashBeforeManifest(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	good := save(t, s, checkpoint.ID{Segment: 1}, map[string][]byte{"a": content(1000, 1), "b": content(1000, 2)})
	boom := errors.New("disk read failed")
	for _, tc := range []struct {
		name string
		b    checkpoint.Shard
	}{
		{"read fails", checkpoint.Shard{Name: "b", Size: 1 << 20, Open: func() (io.ReadCloser, error) {
			return io.NopCloser(io.MultiReader(bytes.NewReader(content(1000, 3)), iotest.ErrReader(boom))), nil
		}}},
		{"open fails", checkpoint.Shard{Name: "b", Size: 10, Open: func() (io.ReadCloser, error) { return nil, boom }}},
		{"reader short", checkpoint.Shard{Name: "b", Size: 2000, Open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(content(1000, 3))), nil
		}}},
		{"reader long", checkpoint.Shard{Name: "b", Size: 500, Open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(content(1000, 3))), nil
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := checkpoint.ID{Segment: 2}
			shards := []checkpoint.Shard{checkpoint.BytesShard("a", content(2<<20, 4)), tc.b}
			_, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: id}, shards)
			if err == nil || !strings.Contains(err.Error(), `shard "b"`) {
				t.Fatalf("Save = %v, want an error naming shard b", err)
			}
			got, _, problems := latest(t, s)
			sameManifest(t, got, good)
			if len(problems) > 0 {
				t.Errorf("problems: %v", problems)
			}
			if left := keys(t, b, prefix+"/ckpt/"+id.String()+"/"); len(left) > 0 {
				t.Errorf("the failed Save left %q", left)
			}
		})
	}
}

func testCorruption(t *testing.T, b blob.Store) {
	ctx := t.Context()
	old := content(300_000, 1)
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, m *checkpoint.Manifest, other []byte)
		shard   string
		want    error
	}{
		{"checksum", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			sh, _ := m.Shard("weights")
			put(t, b, sh.Key, content(int(sh.Size), 99))
		}, "weights", checkpoint.ErrChecksumMismatch},
		{"missing shard", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			sh, _ := m.Shard("weights")
			if err := b.Delete(ctx, sh.Key); err != nil {
				t.Fatal(err)
			}
		}, "weights", checkpoint.ErrMissingShard},
		{"truncated", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			sh, _ := m.Shard("weights")
			put(t, b, sh.Key, content(int(sh.Size)/2, 2))
		}, "weights", checkpoint.ErrSizeMismatch},
		{"extended", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			sh, _ := m.Shard("state")
			put(t, b, sh.Key, []byte("state plus"))
		}, "state", checkpoint.ErrSizeMismatch},
		{"empty shard filled", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			sh, _ := m.Shard("empty")
			put(t, b, sh.Key, []byte("x"))
		}, "empty", checkpoint.ErrSizeMismatch},
		{"garbage manifest", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			put(t, b, m.Key, []byte("{\"version\": 1, \"shards\": [tru"))
		}, "", checkpoint.ErrBadManifest},
		{"manifest of another checkpoint", func(t *testing.T, m *checkpoint.Manifest, other []byte) {
			put(t, b, m.Key, other)
		}, "", checkpoint.ErrBadManifest},
		{"manifest from the future", func(t *testing.T, m *checkpoint.Manifest, _ []byte) {
			put(t, b, m.Key, []byte(`{"version": 2, "id": "`+m.ID.String()+`"}`))
		}, "", checkpoint.ErrBadManifest},
		{"shard outside its checkpoint", func(t *testing.T, m *checkpoint.Manifest, other []byte) {
			// Checkpoint 1's manifest, claiming to be 2's.
			put(t, b, m.Key, bytes.Replace(other, []byte(`"id": "000001.000.0000"`), []byte(`"id": "`+m.ID.String()+`"`), 1))
		}, "", checkpoint.ErrBadManifest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := "study-1/" + strings.ReplaceAll(tc.name, " ", "-")
			s := checkpoint.New(b)
			saveUnder := func(id checkpoint.ID, weights []byte) *checkpoint.Manifest {
				m, err := s.Save(ctx, p, checkpoint.Manifest{ID: id}, []checkpoint.Shard{
					checkpoint.BytesShard("weights", weights),
					checkpoint.BytesShard("state", []byte("state")),
					checkpoint.BytesShard("empty", nil),
				})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			good := saveUnder(checkpoint.ID{Segment: 1}, old)
			bad := saveUnder(checkpoint.ID{Segment: 2}, content(300_000, 2))
			goodManifest, err := b.Get(ctx, good.Key)
			if err != nil {
				t.Fatal(err)
			}
			goodBytes, _ := io.ReadAll(goodManifest)
			goodManifest.Close()
			tc.corrupt(t, bad, goodBytes)

			check := func(problems []checkpoint.Problem) {
				t.Helper()
				if len(problems) != 1 {
					t.Fatalf("problems = %v, want 1", problems)
				}
				pr := problems[0]
				if pr.Checkpoint != bad.ID || pr.Manifest != bad.Key || pr.Shard != tc.shard || !errors.Is(pr, tc.want) {
					t.Errorf("problem = %+v (%v), want checkpoint %v, shard %q, %v", pr, pr, bad.ID, tc.shard, tc.want)
				}
				if !strings.Contains(pr.Error(), bad.ID.String()) {
					t.Errorf("problem %q does not name the checkpoint", pr.Error())
				}
			}

			var mem checkpoint.Memory
			got, problems, err := s.Latest(ctx, p, &mem)
			if err != nil {
				t.Fatal(err)
			}
			sameManifest(t, got, good)
			check(problems)
			if w, _ := mem.Bytes("weights"); !bytes.Equal(w, old) {
				t.Error("Latest restored other weights than the good checkpoint's")
			}

			parent := t.TempDir()
			dir := filepath.Join(parent, "restore")
			got, problems, err = s.Latest(ctx, p, &checkpoint.Dir{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			sameManifest(t, got, good)
			check(problems)
			if w, err := os.ReadFile(filepath.Join(dir, "weights")); err != nil || !bytes.Equal(w, old) {
				t.Errorf("the restored directory holds other weights (%v)", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Errorf("the restore left %d entries beside its directory", len(entries)-1)
			}

			if _, err := s.Load(ctx, p, bad.ID, &mem); !errors.Is(err, tc.want) {
				t.Errorf("Load(%v) = %v, want %v", bad.ID, err, tc.want)
			}

			list, problems, err := s.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == checkpoint.ErrChecksumMismatch {
				// List reads no shard bytes, so it cannot see this.
				if len(list) != 2 || len(problems) != 0 {
					t.Errorf("List = %d manifests, problems %v; want both checkpoints listed", len(list), problems)
				}
			} else {
				if len(list) != 1 || list[0].ID != good.ID {
					t.Errorf("List = %v, want only %v", list, good.ID)
				}
				check(problems)
			}
		})
	}
}

func testNoCheckpoint(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	var mem checkpoint.Memory
	if _, problems, err := s.Latest(ctx, prefix, &mem); !errors.Is(err, checkpoint.ErrNoCheckpoint) || len(problems) > 0 {
		t.Fatalf("Latest on nothing = %v, %v; want ErrNoCheckpoint", problems, err)
	}
	m := save(t, s, checkpoint.ID{Segment: 1}, map[string][]byte{"w": []byte("weights")})
	put(t, b, m.Shards[0].Key, []byte("WEIGHTS"))
	_, problems, err := s.Latest(ctx, prefix, &mem)
	if !errors.Is(err, checkpoint.ErrNoCheckpoint) || len(problems) != 1 || !errors.Is(problems[0], checkpoint.ErrChecksumMismatch) {
		t.Fatalf("Latest with one corrupt checkpoint = %v, %v; want ErrNoCheckpoint and a checksum problem", problems, err)
	}
	if _, ok := mem.Bytes("w"); ok {
		t.Error("the corrupt shard stayed in the destination")
	}
}

func testZombie(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	newer := save(t, s, checkpoint.ID{Segment: 3, Attempt: 2}, map[string][]byte{"w": []byte("attempt 2")})
	// A zombie of attempt 1 saves later, and further along.
	zombie := save(t, s, checkpoint.ID{Segment: 3, Attempt: 1, Seq: 5}, map[string][]byte{"w": []byte("attempt 1, later")})
	got, mem, _ := latest(t, s)
	sameManifest(t, got, newer)
	if w, _ := mem.Bytes("w"); string(w) != "attempt 2" {
		t.Errorf("Latest restored %q", w)
	}
	// Saving an existing ID fails and replaces nothing.
	for _, m := range []*checkpoint.Manifest{newer, zombie} {
		_, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: m.ID}, []checkpoint.Shard{checkpoint.BytesShard("w", []byte("other bytes"))})
		if !errors.Is(err, blob.ErrExists) {
			t.Errorf("Save of existing %v = %v, want ErrExists", m.ID, err)
		}
	}
	got, mem, problems := latest(t, s)
	sameManifest(t, got, newer)
	if w, _ := mem.Bytes("w"); string(w) != "attempt 2" || len(problems) > 0 {
		t.Errorf("after the second Save: restored %q, problems %v", w, problems)
	}
}

// testRacingWriter has another writer save the same ID between Save's
// check for it and its uploads: the conditional Puts make Save fail
// without replacing or deleting what the other wrote.
func testRacingWriter(t *testing.T, b blob.Store) {
	ctx := t.Context()
	other := checkpoint.New(b)
	id := checkpoint.ID{Segment: 4, Attempt: 1}
	var once sync.Once
	var theirs *checkpoint.Manifest
	w := newWatch(b, 0)
	w.before = func(string) error {
		once.Do(func() {
			theirs = save(t, other, id, map[string][]byte{"w": []byte("theirs"), "v": []byte("theirs too")})
		})
		return nil
	}
	s := checkpoint.New(w)
	_, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: id}, []checkpoint.Shard{
		checkpoint.BytesShard("w", []byte("ours")),
		checkpoint.BytesShard("u", []byte("ours only")),
	})
	if !errors.Is(err, blob.ErrExists) {
		t.Fatalf("Save = %v, want ErrExists", err)
	}
	got, mem, problems := latest(t, other)
	sameManifest(t, got, theirs)
	if v, _ := mem.Bytes("w"); string(v) != "theirs" || len(problems) > 0 {
		t.Errorf("restored %q, problems %v", v, problems)
	}
	if left := keys(t, b, prefix+"/ckpt/"+id.String()+"/shards/u"); len(left) > 0 {
		t.Errorf("the failed Save left %q", left)
	}
}

func testLostManifestResponse(t *testing.T, b blob.Store) {
	ctx := t.Context()
	lost := errors.New("connection reset by peer")
	isManifest := func(key string) bool { return strings.HasSuffix(key, "/manifest.json") }

	// The manifest was written, but the answer lost: Save succeeds.
	w := newWatch(b, 0)
	w.after = func(key string) error {
		if isManifest(key) {
			return lost
		}
		return nil
	}
	m, err := checkpoint.New(w).Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: 1}}, []checkpoint.Shard{checkpoint.BytesShard("w", []byte("x"))})
	if err != nil {
		t.Fatalf("Save with the manifest written but its response lost: %v", err)
	}
	got, _, _ := latest(t, checkpoint.New(b))
	sameManifest(t, got, m)

	// The manifest was not written: Save fails and deletes its shards.
	w = newWatch(b, 0)
	w.before = func(key string) error {
		if isManifest(key) {
			return lost
		}
		return nil
	}
	id := checkpoint.ID{Segment: 2}
	_, err = checkpoint.New(w).Save(ctx, prefix, checkpoint.Manifest{ID: id}, []checkpoint.Shard{checkpoint.BytesShard("w", []byte("y"))})
	if !errors.Is(err, lost) {
		t.Fatalf("Save with the manifest not written = %v, want %v", err, lost)
	}
	if left := keys(t, b, prefix+"/ckpt/"+id.String()+"/"); len(left) > 0 {
		t.Errorf("the failed Save left %q", left)
	}
}

// ids lists the IDs of the visible checkpoints, newest first, broken ones
// included.
func ids(t *testing.T, b blob.Store) []int {
	t.Helper()
	var segs []int
	for _, k := range keys(t, b, prefix+"/ckpt/") {
		var seg int
		if _, err := fmt.Sscanf(strings.TrimPrefix(k, prefix+"/ckpt/"), "%06d.000.0000/manifest.json", &seg); err == nil &&
			strings.HasSuffix(k, "/manifest.json") {
			segs = append(segs, seg)
		}
	}
	slices.Reverse(segs)
	return segs
}

func testRetain(t *testing.T, b blob.Store) {
	ctx := t.Context()
	w := newWatch(b, 0)
	s := checkpoint.New(w)
	ms := map[int]*checkpoint.Manifest{}
	for seg := 1; seg <= 5; seg++ {
		ms[seg] = save(t, s, checkpoint.ID{Segment: seg}, map[string][]byte{"w": content(1000, uint64(seg)), "x/y": []byte("y")})
	}
	// 5 is torn: it does not count towards the 2 kept.
	if err := b.Delete(ctx, ms[5].Shards[0].Key); err != nil {
		t.Fatal(err)
	}
	foreign := prefix + "/ckpt/README"
	put(t, b, foreign, []byte("not a checkpoint"))

	if err := s.Retain(ctx, prefix, 2, checkpoint.ID{Segment: 1}); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, b); !slices.Equal(got, []int{5, 4, 3, 1}) {
		t.Fatalf("after Retain(2, keep 1): checkpoints %v, want [5 4 3 1]", got)
	}
	// The manifest of 2 went in a call before the one that took its shards.
	var deletes []string
	for _, e := range w.Events() {
		if d, ok := strings.CutPrefix(e, "delete "); ok {
			deletes = append(deletes, d)
		}
	}
	if len(deletes) != 2 || deletes[0] != ms[2].Key || strings.Contains(deletes[1], "manifest.json") ||
		!strings.Contains(deletes[1], ms[2].Shards[0].Key) {
		t.Fatalf("Delete calls %q, want the manifest of 2, then its shards", deletes)
	}

	if err := s.Retain(ctx, prefix, checkpoint.DefaultKeepLast); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, b); !slices.Equal(got, []int{5, 4, 3}) {
		t.Fatalf("after Retain(2): checkpoints %v, want [5 4 3]", got)
	}
	if err := s.Retain(ctx, prefix, 1); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, b); !slices.Equal(got, []int{5, 4}) {
		t.Fatalf("after Retain(1): checkpoints %v, want [5 4]", got)
	}
	if left := keys(t, b, prefix+"/ckpt/000003"); len(left) > 0 {
		t.Errorf("Retain left %q", left)
	}
	got, _, problems := latest(t, s)
	sameManifest(t, got, ms[4])
	if len(problems) != 1 || problems[0].Checkpoint != ms[5].ID {
		t.Errorf("problems %v, want one of checkpoint 5", problems)
	}
	if len(keys(t, b, foreign)) != 1 {
		t.Error("Retain deleted a key that is not a checkpoint's")
	}
	if err := s.Retain(ctx, prefix, 0); err == nil {
		t.Error("Retain(0) succeeded, want an error")
	}
}

func testOrphans(t *testing.T, b blob.Store) {
	ctx := t.Context()
	now := time.Now()
	s := checkpoint.New(b, checkpoint.WithClock(func() time.Time { return now }))
	save(t, s, checkpoint.ID{Segment: 1}, map[string][]byte{"w": []byte("1")})
	// A Save that died after a shard, of an older and of a newer ID.
	for _, id := range []string{"000000.000.0003", "000002.000.0000"} {
		put(t, b, prefix+"/ckpt/"+id+"/shards/w", []byte("orphan"))
	}
	if err := s.Retain(ctx, prefix, 1); err != nil {
		t.Fatal(err)
	}
	if n := len(keys(t, b, prefix+"/ckpt/")); n != 4 {
		t.Fatalf("Retain deleted young orphans: %d keys left, want 4", n)
	}
	later := checkpoint.New(b, checkpoint.WithClock(func() time.Time { return now.Add(2 * time.Hour) }))
	if err := later.Retain(ctx, prefix, 1); err != nil {
		t.Fatal(err)
	}
	if left := keys(t, b, prefix+"/ckpt/"); len(left) != 2 || !strings.Contains(left[0], "000001.000.0000") {
		t.Fatalf("after the orphan age: %q left, want checkpoint 1 only", left)
	}
	shorter := checkpoint.New(b, checkpoint.WithOrphanAge(0))
	put(t, b, prefix+"/ckpt/000003.000.0000/shards/w", []byte("orphan"))
	if err := shorter.Retain(ctx, prefix, 1); err != nil {
		t.Fatal(err)
	}
	if left := keys(t, b, prefix+"/ckpt/000003"); len(left) > 0 {
		t.Errorf("with WithOrphanAge(0): %q left", left)
	}
}

func testFinish(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	for _, keepNewest := range []bool{true, false} {
		ms := map[int]*checkpoint.Manifest{}
		for seg := 1; seg <= 3; seg++ {
			ms[seg] = save(t, s, checkpoint.ID{Segment: seg, Attempt: 0}, map[string][]byte{"w": content(100, uint64(seg))})
		}
		put(t, b, ms[3].Shards[0].Key, []byte("torn"))
		put(t, b, prefix+"/ckpt/000004.000.0000/shards/w", []byte("young orphan"))
		if err := s.PutResult(ctx, prefix, 3, 0, []byte(`{"status":"completed"}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, prefix, keepNewest); err != nil {
			t.Fatal(err)
		}
		left := keys(t, b, prefix+"/ckpt/")
		if keepNewest {
			if got := ids(t, b); !slices.Equal(got, []int{2}) || len(left) != 2 {
				t.Fatalf("Finish(keep newest) left %q, want checkpoint 2", left)
			}
			got, _, problems := latest(t, s)
			sameManifest(t, got, ms[2])
			if len(problems) > 0 {
				t.Errorf("problems: %v", problems)
			}
		} else if len(left) > 0 {
			t.Fatalf("Finish(keep none) left %q", left)
		}
		if _, err := s.GetResult(ctx, prefix, 3, 0); err != nil {
			t.Errorf("Finish deleted the segment result: %v", err)
		}
		if err := s.Finish(ctx, prefix, false); err != nil {
			t.Fatal(err)
		}
	}
}

func testNewestOfAttempt(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	var want *checkpoint.Manifest
	for _, id := range []checkpoint.ID{{2, 1, 0}, {2, 1, 1}, {2, 1, 2}, {2, 2, 0}, {3, 1, 0}, {1, 1, 7}} {
		m := save(t, s, id, map[string][]byte{"w": []byte(id.String())})
		if id == (checkpoint.ID{Segment: 2, Attempt: 1, Seq: 1}) {
			want = m
		}
		if id == (checkpoint.ID{Segment: 2, Attempt: 1, Seq: 2}) {
			if err := b.Delete(ctx, m.Shards[0].Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, problems, err := s.NewestOfAttempt(ctx, prefix, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameManifest(t, got, want)
	if len(problems) != 1 || problems[0].Checkpoint != (checkpoint.ID{Segment: 2, Attempt: 1, Seq: 2}) {
		t.Errorf("problems %v, want one of 000002.001.0002", problems)
	}
	if _, _, err := s.NewestOfAttempt(ctx, prefix, 2, 3); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Errorf("NewestOfAttempt of an attempt without checkpoints = %v, want ErrNoCheckpoint", err)
	}
	if _, _, err := s.NewestOfAttempt(ctx, prefix, 2, 1000); err == nil {
		t.Error("NewestOfAttempt(attempt 1000) succeeded, want an error")
	}
}

// tree reads every file under dir into a map keyed by slash path.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a %v", p, d.Type())
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func testDirRoundTrip(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	src := t.TempDir()
	big := string(content(1<<20, 7))
	write(t, filepath.Join(src, "model.pt"), big)
	write(t, filepath.Join(src, "manifest.json"), `{"mine": true}`)
	write(t, filepath.Join(src, "opt", "adam", "state.bin"), "adam")
	write(t, filepath.Join(src, "opt", "empty"), "")
	if err := os.Mkdir(filepath.Join(src, "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := tree(t, src)
	if err := os.Symlink(filepath.Join("opt", "adam", "state.bin"), filepath.Join(src, "latest")); err != nil {
		t.Fatal(err)
	}
	want["latest"] = "adam"

	shards, err := checkpoint.DirShards(src)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sh := range shards {
		names = append(names, sh.Name)
	}
	if wantNames := []string{"latest", "manifest.json", "model.pt", "opt/adam/state.bin", "opt/empty"}; !slices.Equal(names, wantNames) {
		t.Fatalf("DirShards names = %q, want %q", names, wantNames)
	}
	m, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: 1}}, shards)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "a", "restored")
	got, _, err := s.Latest(ctx, prefix, &checkpoint.Dir{Path: dst})
	if err != nil {
		t.Fatal(err)
	}
	sameManifest(t, got, m)
	if restored := tree(t, dst); !maps.Equal(restored, want) {
		t.Errorf("restored %d files differing from the %d saved", len(restored), len(want))
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("restored directory: %v, %v", fi, err)
	}

	// An empty directory can be restored into; a non-empty one cannot.
	empty := t.TempDir()
	if _, _, err := s.Latest(ctx, prefix, &checkpoint.Dir{Path: empty}); err != nil {
		t.Errorf("restore into an empty directory: %v", err)
	}
	if _, _, err := s.Latest(ctx, prefix, &checkpoint.Dir{Path: dst}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into a non-empty directory = %v, want an error", err)
	}
	if restored := tree(t, dst); !maps.Equal(restored, want) {
		t.Error("a refused restore changed the directory")
	}

	// Links out of the directory, and special files, are refused.
	outside := filepath.Join(t.TempDir(), "secret")
	write(t, outside, "secret")
	for _, tc := range []struct {
		name string
		make func(dir string) error
	}{
		{"link outside", func(dir string) error { return os.Symlink(outside, filepath.Join(dir, "x")) }},
		{"relative link outside", func(dir string) error { return os.Symlink("../../etc/passwd", filepath.Join(dir, "x")) }},
		{"link to a directory", func(dir string) error {
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
				return err
			}
			return os.Symlink("d", filepath.Join(dir, "x"))
		}},
		{"fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "x"), 0o644) }},
	} {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "ok"), "ok")
		if err := tc.make(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.DirShards(dir); err == nil || !strings.Contains(err.Error(), "x") {
			t.Errorf("DirShards with a %s = %v, want an error naming it", tc.name, err)
		}
	}
}

func testResults(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	result := []byte(`{"status":"completed","resource_reached":12}`)
	if _, err := s.GetResult(ctx, prefix, 3, 1); !errors.Is(err, checkpoint.ErrNoResult) || !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("GetResult of nothing = %v, want ErrNoResult and blob.ErrNotFound", err)
	}
	if err := s.PutResult(ctx, prefix, 3, 1, result); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(ctx, prefix, 3, 1, slices.Clone(result)); err != nil {
		t.Errorf("PutResult of the same bytes again: %v", err)
	}
	if err := s.PutResult(ctx, prefix, 3, 1, []byte(`{"status":"failed"}`)); !errors.Is(err, blob.ErrExists) {
		t.Errorf("PutResult of other bytes = %v, want ErrExists", err)
	}
	if err := s.PutResult(ctx, prefix, 3, 2, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResult(ctx, prefix, 3, 1)
	if err != nil || !bytes.Equal(got, result) {
		t.Errorf("GetResult = %q, %v; want %q", got, err, result)
	}
	if k := keys(t, b, prefix+"/results/"); !slices.Equal(k, []string{prefix + "/results/000003.001.json", prefix + "/results/000003.002.json"}) {
		t.Errorf("results stored as %q", k)
	}
	if err := s.PutResult(ctx, prefix, -1, 0, result); err == nil {
		t.Error("PutResult(segment -1) succeeded")
	}
	// Cancellation marks: per attempt, idempotent, and not results.
	if got, err := s.Cancelled(ctx, prefix, 3, 4); err != nil || got {
		t.Fatalf("Cancelled before Cancel = %v, %v", got, err)
	}
	for range 2 {
		if err := s.Cancel(ctx, prefix, 3, 4); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
	}
	if got, err := s.Cancelled(ctx, prefix, 3, 4); err != nil || !got {
		t.Errorf("Cancelled after Cancel = %v, %v", got, err)
	}
	if got, _ := s.Cancelled(ctx, prefix, 3, 1); got {
		t.Error("cancelling attempt 4 cancelled attempt 1")
	}
	if _, err := s.GetResult(ctx, prefix, 3, 4); !errors.Is(err, checkpoint.ErrNoResult) {
		t.Errorf("GetResult of a cancelled attempt = %v, want ErrNoResult", err)
	}
}

func testBadInput(t *testing.T, b blob.Store) {
	ctx := t.Context()
	s := checkpoint.New(b)
	one := []checkpoint.Shard{checkpoint.BytesShard("w", []byte("w"))}
	for _, tc := range []struct {
		name   string
		prefix string
		id     checkpoint.ID
		shards []checkpoint.Shard
	}{
		{"absolute prefix", "/study/trial", checkpoint.ID{}, one},
		{"trailing slash", "study/trial/", checkpoint.ID{}, one},
		{"empty prefix", "", checkpoint.ID{}, one},
		{"seq out of range", prefix, checkpoint.ID{Seq: 10000}, one},
		{"negative segment", prefix, checkpoint.ID{Segment: -1}, one},
		{"duplicate names", prefix, checkpoint.ID{}, append(slices.Clone(one), one...)},
		{"name and folder", prefix, checkpoint.ID{}, append(slices.Clone(one), checkpoint.BytesShard("w/x", nil))},
		{"dot-dot name", prefix, checkpoint.ID{}, []checkpoint.Shard{checkpoint.BytesShard("../w", nil)}},
		{"negative size", prefix, checkpoint.ID{}, []checkpoint.Shard{{Name: "w", Size: -1, Open: one[0].Open}}},
		{"no Open", prefix, checkpoint.ID{}, []checkpoint.Shard{{Name: "w"}}},
	} {
		if _, err := s.Save(ctx, tc.prefix, checkpoint.Manifest{ID: tc.id}, tc.shards); err == nil {
			t.Errorf("Save with %s succeeded", tc.name)
		}
	}
	if k := keys(t, b, ""); len(k) > 0 {
		t.Errorf("bad Saves wrote %q", k)
	}
}

func testCanceled(t *testing.T, b blob.Store) {
	s := checkpoint.New(b)
	save(t, s, checkpoint.ID{Segment: 1}, map[string][]byte{"w": []byte("w")})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Save(ctx, prefix, checkpoint.Manifest{ID: checkpoint.ID{Segment: 2}}, []checkpoint.Shard{checkpoint.BytesShard("w", nil)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Save = %v, want context.Canceled", err)
	}
	var mem checkpoint.Memory
	if _, _, err := s.Latest(ctx, prefix, &mem); !errors.Is(err, context.Canceled) {
		t.Errorf("Latest = %v, want context.Canceled", err)
	}
	if err := s.Retain(ctx, prefix, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Retain = %v, want context.Canceled", err)
	}
	if len(keys(t, b, prefix+"/ckpt/000002")) > 0 {
		t.Error("a canceled Save wrote objects")
	}
}

// testCopyLatest copies a trial's newest checkpoint below a resource to
// another trial, as PBT's exploit does: the copy restores the same bytes;
// a checkpoint at or past the limit is passed over; what an earlier copy
// left at the ID, whole or cut off, is replaced; and Drop removes it.
func testCopyLatest(t *testing.T, b blob.Store) {
	s := checkpoint.New(b)
	ctx := t.Context()
	const to = "study-1/trial-9"
	save(t, s, checkpoint.ID{Segment: 1, Attempt: 1}, map[string][]byte{"w": content(100, 1)})
	newest := map[string][]byte{"w": content(3000, 2), "opt/m": content(10, 3)}
	save(t, s, checkpoint.ID{Segment: 2, Attempt: 2}, newest)
	save(t, s, checkpoint.ID{Segment: 9, Attempt: 3}, map[string][]byte{"w": content(50, 4)}) // at the limit
	id := checkpoint.ID{Segment: 4, Attempt: 5, Seq: 9999}

	// Shards of an earlier copy that died before its manifest.
	put(t, b, to+"/ckpt/"+id.String()+"/shards/w", []byte("partial"))
	ref, err := s.CopyBelow(ctx, prefix, to, 9, id, 9)
	if err != nil {
		t.Fatalf("CopyBelow: %v", err)
	}
	if ref.ID != id.String() || ref.Resource != 2 || ref.Bytes != 3010 {
		t.Errorf("copy = %+v, want ID %s, resource 2 and 3010 bytes", ref, id)
	}
	var mem checkpoint.Memory
	m, err := s.Load(ctx, to, id, &mem)
	if err != nil {
		t.Fatalf("Load the copy: %v", err)
	}
	if m.Trial != 9 || m.Study != "study-1" {
		t.Errorf("copy belongs to %s trial %d, want study-1 trial 9", m.Study, m.Trial)
	}
	for name, want := range newest {
		if got, _ := mem.Bytes(name); !bytes.Equal(got, want) {
			t.Errorf("shard %s of the copy differs from the source's", name)
		}
	}
	// A whole copy already there is replaced, here by an older checkpoint.
	again, err := s.CopyBelow(ctx, prefix, to, 9, id, 2)
	if err != nil || again.Resource != 1 {
		t.Errorf("CopyBelow over an earlier copy = %+v, %v; want a new copy of the checkpoint at 1", again, err)
	}
	if _, err := s.CopyBelow(ctx, prefix, to, 9, id, 1); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Errorf("CopyBelow with nothing below the limit = %v, want ErrNoCheckpoint", err)
	}
	if _, err := s.CopyBelow(ctx, "study-1/trial-3", to, 9, checkpoint.ID{Segment: 5, Attempt: 1}, 100); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Errorf("CopyBelow from a trial without checkpoints: %v, want ErrNoCheckpoint", err)
	}
	if err := s.Drop(ctx, prefix, checkpoint.ID{Segment: 1, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, prefix, checkpoint.ID{Segment: 1, Attempt: 1}); err != nil {
		t.Errorf("Drop of nothing: %v", err)
	}
	if k := keys(t, b, prefix+"/ckpt/000001.001.0000/"); len(k) != 0 {
		t.Errorf("after Drop the checkpoint still holds %q", k)
	}
}
