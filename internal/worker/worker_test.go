package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor/pool"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
	"github.com/hpsearch/hpsearch/internal/worker"
)

// fakeExec runs segments with a function instead of a trainer process;
// cmd/hpsearch's pool test runs real workers with real trainers.
type fakeExec struct {
	runs atomic.Int32
	fn   func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error)
}

func (f *fakeExec) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	f.runs.Add(1)
	return f.fn(ctx, req)
}

type env struct {
	q     *boltqueue.Queue
	blobs blob.Store
	ckpts *checkpoint.Store
	exec  *fakeExec
}

func newEnv(t *testing.T, fn func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error)) *env {
	t.Helper()
	q, err := boltqueue.Open(filepath.Join(t.TempDir(), "q.db"), queue.Config{MaxAttempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	b, err := fsblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{q: q, blobs: b, ckpts: checkpoint.New(b), exec: &fakeExec{fn: fn}}
}

func (e *env) enqueue(t *testing.T, trial int) hptype.SegmentRequest {
	t.Helper()
	req := hptype.SegmentRequest{APIVersion: hptype.APIVersion, Study: "s1", StudyName: "study", Trial: trial, Segment: 0, Attempt: 1,
		Checkpoint: &hptype.CheckpointPolicy{Store: e.blobs.URI(), Prefix: fmt.Sprintf("study/trial-%d", trial)}}
	// The segment may run a minute from when a worker starts it.
	raw, _ := json.Marshal(pool.Job{Request: req, RunFor: hptype.Duration(time.Minute)})
	if _, err := e.q.Enqueue(t.Context(), queue.Job{ID: fmt.Sprintf("job-%d", trial), Payload: raw}); err != nil {
		t.Fatal(err)
	}
	return req
}

// run runs a worker until stop is closed or the queue is empty and
// settled, and returns when it stopped.
func (e *env) run(t *testing.T, ctx context.Context) {
	t.Helper()
	err := worker.Run(ctx, worker.Config{
		Pool: "gpu", ID: "w1", Queue: e.q, Executor: e.exec,
		OpenStore:  func(context.Context, string) (blob.Store, error) { return e.blobs, nil },
		WorkDir:    t.TempDir(),
		Visibility: 2 * time.Second, Wait: 100 * time.Millisecond, CancelPoll: 20 * time.Millisecond,
		InstanceType: "g5.xlarge", PricePerHour: 1.006,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("worker.Run: %v", err)
	}
}

// untilSettled returns a context that ends once the queue holds no job.
func (e *env) untilSettled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if st, err := e.q.Stats(ctx); err == nil && st.Ready+st.Leased+st.Delayed+st.Dead == 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ctx
}

func (e *env) result(t *testing.T, req hptype.SegmentRequest) *hptype.SegmentResult {
	t.Helper()
	res, err := e.ckpts.Result(t.Context(), req.Checkpoint.Prefix, req.Segment, req.Attempt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func completed(_ context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	if left := time.Until(req.Deadline); left < 50*time.Second || left > time.Minute {
		return hptype.SegmentResult{}, fmt.Errorf("the segment has %s left; the worker should give it the job's minute from now", left)
	}
	return hptype.SegmentResult{APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
		Status: hptype.SegmentCompleted, ResourceReached: 3, Usage: hptype.Usage{BilledMS: 10}}, nil
}

func TestRunsJobsAndKeepsALedger(t *testing.T) {
	e := newEnv(t, completed)
	reqs := []hptype.SegmentRequest{e.enqueue(t, 1), e.enqueue(t, 2)}
	e.run(t, e.untilSettled(t))
	for _, req := range reqs {
		if res := e.result(t, req); res == nil || res.Status != hptype.SegmentCompleted {
			t.Errorf("trial %d: stored result %+v, want completed", req.Trial, res)
		}
	}
	ledgers, err := worker.ReadUsage(t.Context(), e.blobs, "gpu")
	if err != nil || len(ledgers) != 1 {
		t.Fatalf("ReadUsage = %+v, %v; want one ledger", ledgers, err)
	}
	u := ledgers[0]
	if u.ID != "w1" || u.Segments != 2 || !u.Stopped || u.PricePerHour != 1.006 || u.BusySeconds <= 0 || u.IdleSeconds < 0 {
		t.Errorf("ledger %+v", u)
	}
}

// TestRedeliveredJobIsReportedLost leases a job and lets the lease expire,
// as a worker that died would: the next worker reports the attempt lost
// instead of running it under the same attempt's checkpoint IDs.
func TestRedeliveredJobIsReportedLost(t *testing.T) {
	e := newEnv(t, completed)
	req := e.enqueue(t, 1)
	if _, err := e.q.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	e.run(t, e.untilSettled(t))
	res := e.result(t, req)
	if res == nil || res.Status != hptype.SegmentFailed || !res.Retryable {
		t.Fatalf("stored result %+v, want a retryable failure", res)
	}
	if e.exec.runs.Load() != 0 {
		t.Errorf("the redelivered job ran %d times, want 0", e.exec.runs.Load())
	}
}

// TestJobGivenBackUnstartedRuns gives a job back as a worker that could not
// start it does (its store would not open): the next worker runs it.
func TestJobGivenBackUnstartedRuns(t *testing.T) {
	e := newEnv(t, completed)
	req := e.enqueue(t, 1)
	leases, err := e.q.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: time.Minute})
	if err != nil || len(leases) != 1 {
		t.Fatal(leases, err)
	}
	if err := e.q.Nack(t.Context(), leases[0].Token, "not started: open the store: unreachable"); err != nil {
		t.Fatal(err)
	}
	e.run(t, e.untilSettled(t))
	if res := e.result(t, req); res == nil || res.Status != hptype.SegmentCompleted || e.exec.runs.Load() != 1 {
		t.Errorf("stored result %+v after %d runs; want the segment run once and completed", res, e.exec.runs.Load())
	}
}

func TestCancelledJobIsDropped(t *testing.T) {
	e := newEnv(t, completed)
	req := e.enqueue(t, 1)
	if err := e.ckpts.Cancel(t.Context(), req.Checkpoint.Prefix, 0, 1); err != nil {
		t.Fatal(err)
	}
	e.run(t, e.untilSettled(t))
	if e.exec.runs.Load() != 0 || e.result(t, req) != nil {
		t.Errorf("a cancelled job ran (%d runs) or got a result", e.exec.runs.Load())
	}
}

// suspendOnStop is a segment that trains until it is told to stop, then
// checkpoints and answers suspended, as the trainer does.
func suspendOnStop(started chan<- struct{}) func(context.Context, hptype.SegmentRequest) (hptype.SegmentResult, error) {
	return func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		close(started)
		<-ctx.Done()
		return hptype.SegmentResult{APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
			Status: hptype.SegmentSuspended, ResourceReached: 2, Checkpoint: &hptype.CheckpointRef{ID: "000000.001.0000", Resource: 2}}, nil
	}
}

func TestCoordinatorCancelStopsTheSegment(t *testing.T) {
	started := make(chan struct{})
	e := newEnv(t, suspendOnStop(started))
	req := e.enqueue(t, 1)
	go func() {
		<-started
		if err := e.ckpts.Cancel(context.Background(), req.Checkpoint.Prefix, 0, 1); err != nil {
			t.Error(err)
		}
	}()
	e.run(t, e.untilSettled(t))
	if res := e.result(t, req); res == nil || res.Status != hptype.SegmentSuspended {
		t.Errorf("stored result %+v, want the suspended answer", res)
	}
}

// TestStopHandsTheSegmentBack stops the worker (SIGTERM) in the middle of
// a segment: the segment checkpoints, its answer is stored, its job is
// acknowledged, and the worker returns.
func TestStopHandsTheSegmentBack(t *testing.T) {
	started := make(chan struct{})
	e := newEnv(t, suspendOnStop(started))
	req := e.enqueue(t, 1)
	ctx, stop := context.WithCancel(t.Context())
	go func() {
		<-started
		stop()
	}()
	e.run(t, ctx)
	if res := e.result(t, req); res == nil || res.Status != hptype.SegmentSuspended || res.Checkpoint == nil {
		t.Errorf("stored result %+v, want suspended with its checkpoint", res)
	}
	if st, _ := e.q.Stats(t.Context()); st.Ready+st.Leased+st.Delayed != 0 {
		t.Errorf("queue after the stop: %+v, want the job acknowledged", st)
	}
	ledgers, _ := worker.ReadUsage(t.Context(), e.blobs, "gpu")
	if len(ledgers) != 1 || !ledgers[0].Stopped {
		t.Errorf("ledgers %+v, want one marked stopped", ledgers)
	}
}

func TestSpotNotice(t *testing.T) {
	var polls atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" && r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") != "":
			io.WriteString(w, "tok")
		case r.URL.Path == "/latest/meta-data/spot/instance-action" && r.Header.Get("X-aws-ec2-metadata-token") == "tok":
			if polls.Add(1) < 3 {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, `{"action": "terminate", "time": "2026-11-29T21:00:00Z"}`)
		default:
			http.Error(w, "unexpected", http.StatusBadRequest)
		}
	}))
	defer imds.Close()
	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	worker.SpotNotice(ctx, imds.Client(), imds.URL, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), func(action string) {
		mu.Lock()
		got = append(got, action)
		mu.Unlock()
	})
	if len(got) != 1 || polls.Load() != 3 || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("notices %q after %d polls (ctx %v); want one after the third", got, polls.Load(), ctx.Err())
	}
}
