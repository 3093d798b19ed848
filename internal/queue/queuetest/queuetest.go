// Package queuetest is the conformance suite of queue.Queue: one set of
// tests that every implementation runs with Exercise.
//
// The suite uses only the queue.Queue interface and asserts only what its
// contract promises: it assumes no order of delivery, and it waits for
// things that take time (a lease to expire, a backoff to end) by polling
// with a deadline. Visibilities and delays are of whole seconds or more
// where an implementation may round them (SQS has 1 s granularity). The
// subtests run in parallel; against a local implementation the suite takes a
// few seconds.
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

const (
	// short is the visibility of leases that a test lets expire.
	short = time.Second
	// long is the visibility of leases that must not expire during a test.
	long = time.Minute
	// patience bounds every wait for something that should happen.
	patience = 10 * time.Second
)

// Exercise runs the conformance suite. newQueue must return a new, empty
// queue configured with cfg (the zero Config means the defaults) every time
// it is called, and close it when the test ends (with t.Cleanup).
func Exercise(t *testing.T, newQueue func(t *testing.T, cfg queue.Config) queue.Queue) {
	t.Helper()
	for _, tc := range []struct {
		name string
		cfg  queue.Config
		test func(t *testing.T, q queue.Queue)
	}{
		{"EnqueueLeaseAck", queue.Config{}, testEnqueueLeaseAck},
		{"IdempotentEnqueue", queue.Config{}, testIdempotentEnqueue},
		{"InvalidArguments", queue.Config{}, testInvalidArguments},
		{"Delay", queue.Config{}, testDelay},
		{"LeaseMax", queue.Config{}, testLeaseMax},
		{"ConcurrentLeasers", queue.Config{}, testConcurrentLeasers},
		{"ExpiryFencing", queue.Config{MaxAttempts: 5}, testExpiryFencing},
		{"Extend", queue.Config{}, testExtend},
		// Backoff of 1-2 s: long enough to see that a nacked job is not
		// visible at once, short enough to wait for.
		{"NackBackoff", queue.Config{MaxAttempts: 5, BackoffBase: 2 * time.Second, BackoffMax: 2 * time.Second}, testNackBackoff},
		{"DeadLetterByNack", queue.Config{MaxAttempts: 2, BackoffBase: 10 * time.Millisecond}, testDeadLetterByNack},
		{"DeadLetterByExpiry", queue.Config{MaxAttempts: 2}, testDeadLetterByExpiry},
		// With one attempt and an hour of backoff, a release that counted
		// as a failure would kill the job or hide it for the rest of the test.
		{"Release", queue.Config{MaxAttempts: 1, BackoffBase: time.Hour}, testRelease},
		{"AckStaleTokens", queue.Config{}, testAckStaleTokens},
		{"WaitForEnqueue", queue.Config{}, testWaitForEnqueue},
		{"WaitForDelay", queue.Config{}, testWaitForDelay},
		{"WaitForRelease", queue.Config{}, testWaitForRelease},
		{"WaitForNack", queue.Config{BackoffBase: 300 * time.Millisecond}, testWaitForNack},
		{"WaitEmpty", queue.Config{}, testWaitEmpty},
		{"ContextCanceled", queue.Config{}, testContextCanceled},
		{"Stats", queue.Config{MaxAttempts: 1}, testStats},
		{"Get", queue.Config{}, testGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newQueue(t, tc.cfg))
		})
	}
}

