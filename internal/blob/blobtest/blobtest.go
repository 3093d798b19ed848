// Package blobtest is the conformance suite of blob.Store: one set of tests
// that every implementation runs.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
)

// LargeSize is the size of the suite's largest objects (12 MiB). A store
// that uploads large objects in parts should be built by the test's
// factory with a part threshold below it (and parts of at least 5 MiB for
// S3), so that the suite exercises the multipart path.
const LargeSize = 12 << 20

// Exercise runs the conformance suite. newStore returns an empty store for
// each subtest (and registers its cleanup with t); the subtests run in
// parallel.
func Exercise(t *testing.T, newStore func(t *testing.T) blob.Store) {
	t.Helper()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if s.URI() == "" {
			t.Error("URI() is empty")
		}
		for _, size := range []int{0, 1, 1 << 20, LargeSize} {
			key := fmt.Sprintf("round/trip-%d", size)
			want := content(size, uint64(size))
			put(t, s, key, want, blob.PutOptions{})
			if got := get(t, s, key); !bytes.Equal(got, want) {
				t.Errorf("Get(%q) returned %d bytes differing from the %d put", key, len(got), len(want))
			}
		}
		infos := list(t, s, "round/")
		if len(infos) != 4 {
			t.Fatalf("List(round/) = %v, want 4 objects", keys(infos))
		}
		for _, info := range infos {
			var size int64
			if _, err := fmt.Sscanf(info.Key, "round/trip-%d", &size); err != nil || info.Size != size {
				t.Errorf("List(round/) has %q with size %d", info.Key, info.Size)
			}
			if age := time.Since(info.Modified); age < -time.Hour || age > time.Hour {
				t.Errorf("List(round/) has %q modified at %v, not about now", info.Key, info.Modified)
			}
		}
	})

	t.Run("GetMissing", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		put(t, s, "dir/obj", []byte("x"), blob.PutOptions{})
		for _, key := range []string{"missing", "dir", "dir/obj/below", "dir/ob"} {
			r, err := s.Get(ctx, key)
			if err == nil {
				_ = r.Close()
			}
			if !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		put(t, s, "k", []byte("first, longer version"), blob.PutOptions{})
		put(t, s, "k", []byte("second"), blob.PutOptions{})
		if got := get(t, s, "k"); string(got) != "second" {
			t.Errorf("Get after overwrite = %q, want %q", got, "second")
		}
		if infos := list(t, s, ""); len(infos) != 1 || infos[0].Size != int64(len("second")) {
			t.Errorf("List after overwrite = %+v, want one object of 6 bytes", infos)
		}
	})

	t.Run("IfNotExists", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		for _, size := range []int{5, LargeSize} {
			key := fmt.Sprintf("cond/%d", size)
			orig := content(size, 1)
			put(t, s, key, orig, blob.PutOptions{IfNotExists: true})
			other := content(size, 2)
			err := s.Put(ctx, key, bytes.NewReader(other), int64(size), blob.PutOptions{IfNotExists: true})
			if !errors.Is(err, blob.ErrExists) {
				t.Errorf("second Put(%q, IfNotExists) of %d bytes = %v, want ErrExists", key, size, err)
			}
			if got := get(t, s, key); !bytes.Equal(got, orig) {
				t.Errorf("Get(%q) after a refused Put does not return the original %d bytes", key, size)
			}
		}
		if infos := list(t, s, ""); len(infos) != 2 {
			t.Errorf("List = %v, want the 2 original objects only", keys(infos))
		}
	})

	t.Run("IfNotExistsConcurrent", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		// Small objects only: moto checks If-None-Match and then writes
		// without a lock, and its CompleteMultipartUpload takes long enough
		// that concurrent ones all succeed (real S3 lets one win).
		const writers = 8
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				body := []byte(fmt.Sprintf("writer %d", i))
				errs[i] = s.Put(ctx, "race", bytes.NewReader(body), int64(len(body)), blob.PutOptions{IfNotExists: true})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("writers %d and %d both won Put(IfNotExists)", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, blob.ErrExists):
				t.Errorf("writer %d: Put(IfNotExists) = %v, want nil or ErrExists", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won Put(IfNotExists)")
		}
		if got, want := string(get(t, s, "race")), fmt.Sprintf("writer %d", winner); got != want {
			t.Errorf("Get(race) = %q, want the winner's %q", got, want)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		all := []string{"a.x", "a/b", "a/b1/x", "a/b2/y/z", "a/bc", "a/c", "b"}
		for _, key := range slices.Backward(all) {
			put(t, s, key, []byte(key), blob.PutOptions{})
		}
		for _, tc := range []struct {
			prefix string
			want   []string
		}{
			{"", all},
			{"a", all[:6]},
			{"a/", all[1:6]},
			{"a/b", all[1:5]},
			{"a/b1", []string{"a/b1/x"}},
			{"a/b1/", []string{"a/b1/x"}},
			{"a/b2/y/", []string{"a/b2/y/z"}},
			{"a/b2/y/z", []string{"a/b2/y/z"}},
			{"a/b2/y/z/", nil},
			{"a/.", nil},
			{"b", []string{"b"}},
			{"c", nil},
			{"zzz/", nil},
			{"b/", nil},
		} {
			infos := list(t, s, tc.prefix)
			if got := keys(infos); !slices.Equal(got, tc.want) {
				t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
			}
			for _, info := range infos {
				if info.Size != int64(len(info.Key)) {
					t.Errorf("List(%q): %q has size %d, want %d", tc.prefix, info.Key, info.Size, len(info.Key))
				}
			}
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		for _, key := range []string{"d/1", "d/2", "d/sub/3", "keep"} {
			put(t, s, key, []byte(key), blob.PutOptions{})
		}
		if err := s.Delete(ctx); err != nil {
			t.Errorf("Delete() with no keys = %v", err)
		}
		if err := s.Delete(ctx, "d/1", "missing", "d/sub/3", "d/sub/3", "d"); err != nil {
			t.Fatalf("Delete of present, missing and repeated keys = %v", err)
		}
		if got := keys(list(t, s, "")); !slices.Equal(got, []string{"d/2", "keep"}) {
			t.Errorf("List after Delete = %q, want [d/2 keep]", got)
		}
		if _, err := s.Get(ctx, "d/1"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get of a deleted key = %v, want ErrNotFound", err)
		}
		// Where a deleted object was, a new one can be put.
		put(t, s, "d/sub/3", []byte("again"), blob.PutOptions{IfNotExists: true})
		if got := get(t, s, "d/sub/3"); string(got) != "again" {
			t.Errorf("Get of a key put again after Delete = %q, want %q", got, "again")
		}
	})

	t.Run("DeleteMany", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		const n = 1100 // more than one S3 DeleteObjects batch (1000)
		many := make([]string, n)
		for i := range many {
			many[i] = fmt.Sprintf("many/%04d", i)
		}
		var wg sync.WaitGroup
		work := make(chan string)
		for range 8 {
			wg.Go(func() {
				for key := range work {
					if err := s.Put(ctx, key, bytes.NewReader(nil), 0, blob.PutOptions{}); err != nil {
						t.Errorf("Put(%q) = %v", key, err)
					}
				}
			})
		}
		for _, key := range many {
			work <- key
		}
		close(work)
		wg.Wait()
		put(t, s, "other", []byte("o"), blob.PutOptions{})
		if got := len(list(t, s, "many/")); got != n {
			t.Fatalf("List(many/) after %d puts has %d objects", n, got)
		}
		if err := s.Delete(ctx, many...); err != nil {
			t.Fatalf("Delete of %d keys = %v", n, err)
		}
		if got := keys(list(t, s, "")); !slices.Equal(got, []string{"other"}) {
			t.Errorf("List after deleting %d keys = %d keys starting %q, want [other]", n, len(got), got[:min(len(got), 3)])
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		put(t, s, "ok", []byte("ok"), blob.PutOptions{})
		for _, key := range []string{"", "/a", "a//b", "a/", "./a", "a/./b", "a/..", "../a", "a/../b", "a\x00b", "\xff"} {
			if err := s.Put(ctx, key, bytes.NewReader([]byte("x")), 1, blob.PutOptions{}); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
			}
			if r, err := s.Get(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
				if err == nil {
					_ = r.Close()
				}
				t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
			}
			if err := s.Delete(ctx, "ok", key); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("Delete(ok, %q) = %v, want ErrInvalidKey", key, err)
			}
		}
		for _, prefix := range []string{"/", "/a", "a//", "../", "a/../", "./"} {
			if _, err := s.List(ctx, prefix); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("List(%q) = %v, want ErrInvalidKey", prefix, err)
			}
		}
		// A Delete with an invalid key deletes nothing.
		if got := keys(list(t, s, "")); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("List after invalid calls = %q, want [ok]", got)
		}
	})

	t.Run("Canceled", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		put(t, s, "present", []byte("p"), blob.PutOptions{})
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(done, "new", bytes.NewReader([]byte("n")), 1, blob.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Put with a canceled ctx = %v, want context.Canceled", err)
		}
		if r, err := s.Get(done, "present"); !errors.Is(err, context.Canceled) {
			if err == nil {
				_ = r.Close()
			}
			t.Errorf("Get with a canceled ctx = %v, want context.Canceled", err)
		}
		if _, err := s.List(done, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("List with a canceled ctx = %v, want context.Canceled", err)
		}
		if err := s.Delete(done, "present"); !errors.Is(err, context.Canceled) {
			t.Errorf("Delete with a canceled ctx = %v, want context.Canceled", err)
		}
		// Canceled while the body is being read.
		for _, size := range []int{1 << 20, LargeSize} {
			mid, cancel := context.WithCancel(ctx)
			r := &failingReader{r: bytes.NewReader(content(size, 3)), after: int64(size / 2), fail: func() error {
				cancel()
				return nil
			}}
			key := fmt.Sprintf("mid/%d", size)
			if err := s.Put(mid, key, r, int64(size), blob.PutOptions{}); !errors.Is(err, context.Canceled) {
				t.Errorf("Put of %d bytes canceled midway = %v, want context.Canceled", size, err)
			}
		}
		if got := keys(list(t, s, "")); !slices.Equal(got, []string{"present"}) {
			t.Errorf("List after canceled calls = %q, want [present]", got)
		}
	})

	t.Run("FailedPut", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := newStore(t)
		errBoom := errors.New("boom")
		for _, size := range []int{1 << 20, LargeSize} {
			fresh := fmt.Sprintf("fresh/%d", size)
			old := fmt.Sprintf("old/%d", size)
			orig := content(size, 4)
			put(t, s, old, orig, blob.PutOptions{})
			for _, key := range []string{fresh, old} {
				for _, ifNotExists := range []bool{false, true} {
					if key == old && ifNotExists {
						continue // refused before the body matters
					}
					r := &failingReader{r: bytes.NewReader(content(size, 5)), after: int64(size / 2), fail: func() error { return errBoom }}
					err := s.Put(ctx, key, r, int64(size), blob.PutOptions{IfNotExists: ifNotExists})
					if !errors.Is(err, errBoom) {
						t.Errorf("Put(%q) of %d bytes whose reader fails midway = %v, want an error wrapping the reader's", key, size, err)
					}
				}
			}
			if r, err := s.Get(ctx, fresh); !errors.Is(err, blob.ErrNotFound) {
				if err == nil {
					_ = r.Close()
				}
				t.Errorf("Get(%q) after failed Puts = %v, want ErrNotFound", fresh, err)
			}
			if got := get(t, s, old); !bytes.Equal(got, orig) {
				t.Errorf("Get(%q) after failed Puts does not return the original %d bytes", old, size)
			}
		}
		// A reader shorter or longer than the size given.
		for _, tc := range []struct {
			body string
			size int64
		}{{"short", 10}, {"longer than five", 5}, {"", 1}, {"x", 0}} {
			if err := s.Put(ctx, "sized", bytes.NewReader([]byte(tc.body)), tc.size, blob.PutOptions{}); err == nil {
				t.Errorf("Put of %d bytes with size %d succeeded, want an error", len(tc.body), tc.size)
			}
		}
		if err := s.Put(ctx, "sized", bytes.NewReader(nil), -1, blob.PutOptions{}); err == nil {
			t.Error("Put with size -1 succeeded, want an error")
		}
		if got := keys(list(t, s, "")); !slices.Equal(got, []string{"old/1048576", "old/12582912"}) {
			t.Errorf("List after failed Puts = %q, want the 2 original objects", got)
		}
	})
}

