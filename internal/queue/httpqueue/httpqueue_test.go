package httpqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
	"github.com/hpsearch/hpsearch/internal/queue/httpqueue"
	"github.com/hpsearch/hpsearch/internal/queue/queuetest"
)

// testToken is the bearer token of the test servers.
const testToken = "hps_test-token"

// patience bounds every wait for something that should happen.
const patience = 10 * time.Second

func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Exercise(t, func(t *testing.T, cfg queue.Config) queue.Queue {
		return newClient(t, serve(t, openBolt(t, cfg), httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	})
}

// openBolt opens a boltqueue in a temporary file and closes it when the
// test ends.
func openBolt(t testing.TB, cfg queue.Config) *boltqueue.Queue {
	t.Helper()
	q, err := boltqueue.Open(filepath.Join(t.TempDir(), "queue.db"), cfg)
	if err != nil {
		t.Fatalf("boltqueue.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("close the bolt queue: %v", err)
		}
	})
	return q
}

// serve serves q on 127.0.0.1 until the test ends and returns the URL of
// the handler's prefix. Verify defaults to accepting testToken, Logger to
// the test's output.
func serve(t testing.TB, q queue.Queue, opts httpqueue.HandlerOptions) string {
	t.Helper()
	if opts.Verify == nil {
		opts.Verify = httpqueue.SharedToken(testToken)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	srv := httptest.NewServer(httpqueue.Handler(q, opts))
	t.Cleanup(srv.Close)
	return srv.URL + "/queue"
}

// newClient returns a client of the queue at url, with testToken unless
// opts has a token, closed when the test ends.
func newClient(t testing.TB, url string, opts httpqueue.ClientOptions) *httpqueue.Client {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	c := httpqueue.NewClient(url, opts)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close the client: %v", err)
		}
	})
	return c
}

// spy is a queue.Queue that records the lease calls the handler makes.
type spy struct {
	queue.Queue

	mu    sync.Mutex
	waits []time.Duration // the Wait of each call, when it began
	errs  []error         // the error of each call, when it ended
}

func (s *spy) Lease(ctx context.Context, p queue.LeaseParams) ([]queue.Lease, error) {
	s.mu.Lock()
	s.waits = append(s.waits, p.Wait)
	s.mu.Unlock()
	leases, err := s.Queue.Lease(ctx, p)
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	return leases, err
}

// began returns the waits of the calls that began.
func (s *spy) began() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// ended returns the errors of the calls that ended.
func (s *spy) ended() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// leaseResult is what a Lease call in a goroutine returned.
type leaseResult struct {
	leases []queue.Lease
	err    error
}

// leaseAsync calls q.Lease in a goroutine; the test waits for it before it
// ends.
func leaseAsync(t *testing.T, ctx context.Context, q queue.Queue, p queue.LeaseParams) <-chan leaseResult {
	t.Helper()
	ch := make(chan leaseResult, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		leases, err := q.Lease(ctx, p)
		ch <- leaseResult{leases, err}
	}()
	t.Cleanup(func() { <-done })
	return ch
}

// eventually polls cond until it holds, failing the test after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true within %s: %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLeaseWakesOnEnqueueByAnotherClient(t *testing.T) {
	t.Parallel()
	s := &spy{Queue: openBolt(t, queue.Config{})}
	url := serve(t, s, httpqueue.HandlerOptions{})
	waiter := newClient(t, url, httpqueue.ClientOptions{})
	enqueuer := newClient(t, url, httpqueue.ClientOptions{})

	// A wait of an hour: the Lease can only end this test by getting the
	// job.
	res := leaseAsync(t, t.Context(), waiter, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Hour, Owner: "waiter"})
	eventually(t, "the server waits in Lease", func() bool { return len(s.began()) > 0 })
	if _, err := enqueuer.Enqueue(t.Context(), queue.Job{ID: "a", Payload: []byte("p")}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	r := <-res
	if r.err != nil || len(r.leases) != 1 || r.leases[0].Job.ID != "a" || string(r.leases[0].Job.Payload) != "p" {
		t.Fatalf("Lease = %+v, %v; want job a", r.leases, r.err)
	}
	if err := enqueuer.Ack(t.Context(), r.leases[0].Token); err != nil {
		t.Errorf("Ack by the other client: %v", err)
	}
}

