package boltqueue

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Exercise(t, func(t *testing.T, cfg queue.Config) queue.Queue {
		return openTest(t, filepath.Join(t.TempDir(), "queue.db"), cfg)
	})
}

// openTest opens the queue at path, checks its consistency when the test
// ends and closes it.
func openTest(t *testing.T, path string, cfg queue.Config) *Queue {
	t.Helper()
	q, err := Open(path, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		checkConsistency(t, q)
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// checkConsistency checks that the queue's buckets agree: every waiting or
// leased job has exactly the index entry its record names, every lease
// entry belongs to a leased job with that token, and nothing else is there.
// It also runs bbolt's own check of the file.
func checkConsistency(t *testing.T, q *Queue) {
	t.Helper()
	select {
	case <-q.closed:
		if q.ownsDB {
			return
		}
	default:
	}
	err := q.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		b, err := q.buckets(tx)
		if err != nil {
			return err
		}
		indexed, leased := 0, 0
		err = b.jobs.ForEach(func(k, v []byte) error {
			r, err := decode(v)
			if err != nil {
				return err
			}
			if r.ID != string(k) {
				t.Errorf("job under key %q has ID %q", k, r.ID)
			}
			switch r.State {
			case stateWaiting, stateLeased:
				indexed++
				if got := b.index.Get(indexKey(r.At, r.Seq)); string(got) != r.ID {
					t.Errorf("job %s: index entry at %d/%d holds %q", r.ID, r.At, r.Seq, got)
				}
			case stateDead:
				if r.DiedAt == 0 || r.Failures < q.cfg.MaxAttempts || r.At != 0 || r.Seq != 0 {
					t.Errorf("dead job %s: died at %d after %d failures, index entry %d/%d", r.ID, r.DiedAt, r.Failures, r.At, r.Seq)
				}
			default:
				t.Errorf("job %s: unknown state %q", r.ID, r.State)
			}
			if r.State == stateLeased {
				leased++
				if got := b.leases.Get([]byte(r.Token)); string(got) != r.ID {
					t.Errorf("job %s: lease entry of its token holds %q", r.ID, got)
				}
			} else if r.Token != "" || r.Owner != "" {
				t.Errorf("%s job %s has token %q owner %q", r.State, r.ID, r.Token, r.Owner)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n := b.index.Stats().KeyN; n != indexed {
			t.Errorf("index has %d entries, want %d", n, indexed)
		}
		if n := b.leases.Stats().KeyN; n != leased {
			t.Errorf("leases has %d entries, want %d", n, leased)
		}
		return nil
	})
	if err != nil {
		t.Errorf("check consistency: %v", err)
	}
}

// TestDurability closes a queue with jobs in every state and checks that
// they are all there after it is opened again.
func TestDurability(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "queue.db")
	cfg := queue.Config{MaxAttempts: 1}
	q, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx,
		queue.Job{ID: "a", Payload: []byte("pa")},
		queue.Job{ID: "b", Payload: []byte("pb")},
		queue.Job{ID: "c", Payload: []byte("pc")},
		queue.Job{ID: "d", Delay: time.Hour},
	); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Lease(ctx, queue.LeaseParams{Max: 2, Visibility: time.Hour, Owner: "coordinator-1"})
	if err != nil || len(ls) != 2 || ls[0].Job.ID != "a" || ls[1].Job.ID != "b" {
		t.Fatalf("Lease = %+v, %v; want a and b", ls, err)
	}
	if err := q.Nack(ctx, ls[1].Token, "boom"); err != nil {
		t.Fatal(err)
	}
	checkConsistency(t, q)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q = openTest(t, path, cfg)
	if st, err := q.Stats(ctx); err != nil || st != (queue.Stats{Ready: 1, Delayed: 1, Leased: 1, Dead: 1}) {
		t.Errorf("Stats after reopen = %+v, %v", st, err)
	}
	if dead, err := q.Dead(ctx); err != nil || len(dead) != 1 || dead[0].Job.ID != "b" || dead[0].Cause != "boom" || string(dead[0].Job.Payload) != "pb" {
		t.Errorf("Dead after reopen = %+v, %v; want b, dead of boom", dead, err)
	}
	// The restarted coordinator finds its lease and gives it back.
	info, err := q.Get(ctx, "a")
	if err != nil || info.State != queue.StateLeased || info.Token != ls[0].Token || info.Owner != "coordinator-1" {
		t.Fatalf("Get(a) after reopen = %+v, %v; want leased by coordinator-1 with the same token", info, err)
	}
	if err := q.Release(ctx, info.Token); err != nil {
		t.Fatalf("Release after reopen: %v", err)
	}
	ls, err = q.Lease(ctx, queue.LeaseParams{Max: 3, Visibility: time.Hour})
	if err != nil || len(ls) != 2 || ls[0].Job.ID != "c" || ls[1].Job.ID != "a" || ls[1].Attempt != 1 || string(ls[1].Job.Payload) != "pa" {
		t.Fatalf("Lease after release = %+v, %v; want c, then a at attempt 1", ls, err)
	}
	if err := q.Ack(ctx, ls[0].Token, ls[1].Token); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if res, err := q.Enqueue(ctx, queue.Job{ID: "b"}); err != nil || !slices.Equal(res.Existing, []string{"b"}) {
		t.Errorf("Enqueue of the dead job after reopen = %+v, %v", res, err)
	}
}

// TestDeadHolder leases a job and closes the queue without ending the lease,
// as a process that dies does; after a reopen the job comes back when the
// lease expires, as a failed attempt.
func TestDeadHolder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := Open(path, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queue.Job{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	const vis = time.Second
	start := time.Now()
	old, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: vis, Owner: "dead-process"})
	if err != nil || len(old) != 1 {
		t.Fatalf("Lease = %+v, %v", old, err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q = openTest(t, path, queue.Config{})
	ls, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: time.Hour, Wait: 10 * time.Second})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease after reopen = %+v, %v; want the job back", ls, err)
	}
	if elapsed := time.Since(start); elapsed < vis {
		t.Errorf("job back after %s, before its lease of %s expired", elapsed, vis)
	}
	if l := ls[0]; l.Job.ID != "a" || l.Attempt != 2 || l.Token == old[0].Token {
		t.Errorf("lease after reopen = %+v; want a at attempt 2 with a new token", l)
	}
	if info, err := q.Get(ctx, "a"); err != nil || info.Failures != 1 || !strings.Contains(info.Cause, "dead-process") {
		t.Errorf("Get(a) = %+v, %v; want 1 failure whose cause names dead-process", info, err)
	}
	if err := q.Ack(ctx, old[0].Token); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Ack with the dead holder's token = %v, want ErrLeaseLost", err)
	}
}