func testEnqueueLeaseAck(t *testing.T, q queue.Queue) {
	jobs := []queue.Job{
		{ID: "a", Payload: []byte("payload a")},
		{ID: "b"},
		{ID: "c", Payload: []byte{0, 1, 2, 255}},
	}
	res := enqueue(t, q, jobs...)
	if want := []string{"a", "b", "c"}; !slices.Equal(res.Added, want) || len(res.Existing) != 0 {
		t.Errorf("Enqueue result = %+v, want Added %v", res, want)
	}
	before := time.Now()
	leases := leaseAll(t, q, 3, queue.LeaseParams{Visibility: long, Owner: "worker-1"})
	after := time.Now()
	tokens := map[string]bool{}
	for _, l := range leases {
		i := slices.IndexFunc(jobs, func(j queue.Job) bool { return j.ID == l.Job.ID })
		if !bytes.Equal(l.Job.Payload, jobs[i].Payload) {
			t.Errorf("job %s: payload %q, want %q", l.Job.ID, l.Job.Payload, jobs[i].Payload)
		}
		if l.Attempt != 1 {
			t.Errorf("job %s: attempt %d, want 1", l.Job.ID, l.Attempt)
		}
		if l.Token == "" || tokens[l.Token] {
			t.Errorf("job %s: token %q is empty or not unique", l.Job.ID, l.Token)
		}
		tokens[l.Token] = true
		if l.Expires.Before(before.Add(long-time.Second)) || l.Expires.After(after.Add(long+time.Second)) {
			t.Errorf("job %s: lease expires at %s, want about %s after %s", l.Job.ID, l.Expires, long, before)
		}
		info := get(t, q, l.Job.ID)
		if info.State != queue.StateLeased || info.Token != l.Token || info.Owner != "worker-1" {
			t.Errorf("Get(%s) = state %s, token %q, owner %q; want leased by worker-1 with token %q",
				l.Job.ID, info.State, info.Token, info.Owner, l.Token)
		}
	}
	wantStats(t, q, queue.Stats{Leased: 3})
	expectNone(t, q)
	ack(t, q, leases...)
	wantStats(t, q, queue.Stats{})
	if _, err := q.Get(t.Context(), "a"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Get of an acked job: %v, want ErrNotFound", err)
	}
	expectNone(t, q)
}

func testIdempotentEnqueue(t *testing.T, q queue.Queue) {
	enqueue(t, q, queue.Job{ID: "a", Payload: []byte("first")})
	res := enqueue(t, q,
		queue.Job{ID: "a", Payload: []byte("second")},
		queue.Job{ID: "b", Payload: []byte("b1")},
		queue.Job{ID: "b", Payload: []byte("b2")},
	)
	if !slices.Equal(res.Added, []string{"b"}) || !slices.Equal(res.Existing, []string{"a", "b"}) {
		t.Errorf("Enqueue result = %+v, want Added [b], Existing [a b]", res)
	}
	wantStats(t, q, queue.Stats{Ready: 2})
	leases := leaseAll(t, q, 2, queue.LeaseParams{Visibility: long})
	for _, l := range leases {
		want := map[string]string{"a": "first", "b": "b1"}[l.Job.ID]
		if string(l.Job.Payload) != want {
			t.Errorf("job %s: payload %q, want %q (the first enqueued)", l.Job.ID, l.Job.Payload, want)
		}
	}
	// Enqueueing a leased job leaves it leased.
	if res := enqueue(t, q, queue.Job{ID: "a"}); !slices.Equal(res.Existing, []string{"a"}) {
		t.Errorf("Enqueue of a leased job: %+v, want Existing [a]", res)
	}
	expectNone(t, q)
	wantStats(t, q, queue.Stats{Leased: 2})
	// An acked job is gone: its ID can be used again.
	ack(t, q, leases...)
	if res := enqueue(t, q, queue.Job{ID: "a", Payload: []byte("again")}); !slices.Equal(res.Added, []string{"a"}) {
		t.Errorf("Enqueue of an acked ID: %+v, want Added [a]", res)
	}
	l := leaseOne(t, q, long)
	if l.Job.ID != "a" || string(l.Job.Payload) != "again" || l.Attempt != 1 {
		t.Errorf("lease after re-enqueue: %s %q attempt %d, want a \"again\" attempt 1", l.Job.ID, l.Job.Payload, l.Attempt)
	}
	ack(t, q, l)
}