func TestLeaseWaitsPastTheCap(t *testing.T) {
	t.Parallel()
	const limit = 50 * time.Millisecond
	for _, tc := range []struct {
		name   string
		server httpqueue.HandlerOptions
		client httpqueue.ClientOptions
	}{
		{"server cap", httpqueue.HandlerOptions{MaxWait: limit}, httpqueue.ClientOptions{}},
		{"client cap", httpqueue.HandlerOptions{}, httpqueue.ClientOptions{MaxWait: limit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bq := openBolt(t, queue.Config{})
			s := &spy{Queue: bq}
			c := newClient(t, serve(t, s, tc.server), tc.client)
			res := leaseAsync(t, t.Context(), c, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
			eventually(t, "the client made 3 lease requests", func() bool { return len(s.began()) >= 3 })
			if _, err := bq.Enqueue(t.Context(), queue.Job{ID: "a"}); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			r := <-res
			if r.err != nil || len(r.leases) != 1 || r.leases[0].Job.ID != "a" {
				t.Fatalf("Lease = %+v, %v; want job a", r.leases, r.err)
			}
			for i, w := range s.began() {
				if w <= 0 || w > limit {
					t.Errorf("lease request %d waited %s, want more than 0 and at most %s", i, w, limit)
				}
			}
		})
	}
}

func TestLeaseCanceled(t *testing.T) {
	t.Parallel()
	s := &spy{Queue: openBolt(t, queue.Config{})}
	c := newClient(t, serve(t, s, httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	ctx, cancel := context.WithCancelCause(t.Context())
	res := leaseAsync(t, ctx, c, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
	eventually(t, "the server waits in Lease", func() bool { return len(s.began()) > 0 })
	cause := errors.New("the worker stops")
	cancel(cause)
	r := <-res
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, cause) || len(r.leases) != 0 {
		t.Fatalf("canceled Lease = %+v, %v; want context.Canceled with its cause", r.leases, r.err)
	}
	// The server stopped waiting when the client went away.
	eventually(t, "the server's Lease ends", func() bool { return len(s.ended()) > 0 })
	if err := s.ended()[0]; !errors.Is(err, context.Canceled) {
		t.Errorf("the server's Lease ended with %v, want context.Canceled", err)
	}
}

func TestCloseWakesLease(t *testing.T) {
	t.Parallel()
	s := &spy{Queue: openBolt(t, queue.Config{})}
	c := newClient(t, serve(t, s, httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	res := leaseAsync(t, t.Context(), c, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
	eventually(t, "the server waits in Lease", func() bool { return len(s.began()) > 0 })
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := <-res; !errors.Is(r.err, queue.ErrClosed) {
		t.Errorf("Lease waiting when the client closed = %+v, %v; want ErrClosed", r.leases, r.err)
	}
	if _, err := c.Stats(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Stats after Close = %v, want ErrClosed", err)
	}
	eventually(t, "the server's Lease ends", func() bool { return len(s.ended()) > 0 })
}

// lateAnswer is a queue.Queue whose Lease leases at once but answers only
// once its caller went away, as when a client goes away while the answer
// is on its way.
type lateAnswer struct {
	queue.Queue
	leased chan struct{}
}

func (q *lateAnswer) Lease(ctx context.Context, p queue.LeaseParams) ([]queue.Lease, error) {
	leases, err := q.Queue.Lease(context.WithoutCancel(ctx), p)
	close(q.leased)
	<-ctx.Done()
	return leases, err
}

func TestLeaseOfAClientGoneIsReleased(t *testing.T) {
	t.Parallel()
	bq := openBolt(t, queue.Config{})
	if _, err := bq.Enqueue(t.Context(), queue.Job{ID: "a"}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	late := &lateAnswer{Queue: bq, leased: make(chan struct{})}
	c := newClient(t, serve(t, late, httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	res := leaseAsync(t, ctx, c, queue.LeaseParams{Max: 1, Visibility: time.Hour, Owner: "gone"})
	<-late.leased
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lease = %+v, %v; want context.Canceled", r.leases, r.err)
	}
	eventually(t, "job a is ready again", func() bool {
		info, err := bq.Get(t.Context(), "a")
		return err == nil && info.State == queue.StateReady
	})
	leases, err := bq.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: time.Minute})
	if err != nil || len(leases) != 1 || leases[0].Attempt != 1 {
		t.Fatalf("Lease after the release = %+v, %v; want job a at attempt 1 (the release does not count)", leases, err)
	}
}
