package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/store/boltstore"
)

// recorder is an executor that runs a function instead of a trainer and
// records every request. The real trainer process runs in the CLI and crash
// tests; this one keeps the coordinator's tests fast and exact.
type recorder struct {
	mu   sync.Mutex
	reqs []hptype.SegmentRequest
	fn   func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error)
}

func (r *recorder) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.fn(ctx, req)
}

func (r *recorder) runs() map[int]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[int]int{}
	for _, q := range r.reqs {
		m[q.Trial]++
	}
	return m
}

// succeed reports val_loss = lr for the trial, billed 1 s.
func succeed(_ context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	lr, err := req.Params.Float("lr")
	if err != nil {
		return hptype.SegmentResult{}, err
	}
	return hptype.SegmentResult{
		APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
		Status:  hptype.SegmentCompleted,
		Metrics: []hptype.Metric{{Step: 1, Name: "val_loss", Value: lr + 1}, {Step: 2, Name: "val_loss", Value: lr}},
		Usage:   hptype.Usage{WallMS: 1000, BilledMS: 1000},
	}, nil
}

const baseSpec = `name: unit
objective: {metric: val_loss, goal: minimize}
parameters:
  lr: {type: float, min: 0.001, max: 1, log: true}
  units: {type: int, min: 8, max: 64}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: random, seed: 3}
max_trials: %d
max_concurrency: %d
backend: {memory_mb: 2048, price_per_gb_second: 0.001, price_per_request: 0.01}
`

type bundle struct {
	db    *bolt.DB
	store *boltstore.Store
	queue *boltqueue.Queue
	ckpts *checkpoint.Store
	exec  *recorder
}

func setup(t *testing.T, fn func(context.Context, hptype.SegmentRequest) (hptype.SegmentResult, error)) *bundle {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := boltstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	q, err := boltqueue.New(db, queue.Config{MaxAttempts: 2, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := fsblob.New(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, store: st, queue: q, ckpts: checkpoint.New(blobs), exec: &recorder{fn: fn}}
}

func mustSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	sp, err := spec.Decode("space.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func (b *bundle) config(sp *spec.Spec) coordinator.Config {
	return coordinator.Config{
		Spec: sp, Store: b.store, Queue: b.queue, Executor: b.exec, Checkpoints: b.ckpts,
		MaxAttempts: 2, PollInterval: 5 * time.Millisecond, Visibility: 5 * time.Second,
	}
}

func TestRunCompletesEveryTrialOnce(t *testing.T) {
	b := setup(t, succeed)
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 12, 3))
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Study.State != hptype.StudyCompleted {
		t.Fatalf("study state %s, want completed", res.Study.State)
	}
	if len(res.Trials) != 12 || res.Progress.Completed != 12 {
		t.Fatalf("%d trials, %d completed; want 12 and 12", len(res.Trials), res.Progress.Completed)
	}
	for n, c := range b.exec.runs() {
		if c != 1 {
			t.Errorf("trial %d ran %d times, want 1", n, c)
		}
	}
	// The best trial is the one with the smallest lr (val_loss = lr).
	best := res.Trials[0]
	for _, tr := range res.Trials {
		if *tr.Value < *best.Value {
			best = tr
		}
		lr, _ := tr.Params.Float("lr")
		if *tr.Value != lr {
			t.Errorf("trial %d value %v, want its final val_loss %v", tr.Number, *tr.Value, lr)
		}
	}
	if res.Progress.Best.Number != best.Number {
		t.Fatalf("best trial %d, want %d", res.Progress.Best.Number, best.Number)
	}
	// 1 s x 2 GB x $0.001 + $0.01 per request, for 12 trials.
	if want := 12 * (2*0.001 + 0.01); math.Abs(res.Progress.CostUSD-want) > 1e-12 {
		t.Fatalf("cost %v, want %v", res.Progress.CostUSD, want)
	}
	stats, err := b.queue.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats != (queue.Stats{}) {
		t.Fatalf("queue not empty after the study: %+v", stats)
	}
}

func TestRunIsDeterministicAcrossStores(t *testing.T) {
	params := func() []hptype.Params {
		b := setup(t, succeed)
		res, err := coordinator.Run(context.Background(), b.config(mustSpec(t, fmt.Sprintf(baseSpec, 6, 2))))
		if err != nil {
			t.Fatal(err)
		}
		var out []hptype.Params
		for _, tr := range res.Trials {
			out = append(out, tr.Params)
		}
		return out
	}
	a, b := params(), params()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed gave different trials:\n%v\n%v", a, b)
	}
}