// TestOrder checks the order boltqueue promises: by visibility time, then
// by enqueue order.
func TestOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := openTest(t, filepath.Join(t.TempDir(), "queue.db"), queue.Config{})
	var want []string
	for batch := range 2 {
		var jobs []queue.Job
		for i := range 5 {
			id := fmt.Sprintf("j%d", batch*5+i)
			jobs = append(jobs, queue.Job{ID: id})
			want = append(want, id)
		}
		if _, err := q.Enqueue(ctx, jobs...); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(max int) []queue.Lease {
		t.Helper()
		ls, err := q.Lease(ctx, queue.LeaseParams{Max: max, Visibility: time.Hour, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	ids := func(ls []queue.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Job.ID)
		}
		return out
	}
	first := lease(1)
	second := lease(1)
	// A released job goes behind the jobs that became visible before.
	if err := q.Release(ctx, first[0].Token); err != nil {
		t.Fatal(err)
	}
	rest := lease(20)
	got := slices.Concat(ids(first), ids(second), ids(rest))
	want = append(want, want[0])
	if !slices.Equal(got, want) {
		t.Errorf("leased in order %v, want %v", got, want)
	}

	if _, err := q.Enqueue(ctx, queue.Job{ID: "late", Delay: 400 * time.Millisecond}, queue.Job{ID: "early", Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := slices.Concat(ids(lease(2)), ids(lease(2))); !slices.Equal(got, []string{"early", "late"}) {
		t.Errorf("delayed jobs leased in order %v, want [early late]", got)
	}
}

func TestOpenInUse(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	openTest(t, path, queue.Config{})
	_, err := Open(path, queue.Config{})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), path) {
		t.Errorf("second Open = %v; want ErrInUse naming %s", err, path)
	}
}

func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "queue.db"), queue.Config{MaxAttempts: -1}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("Open with MaxAttempts -1 = %v, want ErrInvalid", err)
	}
	if _, err := Open(filepath.Join(dir, "no-such-dir", "queue.db"), queue.Config{}); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	db := openDB(t)
	if _, err := New(db, queue.Config{}, WithBucket("")); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("New with an empty bucket name = %v, want ErrInvalid", err)
	}
}

// TestCloseShared checks that closing a queue made with New leaves the
// database open, fails later calls and wakes a waiting Lease.
func TestCloseShared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openDB(t)
	q, err := New(db, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(db, queue.Config{}, WithBucket("other"))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // let Lease start waiting
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Lease waiting during Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a waiting Lease")
	}
	if _, err := q.Enqueue(ctx, queue.Job{ID: "a"}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	if err := q.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	// The database and the other queue in it are still usable.
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("studies"))
		if err != nil {
			return err
		}
		return b.Put([]byte("s1"), []byte("study"))
	})
	if err != nil {
		t.Errorf("write to the database after closing a queue in it: %v", err)
	}
	if res, err := other.Enqueue(ctx, queue.Job{ID: "a", Payload: []byte("x")}); err != nil || len(res.Added) != 1 {
		t.Errorf("Enqueue on the other queue = %+v, %v", res, err)
	}
	if info, err := other.Get(ctx, "a"); err != nil || !bytes.Equal(info.Job.Payload, []byte("x")) {
		t.Errorf("Get on the other queue = %+v, %v", info, err)
	}
	checkConsistency(t, other)
}