func testInvalidArguments(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	for _, jobs := range [][]queue.Job{
		{{ID: "ok"}, {ID: ""}},
		{{ID: "ok"}, {ID: "negative", Delay: -time.Second}},
	} {
		if _, err := q.Enqueue(ctx, jobs...); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Enqueue(%+v) = %v, want ErrInvalid", jobs, err)
		}
	}
	wantStats(t, q, queue.Stats{}) // all or nothing: "ok" was not enqueued
	for _, p := range []queue.LeaseParams{
		{Max: 0, Visibility: long},
		{Max: 1, Visibility: 0},
		{Max: 1, Visibility: long, Wait: -time.Second},
	} {
		if _, err := q.Lease(ctx, p); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Lease(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	enqueue(t, q, queue.Job{ID: "a"})
	l := leaseOne(t, q, long)
	if _, err := q.Extend(ctx, l.Token, 0); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("Extend(token, 0) = %v, want ErrInvalid", err)
	}
	ack(t, q, l) // the invalid Extend did not end the lease
}

func testDelay(t *testing.T, q queue.Queue) {
	const delay = 2 * time.Second
	start := time.Now()
	enqueue(t, q, queue.Job{ID: "later", Delay: delay}, queue.Job{ID: "now"})
	if l := leaseOne(t, q, long); l.Job.ID != "now" {
		t.Fatalf("leased %s, want the job without delay", l.Job.ID)
	}
	wantStats(t, q, queue.Stats{Delayed: 1, Leased: 1})
	info := get(t, q, "later")
	if info.State != queue.StateDelayed || info.VisibleAt.Before(start.Add(delay-time.Second)) {
		t.Errorf("Get(later) = state %s, visible at %s; want delayed until about %s", info.State, info.VisibleAt, start.Add(delay))
	}
	expectNone(t, q)
	l := leaseOne(t, q, long)
	if l.Job.ID != "later" || l.Job.Delay != delay {
		t.Errorf("leased %s with delay %s, want later with delay %s", l.Job.ID, l.Job.Delay, delay)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("delayed job leased %s after enqueue, want at least %s", elapsed, delay)
	}
}

func testLeaseMax(t *testing.T, q queue.Queue) {
	var jobs []queue.Job
	for i := range 10 {
		jobs = append(jobs, queue.Job{ID: fmt.Sprintf("job-%02d", i)})
	}
	enqueue(t, q, jobs...)
	first, err := q.Lease(t.Context(), queue.LeaseParams{Max: 3, Visibility: long, Wait: patience})
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if len(first) < 1 || len(first) > 3 {
		t.Fatalf("Lease(Max: 3) returned %d leases, want 1 to 3", len(first))
	}
	rest := leaseAll(t, q, len(jobs)-len(first), queue.LeaseParams{Visibility: long})
	ids := map[string]bool{}
	for _, l := range append(first, rest...) {
		if ids[l.Job.ID] {
			t.Errorf("job %s leased twice", l.Job.ID)
		}
		ids[l.Job.ID] = true
	}
	expectNone(t, q)
}