func TestStopAndResume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var once sync.Once
	b := setup(t, func(sctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		if req.Trial < 4 {
			return succeed(sctx, req)
		}
		// Trial 4 and later block until the study is stopped.
		once.Do(cancel)
		select {
		case <-sctx.Done():
			return hptype.SegmentResult{}, sctx.Err()
		case <-release:
			return succeed(sctx, req)
		}
	})
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 10, 2))
	res, err := coordinator.Run(ctx, b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Study.State != hptype.StudyStopped {
		t.Fatalf("state %s, want stopped", res.Study.State)
	}
	if res.Progress.Interrupted == 0 {
		t.Fatalf("no trial interrupted: %+v", res.Progress)
	}
	completedBefore, interrupted := map[int]bool{}, map[int]bool{}
	for _, tr := range res.Trials {
		if tr.State == hptype.TrialCompleted {
			completedBefore[tr.Number] = true
		}
		if tr.State == hptype.TrialInterrupted {
			interrupted[tr.Number] = true
		}
		if tr.State == hptype.TrialRunning {
			t.Fatalf("trial %d still running after the stop", tr.Number)
		}
	}
	runsBefore := b.exec.runs()

	close(release)
	res, err = coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Study.State != hptype.StudyCompleted || len(res.Trials) != 10 || res.Progress.Completed != 10 {
		t.Fatalf("after resume: state %s, %d trials, %d completed", res.Study.State, len(res.Trials), res.Progress.Completed)
	}
	for n, c := range b.exec.runs() {
		if completedBefore[n] && c != runsBefore[n] {
			t.Errorf("trial %d completed before the stop but ran again", n)
		}
	}
	for _, tr := range res.Trials {
		if interrupted[tr.Number] && len(tr.Attempts) != 2 {
			t.Errorf("interrupted trial %d has %d attempts, want 2 (interrupted, completed)", tr.Number, len(tr.Attempts))
		}
	}
	if res.Progress.WastedCostUSD <= 0 {
		t.Errorf("interrupted attempts cost nothing: %+v", res.Progress)
	}
}

func TestTrainerCrashIsRetriedThenFails(t *testing.T) {
	b := setup(t, func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		switch {
		case req.Trial == 0 && req.Attempt == 1:
			return hptype.SegmentResult{}, errors.New("trainer killed by signal 9")
		case req.Trial == 1:
			return hptype.SegmentResult{}, errors.New("trainer crashed")
		}
		return succeed(ctx, req)
	})
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 3, 1))
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	t0, t1 := res.Trials[0], res.Trials[1]
	if t0.State != hptype.TrialCompleted || len(t0.Attempts) != 2 || t0.Attempts[0].Status != "error" {
		t.Fatalf("trial 0: %s with attempts %+v; want completed on its second attempt", t0.State, t0.Attempts)
	}
	if t1.State != hptype.TrialFailed || len(t1.Attempts) != 2 {
		t.Fatalf("trial 1: %s with %d attempts; want failed after 2", t1.State, len(t1.Attempts))
	}
	if res.Study.State != hptype.StudyCompleted {
		t.Fatalf("study %s, want completed (two trials completed)", res.Study.State)
	}
	// The crashed attempt wrote no checkpoint, so all its time was wasted.
	if a := t0.Attempts[0]; a.WastedSeconds != a.WallSeconds || a.WastedCostUSD <= 0 || res.Progress.WastedCostUSD < a.WastedCostUSD {
		t.Fatalf("crashed attempt wasted %vs of %vs, $%v; study wasted $%v", a.WastedSeconds, a.WallSeconds, a.WastedCostUSD, res.Progress.WastedCostUSD)
	}
}

func TestWorkloadFailureAndMissingMetric(t *testing.T) {
	b := setup(t, func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		res, _ := succeed(ctx, req)
		switch req.Trial {
		case 0:
			res.Status, res.Error = hptype.SegmentFailed, "diverged"
		case 1:
			res.Metrics = []hptype.Metric{{Step: 1, Name: "loss", Value: 1}}
		case 2:
			if req.Attempt == 1 {
				res.Status, res.Error, res.Retryable = hptype.SegmentFailed, "checkpoint store unreachable", true
			}
		}
		return res, nil
	})
	res, err := coordinator.Run(context.Background(), b.config(mustSpec(t, fmt.Sprintf(baseSpec, 3, 1))))
	if err != nil {
		t.Fatal(err)
	}
	if tr := res.Trials[0]; tr.State != hptype.TrialFailed || tr.Error != "diverged" || len(tr.Attempts) != 1 {
		t.Fatalf("trial 0: %s %q %d attempts; want failed once with the workload's error", tr.State, tr.Error, len(tr.Attempts))
	}
	if tr := res.Trials[1]; tr.State != hptype.TrialFailed || tr.Error == "" {
		t.Fatalf("trial 1: %s %q; want failed for the missing metric", tr.State, tr.Error)
	}
	if tr := res.Trials[2]; tr.State != hptype.TrialCompleted || len(tr.Attempts) != 2 || tr.Attempts[0].Status != "error" {
		t.Fatalf("trial 2: %s with attempts %+v; want a retryable failure retried, then completed", tr.State, tr.Attempts)
	}
}