// content returns size deterministic pseudo-random bytes.
func content(size int, seed uint64) []byte {
	b := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func put(t *testing.T, s blob.Store, key string, body []byte, opts blob.PutOptions) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), opts); err != nil {
		t.Fatalf("Put(%q, %d bytes, %+v) = %v", key, len(body), opts, err)
	}
}

func get(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Get(%q): close: %v", key, err)
	}
	return b
}

func list(t *testing.T, s blob.Store, prefix string) []blob.Info {
	t.Helper()
	infos, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q) = %v", prefix, err)
	}
	return infos
}

func keys(infos []blob.Info) []string {
	var ks []string
	for _, info := range infos {
		ks = append(ks, info.Key)
	}
	return ks
}

// failingReader reads r until after bytes have been read, then calls fail:
// a non-nil error is returned from then on, a nil one lets reading go on.
type failingReader struct {
	r     io.Reader
	after int64
	read  int64
	fail  func() error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.fail != nil && f.read >= f.after {
		err := f.fail()
		if err != nil {
			return 0, err
		}
		f.fail = nil
	}
	if f.fail != nil && int64(len(p)) > f.after-f.read {
		p = p[:f.after-f.read]
	}
	n, err := f.r.Read(p)
	f.read += int64(n)
	return n, err
}