func testConcurrentLeasers(t *testing.T, q queue.Queue) {
	const n, workers = 200, 8
	var jobs []queue.Job
	for i := range n {
		jobs = append(jobs, queue.Job{ID: fmt.Sprintf("job-%03d", i), Payload: []byte{byte(i)}})
	}
	enqueue(t, q, jobs...)
	ctx, cancel := context.WithTimeout(t.Context(), 3*patience)
	defer cancel()
	var (
		holder    sync.Map // job ID → worker that leased it
		delivered atomic.Int64
		wg        sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("worker-%d", w)
			for delivered.Load() < n && ctx.Err() == nil {
				leases, err := q.Lease(ctx, queue.LeaseParams{Max: 7, Visibility: long, Wait: 200 * time.Millisecond, Owner: owner})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: Lease: %v", owner, err)
					}
					return
				}
				var tokens []string
				for _, l := range leases {
					if other, dup := holder.LoadOrStore(l.Job.ID, owner); dup {
						t.Errorf("%s leased %s, which %s holds", owner, l.Job.ID, other)
					}
					tokens = append(tokens, l.Token)
				}
				delivered.Add(int64(len(leases)))
				if err := q.Ack(ctx, tokens...); err != nil {
					t.Errorf("%s: Ack: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()
	if got := delivered.Load(); got != n {
		t.Errorf("delivered %d jobs, want %d", got, n)
	}
	wantStats(t, q, queue.Stats{})
}

func testExpiryFencing(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a"})
	leasedAt := time.Now()
	l1 := leaseOne(t, q, short)
	expectNone(t, q)
	l2 := leaseOne(t, q, long)
	if elapsed := time.Since(leasedAt); elapsed < short {
		t.Errorf("leased again %s after the first lease, before its visibility of %s ended", elapsed, short)
	}
	if l2.Token == l1.Token || l2.Attempt != 2 {
		t.Errorf("second lease: token %q attempt %d; want a new token and attempt 2 (first: %q)", l2.Token, l2.Attempt, l1.Token)
	}
	// The first holder is fenced off.
	if err := q.Ack(ctx, l1.Token); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Ack(stale) = %v, want ErrLeaseLost", err)
	}
	if _, err := q.Extend(ctx, l1.Token, long); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Extend(stale) = %v, want ErrLeaseLost", err)
	}
	if err := q.Nack(ctx, l1.Token, "stale"); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Nack(stale) = %v, want ErrLeaseLost", err)
	}
	if err := q.Release(ctx, l1.Token); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Release(stale) = %v, want ErrLeaseLost", err)
	}
	info := get(t, q, "a")
	if info.State != queue.StateLeased || info.Token != l2.Token || info.Failures != 1 || info.Cause == "" {
		t.Errorf("Get(a) = %+v; want leased with the second token, 1 failure and a cause", info)
	}
	ack(t, q, l2)
}

func testExtend(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a"})
	l := leaseOne(t, q, short)
	const extended = 4 * time.Second
	before := time.Now()
	expires, err := q.Extend(ctx, l.Token, extended)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if expires.Before(before.Add(extended)) || !expires.After(l.Expires) {
		t.Errorf("Extend = %s, want at least %s and after %s", expires, before.Add(extended), l.Expires)
	}
	if info := get(t, q, "a"); !info.Expires.Equal(expires) {
		t.Errorf("Get(a).Expires = %s, want %s", info.Expires, expires)
	}
	// Wait past the first expiry: the job stays leased.
	leases, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: long, Wait: 2 * time.Second})
	if err != nil || len(leases) != 0 {
		t.Fatalf("Lease during an extended lease = %v, %v; want none", leases, err)
	}
	if now := time.Now(); !now.After(l.Expires) {
		t.Fatalf("test too fast: %s is before the first expiry %s", now, l.Expires)
	}
	ack(t, q, l)
	if _, err := q.Extend(ctx, l.Token, long); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Extend after Ack = %v, want ErrLeaseLost", err)
	}
}

func testNackBackoff(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a"})
	l1 := leaseOne(t, q, long)
	nackedAt := time.Now()
	if err := q.Nack(ctx, l1.Token, "boom"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	expectNone(t, q)
	info := get(t, q, "a")
	if info.State != queue.StateDelayed || info.Failures != 1 || info.Cause != "boom" {
		t.Errorf("Get(a) after Nack = %+v; want delayed, 1 failure, cause boom", info)
	}
	if err := q.Nack(ctx, l1.Token, "again"); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("second Nack = %v, want ErrLeaseLost", err)
	}
	l2 := leaseOne(t, q, long)
	// The backoff is 2 s with up to half of it taken off as jitter.
	if elapsed := time.Since(nackedAt); elapsed < time.Second {
		t.Errorf("nacked job visible again after %s, want at least 1s", elapsed)
	}
	if l2.Attempt != 2 || l2.Token == l1.Token {
		t.Errorf("lease after Nack: attempt %d token %q; want attempt 2 and a new token", l2.Attempt, l2.Token)
	}
	ack(t, q, l2)
}