func TestAllTrialsFailedFailsTheStudy(t *testing.T) {
	b := setup(t, func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		res, _ := succeed(ctx, req)
		res.Status, res.Error = hptype.SegmentFailed, "boom"
		return res, nil
	})
	res, err := coordinator.Run(context.Background(), b.config(mustSpec(t, fmt.Sprintf(baseSpec, 2, 2))))
	if err != nil {
		t.Fatal(err)
	}
	if res.Study.State != hptype.StudyFailed {
		t.Fatalf("study %s, want failed", res.Study.State)
	}
}

func TestCostBudgetStopsTheStudy(t *testing.T) {
	b := setup(t, succeed)
	// Each trial costs $0.012; the budget allows three.
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 20, 1)+"budget: {max_cost_usd: 0.035}\n")
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Study.State != hptype.StudyBudgetExhausted {
		t.Fatalf("study %s, want budget_exhausted", res.Study.State)
	}
	if res.Progress.Completed != 3 {
		t.Fatalf("%d trials completed, want 3 within $0.035", res.Progress.Completed)
	}
	// Raising the budget resumes the study.
	sp = mustSpec(t, fmt.Sprintf(baseSpec, 20, 1)+"budget: {max_cost_usd: 0.06}\n")
	res, err = coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Completed != 5 {
		t.Fatalf("%d trials completed after raising the budget, want 5", res.Progress.Completed)
	}
}

func TestResumeWithChangedSearchIsRefused(t *testing.T) {
	b := setup(t, succeed)
	if _, err := coordinator.Run(context.Background(), b.config(mustSpec(t, fmt.Sprintf(baseSpec, 2, 1)))); err != nil {
		t.Fatal(err)
	}
	changed := mustSpec(t, fmt.Sprintf(baseSpec, 2, 1))
	changed.Sampler.Seed = 99
	_, err := coordinator.Run(context.Background(), b.config(changed))
	if !errors.Is(err, coordinator.ErrSearchChanged) {
		t.Fatalf("error %v, want ErrSearchChanged", err)
	}
}