// BenchmarkPutGet writes and reads back one object of size bytes per
// iteration, overwriting the same key. Besides the combined MB/s of
// b.SetBytes it reports put-MB/s and get-MB/s, each phase timed alone.
func BenchmarkPutGet(b *testing.B, s blob.Store, size int) {
	ctx := b.Context()
	data := content(size, 7)
	buf := make([]byte, 1<<20)
	var putTime, getTime time.Duration
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := s.Put(ctx, "bench/object", bytes.NewReader(data), int64(size), blob.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		r, err := s.Get(ctx, "bench/object")
		if err != nil {
			b.Fatal(err)
		}
		// Read as a consumer copying to a file would, in 1 MiB chunks.
		n, err := io.CopyBuffer(onlyWriter{io.Discard}, r, buf)
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		if err != nil || n != int64(size) {
			b.Fatalf("read back %d of %d bytes: %v", n, size, err)
		}
		putTime += mid.Sub(start)
		getTime += time.Since(mid)
	}
	mb := float64(b.N) * float64(size) / 1e6
	b.ReportMetric(mb/putTime.Seconds(), "put-MB/s")
	b.ReportMetric(mb/getTime.Seconds(), "get-MB/s")
}

// onlyWriter hides a writer's ReadFrom, so that io.CopyBuffer uses its
// buffer.
type onlyWriter struct{ io.Writer }