func testDeadLetterByNack(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a", Payload: []byte("pa")})
	l1 := leaseOne(t, q, long)
	if err := q.Nack(ctx, l1.Token, "first failure"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	l2 := leaseOne(t, q, long)
	if l2.Attempt != 2 {
		t.Errorf("attempt %d, want 2", l2.Attempt)
	}
	if err := q.Nack(ctx, l2.Token, "second failure"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	wantStats(t, q, queue.Stats{Dead: 1})
	dead := deadJobs(t, q)
	if len(dead) != 1 {
		t.Fatalf("Dead() = %+v, want one job", dead)
	}
	if d := dead[0]; d.Job.ID != "a" || string(d.Job.Payload) != "pa" || d.State != queue.StateDead ||
		d.Failures != 2 || d.Cause != "second failure" || d.DiedAt.IsZero() {
		t.Errorf("dead job = %+v; want a, payload pa, 2 failures, cause \"second failure\", a time of death", d)
	}
	expectNone(t, q)
	// A dead job's ID stays taken.
	if res := enqueue(t, q, queue.Job{ID: "a"}); !slices.Equal(res.Existing, []string{"a"}) {
		t.Errorf("Enqueue of a dead job = %+v, want Existing [a]", res)
	}
	wantStats(t, q, queue.Stats{Dead: 1})
	expectNone(t, q)
}

func testDeadLetterByExpiry(t *testing.T, q queue.Queue) {
	enqueue(t, q, queue.Job{ID: "a"})
	leaseOne(t, q, short)
	l2 := leaseOne(t, q, short)
	if l2.Attempt != 2 {
		t.Errorf("attempt %d, want 2", l2.Attempt)
	}
	eventually(t, "the job is dead", func() bool {
		st, err := q.Stats(t.Context())
		return err == nil && st == queue.Stats{Dead: 1}
	})
	dead := deadJobs(t, q)
	if len(dead) != 1 || dead[0].Job.ID != "a" || dead[0].Failures != 2 || dead[0].Cause == "" {
		t.Errorf("Dead() = %+v; want a with 2 failures and a cause", dead)
	}
	expectNone(t, q)
	if err := q.Ack(t.Context(), l2.Token); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Ack of the expired last lease = %v, want ErrLeaseLost", err)
	}
}

func testRelease(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a"})
	var prev string
	for range 3 {
		l := leaseOne(t, q, long)
		if l.Attempt != 1 || l.Token == prev {
			t.Errorf("lease after release: attempt %d token %q; want attempt 1 and a new token", l.Attempt, l.Token)
		}
		if err := q.Release(ctx, l.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := q.Release(ctx, l.Token); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("second Release = %v, want ErrLeaseLost", err)
		}
		prev = l.Token
	}
	if info := get(t, q, "a"); info.Failures != 0 {
		t.Errorf("Get(a).Failures = %d after releases, want 0", info.Failures)
	}
	l := leaseOne(t, q, long)
	if err := q.Nack(ctx, l.Token, "the only failure"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	if dead := deadJobs(t, q); len(dead) != 1 || dead[0].Failures != 1 {
		t.Errorf("Dead() = %+v, want a with 1 failure", dead)
	}
}

func testAckStaleTokens(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	enqueue(t, q, queue.Job{ID: "a"}, queue.Job{ID: "b"}, queue.Job{ID: "c"})
	ls := leaseAll(t, q, 3, queue.LeaseParams{Visibility: long})
	const bogus = "no-such-token"
	err := q.Ack(ctx, ls[0].Token, bogus, ls[1].Token, ls[1].Token, ls[2].Token)
	var lost *queue.LeaseLostError
	if !errors.Is(err, queue.ErrLeaseLost) || !errors.As(err, &lost) || !slices.Equal(lost.Tokens, []string{bogus}) {
		t.Fatalf("Ack with one unknown token = %v; want a LeaseLostError naming only %s", err, bogus)
	}
	if !strings.Contains(err.Error(), bogus) {
		t.Errorf("error %q does not name the stale token", err)
	}
	wantStats(t, q, queue.Stats{}) // the valid tokens were acked
	if err := q.Ack(ctx, ls[0].Token); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("second Ack = %v, want ErrLeaseLost", err)
	}
	if err := q.Ack(ctx); err != nil {
		t.Errorf("Ack() = %v, want nil", err)
	}
}

func testWaitForEnqueue(t *testing.T, q queue.Queue) {
	const wait = 5 * time.Second
	later(t, "Enqueue", func(ctx context.Context) error {
		_, err := q.Enqueue(ctx, queue.Job{ID: "a"})
		return err
	})
	waitFor(t, q, "a", wait)
}

func testWaitForDelay(t *testing.T, q queue.Queue) {
	const wait = 5 * time.Second
	enqueue(t, q, queue.Job{ID: "a", Delay: time.Second})
	waitFor(t, q, "a", wait)
}

func testWaitForRelease(t *testing.T, q queue.Queue) {
	const wait = 5 * time.Second
	enqueue(t, q, queue.Job{ID: "a"})
	l := leaseOne(t, q, long)
	later(t, "Release", func(ctx context.Context) error { return q.Release(ctx, l.Token) })
	waitFor(t, q, "a", wait)
}

func testWaitForNack(t *testing.T, q queue.Queue) {
	const wait = 5 * time.Second
	enqueue(t, q, queue.Job{ID: "a"})
	l := leaseOne(t, q, long)
	later(t, "Nack", func(ctx context.Context) error { return q.Nack(ctx, l.Token, "retry soon") })
	waitFor(t, q, "a", wait)
}

// later calls fn in a goroutine a moment from now, once the test is
// likely to wait in Lease; the test waits for it before it ends.
func later(t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return
		}
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("%s: %v", what, err)
		}
	}()
	t.Cleanup(func() { <-done })
}