func TestRecoversFromADeadCoordinator(t *testing.T) {
	b := setup(t, succeed)
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 4, 2))
	ctx := context.Background()
	// Lay out what a coordinator killed mid-run leaves: trial 0 completed,
	// trial 1 running under a lease of an hour, trial 2 leased for an hour
	// but killed before the trial recorded it, trial 3 created but never
	// queued.
	if _, err := coordinator.Run(ctx, b.config(mustSpec(t, fmt.Sprintf(baseSpec, 1, 1)))); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.GetStudy(ctx, "unit")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if err := b.store.CreateTrial(ctx, &hptype.Trial{Study: st.ID, Number: n, State: hptype.TrialQueued, Params: hptype.Params{"lr": 0.5, "units": int64(8)}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= 2; n++ {
		if _, err := b.queue.Enqueue(ctx, queue.Job{ID: fmt.Sprintf("%s/trial/%d/segment/0", st.ID, n), Payload: fmt.Appendf(nil, `{"study":%q,"trial":%d,"segment":0}`, st.ID, n)}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := b.queue.Lease(ctx, queue.LeaseParams{Max: 2, Visibility: time.Hour, Owner: "coordinator"})
	if err != nil || len(leases) != 2 || leases[0].Job.ID != st.ID+"/trial/1/segment/0" {
		t.Fatalf("lease: %v %v", leases, err)
	}
	t1, _ := b.store.GetTrial(ctx, st.ID, 1)
	t1.State, t1.LeaseToken = hptype.TrialRunning, leases[0].Token
	t1.Attempts = []hptype.Attempt{{Number: 1, Status: "running", StartedAt: time.Now()}}
	if err := b.store.UpdateTrial(ctx, t1); err != nil {
		t.Fatal(err)
	}

	// The leases have an hour to run, so finishing shows they were given
	// back rather than waited out.
	res, err := coordinator.Run(ctx, b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Completed != 4 || len(res.Trials) != 4 {
		t.Fatalf("%d of %d trials completed, want 4 of 4", res.Progress.Completed, len(res.Trials))
	}
	if a := res.Trials[1].Attempts; len(a) != 2 || a[0].Status != "lost" {
		t.Fatalf("trial 1 attempts %+v, want the lost one then a completed one", a)
	}
	if runs := b.exec.runs(); runs[0] != 1 {
		t.Fatalf("trial 0 ran %d times, want 1", runs[0])
	}
}

func TestReconcilesAResultStoredWhileTheCoordinatorWasDown(t *testing.T) {
	b := setup(t, succeed)
	ctx := context.Background()
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 2, 2))
	// A first run creates the study; then trial 1 is left running, as a
	// coordinator killed mid-segment leaves it, and its trainer's result is
	// in the checkpoint store.
	if _, err := coordinator.Run(ctx, b.config(mustSpec(t, fmt.Sprintf(baseSpec, 1, 1)))); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.GetStudy(ctx, "unit")
	if err != nil {
		t.Fatal(err)
	}
	t1 := &hptype.Trial{Study: st.ID, Number: 1, State: hptype.TrialRunning, Params: hptype.Params{"lr": 0.25, "units": int64(8)},
		Attempts: []hptype.Attempt{{Number: 1, Status: "running", StartedAt: time.Now()}}}
	if err := b.store.CreateTrial(ctx, t1); err != nil {
		t.Fatal(err)
	}
	stored, _ := succeed(ctx, hptype.SegmentRequest{Study: st.ID, Trial: 1, Attempt: 1, Params: t1.Params})
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ckpts.PutResult(ctx, st.ID+"/trial-1", 0, 1, raw); err != nil {
		t.Fatal(err)
	}

	res, err := coordinator.Run(ctx, b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Trials[1]
	if got.State != hptype.TrialCompleted || got.Value == nil || *got.Value != 0.25 || len(got.Attempts) != 1 {
		t.Fatalf("trial 1: %s value %v with %d attempts; want completed from the stored result, value 0.25, 1 attempt", got.State, got.Value, len(got.Attempts))
	}
	if runs := b.exec.runs(); runs[1] != 0 {
		t.Fatalf("trial 1 ran %d times; its stored result should have been used", runs[1])
	}
}

func TestWaitsForAnOrphanedFunctionInvocation(t *testing.T) {
	b := setup(t, succeed)
	ctx := context.Background()
	remote := fmt.Sprintf(baseSpec, 2, 2) + "backend: {type: lambda, function: trainer, max_runtime: 1m}\ncheckpoint: {store: s3://bucket/ckpt}\n"
	// Strip the local backend line of baseSpec: a space file has one backend.
	remote = strings.Replace(remote, "backend: {memory_mb: 2048, price_per_gb_second: 0.001, price_per_request: 0.01}\n", "", 1)
	if _, err := coordinator.Run(ctx, b.config(mustSpec(t, strings.Replace(remote, "max_trials: 2", "max_trials: 1", 1)))); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.GetStudy(ctx, "unit")
	if err != nil {
		t.Fatal(err)
	}
	// Trial 1's invocation was made by a coordinator that then died; the
	// function is still running and stores its result a little later.
	t1 := &hptype.Trial{Study: st.ID, Number: 1, State: hptype.TrialRunning, Params: hptype.Params{"lr": 0.125, "units": int64(8)},
		Attempts: []hptype.Attempt{{Number: 1, Status: "running", StartedAt: time.Now()}}}
	if err := b.store.CreateTrial(ctx, t1); err != nil {
		t.Fatal(err)
	}
	stored, _ := succeed(ctx, hptype.SegmentRequest{Study: st.ID, Trial: 1, Attempt: 1, Params: t1.Params})
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := b.ckpts.PutResult(ctx, st.ID+"/trial-1", 0, 1, raw); err != nil {
			t.Error(err)
		}
	}()

	res, err := coordinator.Run(ctx, b.config(mustSpec(t, remote)))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Trials[1]
	if got.State != hptype.TrialCompleted || *got.Value != 0.125 || len(got.Attempts) != 1 {
		t.Fatalf("trial 1: %s with %d attempts; want completed from the orphan's result", got.State, len(got.Attempts))
	}
	if runs := b.exec.runs(); runs[1] != 0 {
		t.Fatalf("trial 1 was invoked again %d times while its first invocation was still running", runs[1])
	}
}