// waitFor checks that one Lease call waiting up to wait gets job id before
// the wait ends.
func waitFor(t *testing.T, q queue.Queue, id string, wait time.Duration) {
	t.Helper()
	start := time.Now()
	leases, err := q.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: long, Wait: wait})
	elapsed := time.Since(start)
	if err != nil || len(leases) != 1 || leases[0].Job.ID != id {
		t.Fatalf("Lease(Wait: %s) = %+v, %v after %s; want job %s", wait, leases, err, elapsed, id)
	}
	if elapsed >= wait {
		t.Errorf("Lease returned after %s, not before the end of its wait of %s", elapsed, wait)
	}
	ack(t, q, leases...)
}

func testWaitEmpty(t *testing.T, q queue.Queue) {
	const wait = time.Second
	start := time.Now()
	leases, err := q.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: long, Wait: wait})
	elapsed := time.Since(start)
	if err != nil || len(leases) != 0 {
		t.Fatalf("Lease on an empty queue = %+v, %v; want none and no error", leases, err)
	}
	if elapsed < wait || elapsed > wait+patience/2 {
		t.Errorf("Lease(Wait: %s) on an empty queue returned after %s", wait, elapsed)
	}
}

func testContextCanceled(t *testing.T, q queue.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: long, Wait: patience})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lease canceled while waiting = %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > patience/2 {
		t.Errorf("canceled Lease returned after %s", elapsed)
	}

	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: long, Wait: patience}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lease past its ctx deadline = %v, want context.DeadlineExceeded", err)
	}

	if _, err := q.Enqueue(ctx, queue.Job{ID: "a"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Enqueue with a done ctx = %v, want context.DeadlineExceeded", err)
	}
	wantStats(t, q, queue.Stats{})
}

func testStats(t *testing.T, q queue.Queue) {
	ctx := t.Context()
	wantStats(t, q, queue.Stats{})
	enqueue(t, q, queue.Job{ID: "x"}, queue.Job{ID: "y"})
	ls := leaseAll(t, q, 2, queue.LeaseParams{Visibility: long})
	if err := q.Nack(ctx, ls[0].Token, "fatal"); err != nil { // MaxAttempts is 1
		t.Fatalf("Nack: %v", err)
	}
	enqueue(t, q, queue.Job{ID: "r1"}, queue.Job{ID: "r2"}, queue.Job{ID: "d", Delay: time.Hour})
	wantStats(t, q, queue.Stats{Ready: 2, Delayed: 1, Leased: 1, Dead: 1})
}

func testGet(t *testing.T, q queue.Queue) {
	if _, err := q.Get(t.Context(), "nope"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Get of an unknown job = %v, want ErrNotFound", err)
	}
	before := time.Now()
	enqueue(t, q, queue.Job{ID: "ready", Payload: []byte("p")}, queue.Job{ID: "delayed", Delay: time.Hour})
	after := time.Now()
	info := get(t, q, "ready")
	if info.State != queue.StateReady || string(info.Job.Payload) != "p" || info.Failures != 0 || info.Cause != "" {
		t.Errorf("Get(ready) = %+v", info)
	}
	if info.EnqueuedAt.Before(before.Add(-time.Second)) || info.EnqueuedAt.After(after.Add(time.Second)) {
		t.Errorf("Get(ready).EnqueuedAt = %s, want between %s and %s", info.EnqueuedAt, before, after)
	}
	info = get(t, q, "delayed")
	if info.State != queue.StateDelayed || info.Job.Delay != time.Hour || info.VisibleAt.Before(before.Add(time.Hour-time.Second)) {
		t.Errorf("Get(delayed) = %+v", info)
	}
}

// enqueue enqueues jobs or fails the test.
func enqueue(t *testing.T, q queue.Queue, jobs ...queue.Job) queue.EnqueueResult {
	t.Helper()
	res, err := q.Enqueue(t.Context(), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return res
}

// leaseOne leases one job with visibility vis, waiting for it as long as it
// takes within patience.
func leaseOne(t *testing.T, q queue.Queue, vis time.Duration) queue.Lease {
	t.Helper()
	return leaseAll(t, q, 1, queue.LeaseParams{Visibility: vis})[0]
}

// leaseAll leases n jobs with p (whose Max and Wait it sets), in as many
// calls as it takes within patience, and checks that no job comes twice.
func leaseAll(t *testing.T, q queue.Queue, n int, p queue.LeaseParams) []queue.Lease {
	t.Helper()
	var out []queue.Lease
	ids := map[string]bool{}
	deadline := time.Now().Add(patience)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("leased %d jobs within %s, want %d", len(out), patience, n)
		}
		p.Max, p.Wait = n-len(out), time.Second
		leases, err := q.Lease(t.Context(), p)
		if err != nil {
			t.Fatalf("Lease: %v", err)
		}
		if len(leases) > p.Max {
			t.Fatalf("Lease(Max: %d) returned %d leases", p.Max, len(leases))
		}
		for _, l := range leases {
			if ids[l.Job.ID] {
				t.Fatalf("job %s leased twice", l.Job.ID)
			}
			ids[l.Job.ID] = true
		}
		out = append(out, leases...)
	}
	return out
}

// expectNone checks that no job is visible.
func expectNone(t *testing.T, q queue.Queue) {
	t.Helper()
	leases, err := q.Lease(t.Context(), queue.LeaseParams{Max: 10, Visibility: long})
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if len(leases) != 0 {
		t.Fatalf("Lease returned %d jobs (first %s), want none", len(leases), leases[0].Job.ID)
	}
}

func ack(t *testing.T, q queue.Queue, leases ...queue.Lease) {
	t.Helper()
	tokens := make([]string, len(leases))
	for i, l := range leases {
		tokens[i] = l.Token
	}
	if err := q.Ack(t.Context(), tokens...); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

func get(t *testing.T, q queue.Queue, id string) queue.JobInfo {
	t.Helper()
	info, err := q.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return info
}

func deadJobs(t *testing.T, q queue.Queue) []queue.JobInfo {
	t.Helper()
	dead, err := q.Dead(t.Context())
	if err != nil {
		t.Fatalf("Dead: %v", err)
	}
	return dead
}

func wantStats(t *testing.T, q queue.Queue, want queue.Stats) {
	t.Helper()
	got, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// eventually polls cond until it holds, failing the test after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true within %s: %s", patience, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
