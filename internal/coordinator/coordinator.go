// Package coordinator runs a study: it expands the space into trials,
// queues a job per trial, dispatches jobs to an executor up to the study's
// concurrency, records every result with a compare-and-set on the trial,
// accounts for the cost of every attempt, and enforces the budget. A
// coordinator killed at any moment and started again continues the study:
// the store and the queue are the source of truth, not its memory.
package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/store"
)

// Attempt statuses recorded on trials.
const (
	attemptRunning     = "running"
	attemptCompleted   = "completed"
	attemptFailed      = "failed"      // the workload failed: useful to know, not retried
	attemptError       = "error"       // the trainer could not run or crashed: retried
	attemptInterrupted = "interrupted" // stopped by the user or the budget
	attemptLost        = "lost"        // the coordinator died while it ran
)

// ErrSearchChanged is returned when a study is resumed with a space file
// whose search (space, sampler, objective or trainer) differs from the one it
// started with.
var ErrSearchChanged = errors.New("the study exists with a different search")

// Config configures a coordinator run.
type Config struct {
	Spec *spec.Spec
	// SpecDir resolves the trainer's relative working directory.
	SpecDir  string
	Store    store.Store
	Queue    queue.Queue
	Executor executor.Executor
	// Sampler defaults to search.New(Spec).
	Sampler search.Sampler
	// LogDir holds trial logs, as LogDir/<study>/trial-<n>.log.
	LogDir string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnEvent, if set, receives every event from the coordinator's goroutine;
	// it must return quickly.
	OnEvent func(Event)
	// Visibility is the job lease's visibility timeout; the lease is extended
	// at 0.8 x Visibility while the segment runs. Defaults to 30 seconds.
	Visibility time.Duration
	// MaxAttempts is how many times a trial whose trainer crashed is tried
	// before it fails. Defaults to 3; it should match the queue's.
	MaxAttempts int
	// PollInterval is how often queued work is looked for while none is
	// visible (a retry in backoff). Defaults to 200 milliseconds.
	PollInterval time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Spec == nil || c.Store == nil || c.Queue == nil || c.Executor == nil {
		return c, errors.New("coordinator: Spec, Store, Queue and Executor are required")
	}
	if c.Sampler == nil {
		s, err := search.New(c.Spec)
		if err != nil {
			return c, err
		}
		c.Sampler = s
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OnEvent == nil {
		c.OnEvent = func(Event) {}
	}
	if c.Visibility <= 0 {
		c.Visibility = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Result is how a run ended.
type Result struct {
	Study    *hptype.Study
	Trials   []*hptype.Trial
	Progress Progress
	// Reason explains why the study stopped, when it did not complete.
	Reason string
}

// jobPayload is what a queued job carries.
type jobPayload struct {
	Study string `json:"study"`
	Trial int    `json:"trial"`
}

// outcome is what a dispatched segment came back with.
type outcome struct {
	number int
	token  string
	// failures is how many earlier attempts of the job failed, plus one.
	failures int
	res    hptype.SegmentResult
	err    error
	wall   time.Duration
}

type inflight struct {
	cancel context.CancelFunc
	lease  queue.Lease
}

type coordinator struct {
	cfg      Config
	study    *hptype.Study
	trials   []*hptype.Trial // by number
	running  map[int]*inflight
	results  chan outcome
	runStart time.Time
	// elapsedBefore is the study's wall time from earlier runs.
	elapsedBefore float64
	exhausted     bool
}

// Run runs the study of cfg.Spec until it completes, its budget is spent or
// ctx ends; a study that exists already is resumed. On ctx's end it stops
// the running trials, records them as interrupted and returns with the
// study stopped; running it again resumes it.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &coordinator{cfg: cfg, running: map[int]*inflight{}, results: make(chan outcome)}
	// Records are written with a context that outlives ctx: stopping cleanly
	// means writing down what was stopped.
	wctx := context.WithoutCancel(ctx)
	if err := c.open(wctx); err != nil {
		return nil, err
	}
	if err := c.recover(wctx); err != nil {
		return nil, err
	}
	c.runStart = cfg.Now()
	c.emit(StudyStarted, nil, "")
	state, reason, err := c.loop(ctx, wctx)
	if err != nil {
		return nil, err
	}
	if err := c.finish(wctx, state); err != nil {
		return nil, err
	}
	c.emit(StudyFinished, nil, reason)
	return &Result{Study: c.study, Trials: c.trials, Progress: c.progress(), Reason: reason}, nil
}

// open finds the study or creates it.
func (c *coordinator) open(ctx context.Context) error {
	sp := c.cfg.Spec
	encoded, err := spec.Encode(sp)
	if err != nil {
		return fmt.Errorf("encode space: %w", err)
	}
	fp := sp.SearchFingerprint()
	st, err := c.cfg.Store.GetStudy(ctx, sp.Name)
	switch {
	case errors.Is(err, hptype.ErrNotFound):
		now := c.cfg.Now().UTC()
		st = &hptype.Study{
			ID: uuid.NewString(), Name: sp.Name, Spec: encoded, SearchFingerprint: fp,
			State: hptype.StudyRunning, CreatedAt: now, UpdatedAt: now,
		}
		if err := c.cfg.Store.CreateStudy(ctx, st); err != nil {
			return fmt.Errorf("create study %q: %w", sp.Name, err)
		}
	case err != nil:
		return fmt.Errorf("load study %q: %w", sp.Name, err)
	default:
		if st.SearchFingerprint != fp {
			return fmt.Errorf("study %q: %w (space, sampler, objective or trainer changed); give the study a new name, or remove it from the state directory to start over", sp.Name, ErrSearchChanged)
		}
		st.Spec = encoded
		st.State = hptype.StudyRunning
		st.UpdatedAt = c.cfg.Now().UTC()
		if err := c.cfg.Store.UpdateStudy(ctx, st); err != nil {
			return fmt.Errorf("resume study %q: %w", sp.Name, err)
		}
	}
	c.study = st
	c.elapsedBefore = st.ElapsedSeconds
	trials, err := c.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("load trials of %q: %w", sp.Name, err)
	}
	for i, t := range trials {
		if t.Number != i {
			return fmt.Errorf("study %q: trial %d is missing from the store (found trial %d in its place)", sp.Name, i, t.Number)
		}
	}
	c.trials = trials
	return nil
}

// recover brings the trials of an earlier run to a state this run can go
// on from: attempts that were running when that run died are recorded as
// lost and their jobs given back; every unfinished trial has a job in the
// queue; jobs of finished trials are acknowledged.
func (c *coordinator) recover(ctx context.Context) error {
	var finishedTokens []string
	for _, t := range c.trials {
		switch {
		case t.State == hptype.TrialRunning:
			if n := len(t.Attempts); n > 0 && t.Attempts[n-1].Status == attemptRunning {
				t.Attempts[n-1].Status = attemptLost
				t.Attempts[n-1].Error = "the coordinator stopped while this attempt ran; its duration is unknown"
			}
			if t.LeaseToken != "" {
				if err := c.cfg.Queue.Release(ctx, t.LeaseToken); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
					return fmt.Errorf("give back the job of trial %d: %w", t.Number, err)
				}
			}
			t.State, t.LeaseToken = hptype.TrialQueued, ""
			if err := c.cfg.Store.UpdateTrial(ctx, t); err != nil {
				return fmt.Errorf("recover trial %d: %w", t.Number, err)
			}
		case t.State == hptype.TrialInterrupted:
			t.State = hptype.TrialQueued
			if err := c.cfg.Store.UpdateTrial(ctx, t); err != nil {
				return fmt.Errorf("requeue trial %d: %w", t.Number, err)
			}
		case t.State.Finished() && t.LeaseToken != "":
			finishedTokens = append(finishedTokens, t.LeaseToken)
		}
		if t.State == hptype.TrialQueued {
			if err := c.requeue(ctx, t.Number); err != nil {
				return err
			}
		}
	}
	if len(finishedTokens) > 0 {
		// The previous run recorded these results but may have died before
		// acknowledging their jobs; stale tokens are expected here.
		if err := c.cfg.Queue.Ack(ctx, finishedTokens...); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return fmt.Errorf("acknowledge finished jobs: %w", err)
		}
	}
	return nil
}

// requeue makes sure a queued trial's job can be leased: it enqueues the job
// if it is missing, and gives back a lease that a previous coordinator took
// but died before recording on the trial. Only one coordinator holds a study
// at a time, so a lease under its owner name found now is a dead one's.
func (c *coordinator) requeue(ctx context.Context, n int) error {
	info, err := c.cfg.Queue.Get(ctx, c.jobID(n))
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return c.enqueue(ctx, n)
	case err != nil:
		return fmt.Errorf("look up the job of trial %d: %w", n, err)
	case info.State == queue.StateLeased && info.Owner == leaseOwner:
		if err := c.cfg.Queue.Release(ctx, info.Token); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return fmt.Errorf("give back the job of trial %d: %w", n, err)
		}
	}
	return nil
}

// leaseOwner names the coordinator's leases in the queue.
const leaseOwner = "coordinator"

func (c *coordinator) jobID(n int) string { return fmt.Sprintf("%s/trial/%d", c.study.ID, n) }

func (c *coordinator) enqueue(ctx context.Context, n int) error {
	payload, err := json.Marshal(jobPayload{Study: c.study.ID, Trial: n})
	if err != nil {
		return err
	}
	if _, err := c.cfg.Queue.Enqueue(ctx, queue.Job{ID: c.jobID(n), Payload: payload}); err != nil {
		return fmt.Errorf("queue trial %d: %w", n, err)
	}
	return nil
}

// loop runs until the study is done or stops; it returns the study's final
// state and, when it stopped early, why.
func (c *coordinator) loop(ctx, wctx context.Context) (hptype.StudyState, string, error) {
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	for {
		if reason := c.budgetSpent(); reason != "" {
			return hptype.StudyBudgetExhausted, reason, c.stopAll(wctx, reason)
		}
		if err := c.createTrials(wctx); err != nil {
			return "", "", c.abort(wctx, err)
		}
		if err := c.dispatch(ctx, wctx); err != nil {
			return "", "", c.abort(wctx, err)
		}
		if len(c.running) == 0 && c.unfinished() == 0 && (len(c.trials) >= c.cfg.Spec.MaxTrials || c.exhausted) {
			if c.progress().Completed == 0 {
				return hptype.StudyFailed, "no trial completed", nil
			}
			return hptype.StudyCompleted, "", nil
		}
		select {
		case <-ctx.Done():
			reason := context.Cause(ctx).Error()
			return hptype.StudyStopped, reason, c.stopAll(wctx, reason)
		case o := <-c.results:
			reason := ""
			if ctx.Err() != nil {
				// The segment ended because the study is stopping.
				reason = context.Cause(ctx).Error()
			}
			if err := c.handle(wctx, o, reason); err != nil {
				return "", "", c.abort(wctx, err)
			}
		case <-poll.C:
		}
	}
}

// unfinished counts trials that still need to run.
func (c *coordinator) unfinished() int {
	n := 0
	for _, t := range c.trials {
		if !t.State.Finished() {
			n++
		}
	}
	return n
}

// createTrials samples new trials while there is room for them to run.
// Trials are created only as slots free up, so that samplers that learn
// from results see as many as possible.
func (c *coordinator) createTrials(ctx context.Context) error {
	for !c.exhausted && len(c.trials) < c.cfg.Spec.MaxTrials && c.unfinished() < c.cfg.Spec.MaxConcurrency {
		n := len(c.trials)
		history := make([]hptype.Trial, len(c.trials))
		for i, t := range c.trials {
			history[i] = *t
		}
		params, err := c.cfg.Sampler.Sample(ctx, n, history)
		if errors.Is(err, search.ErrExhausted) {
			c.exhausted = true
			c.cfg.Logger.Info("search space exhausted", "study", c.study.Name, "trials", n)
			return nil
		}
		if err != nil {
			return fmt.Errorf("sample trial %d: %w", n, err)
		}
		t := &hptype.Trial{Study: c.study.ID, Number: n, Params: params, State: hptype.TrialQueued, CreatedAt: c.cfg.Now().UTC()}
		if err := c.cfg.Store.CreateTrial(ctx, t); err != nil {
			return fmt.Errorf("create trial %d: %w", n, err)
		}
		c.trials = append(c.trials, t)
		if err := c.enqueue(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// dispatch leases queued jobs while there are free slots and starts them.
func (c *coordinator) dispatch(ctx, wctx context.Context) error {
	free := c.cfg.Spec.MaxConcurrency - len(c.running)
	if free <= 0 || ctx.Err() != nil {
		return nil
	}
	queued := 0
	for _, t := range c.trials {
		if t.State == hptype.TrialQueued {
			queued++
		}
	}
	if queued == 0 {
		return nil
	}
	leases, err := c.cfg.Queue.Lease(wctx, queue.LeaseParams{Max: min(free, queued), Visibility: c.cfg.Visibility, Owner: leaseOwner})
	if err != nil {
		return fmt.Errorf("lease jobs: %w", err)
	}
	for _, l := range leases {
		if err := c.start(ctx, wctx, l); err != nil {
			return err
		}
	}
	return nil
}

// start marks a leased trial running and runs its segment.
func (c *coordinator) start(ctx, wctx context.Context, l queue.Lease) error {
	var p jobPayload
	if err := json.Unmarshal(l.Job.Payload, &p); err != nil || p.Study != c.study.ID || p.Trial < 0 || p.Trial >= len(c.trials) {
		c.cfg.Logger.Warn("dropping a job that belongs to no trial of this study", "job", l.Job.ID)
		return c.cfg.Queue.Ack(wctx, l.Token)
	}
	t := c.trials[p.Trial]
	if t.State != hptype.TrialQueued {
		// A duplicate delivery of a trial that finished or already runs.
		c.cfg.Logger.Debug("ignoring duplicate job", "trial", t.Number, "state", t.State)
		if t.State.Finished() {
			return c.cfg.Queue.Ack(wctx, l.Token)
		}
		return nil
	}
	now := c.cfg.Now().UTC()
	t.State, t.LeaseToken = hptype.TrialRunning, l.Token
	t.Attempts = append(t.Attempts, hptype.Attempt{Number: len(t.Attempts) + 1, StartedAt: now, Status: attemptRunning})
	if err := c.cfg.Store.UpdateTrial(wctx, t); err != nil {
		return fmt.Errorf("start trial %d: %w", t.Number, err)
	}
	req := c.request(t, now)
	sctx, cancel := context.WithCancel(ctx)
	c.running[t.Number] = &inflight{cancel: cancel, lease: l}
	go c.execute(sctx, req, l)
	c.emit(TrialStarted, t, "")
	return nil
}

func (c *coordinator) request(t *hptype.Trial, now time.Time) hptype.SegmentRequest {
	tr := c.cfg.Spec.Trainer
	w := hptype.Workload{Builtin: tr.Builtin, Command: tr.Command, Env: tr.Env}
	if len(tr.Command) > 0 {
		w.Dir = tr.Dir
		if !filepath.IsAbs(w.Dir) {
			w.Dir = filepath.Join(c.cfg.SpecDir, w.Dir)
		}
	}
	var logPath string
	if c.cfg.LogDir != "" {
		logPath = filepath.Join(c.cfg.LogDir, c.study.Name, fmt.Sprintf("trial-%d.log", t.Number))
	}
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      c.study.ID,
		StudyName:  c.study.Name,
		Trial:      t.Number,
		Attempt:    len(t.Attempts),
		Params:     t.Params,
		Seed:       TrialSeed(c.cfg.Spec.Sampler.Seed, t.Number),
		Deadline:   now.Add(tr.Timeout),
		Workload:   w,
		LogPath:    logPath,
	}
}

// TrialSeed derives a trial's workload seed from the study's seed, so a
// trial trains the same way however often it is run.
func TrialSeed(seed int64, trial int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", seed, trial)
	return int64(h.Sum64() & math.MaxInt64)
}

// execute runs one segment, extending its lease while it runs, and hands
// the outcome to the coordinator's goroutine.
func (c *coordinator) execute(ctx context.Context, req hptype.SegmentRequest, l queue.Lease) {
	hctx, stopHeartbeat := context.WithCancelCause(ctx)
	go c.heartbeat(hctx, l.Token, stopHeartbeat)
	start := time.Now()
	res, err := c.cfg.Executor.Run(hctx, req)
	wall := time.Since(start)
	if cause := context.Cause(hctx); err == nil && errors.Is(cause, queue.ErrLeaseLost) {
		err = cause
	}
	stopHeartbeat(nil)
	c.results <- outcome{number: req.Trial, token: l.Token, failures: l.Attempt, res: res, err: err, wall: wall}
}

// heartbeat extends a lease at 0.8 x the visibility timeout; if the lease is
// lost, it stops the segment, since another holder may run it.
func (c *coordinator) heartbeat(ctx context.Context, token string, stop context.CancelCauseFunc) {
	tick := time.NewTicker(c.cfg.Visibility * 4 / 5)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := c.cfg.Queue.Extend(ctx, token, c.cfg.Visibility); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.cfg.Logger.Warn("lease lost; stopping the segment", "error", err)
				stop(fmt.Errorf("extend lease: %w", err))
				return
			}
		}
	}
}

// handle records a segment's outcome. stopReason, when set, means the study
// is stopping and the segment was stopped for that reason.
func (c *coordinator) handle(ctx context.Context, o outcome, stopReason string) error {
	delete(c.running, o.number)
	t := c.trials[o.number]
	if t.State != hptype.TrialRunning || t.LeaseToken != o.token {
		c.cfg.Logger.Warn("ignoring a late result", "trial", o.number)
		return nil
	}
	sp := c.cfg.Spec
	a := &t.Attempts[len(t.Attempts)-1]
	a.FinishedAt = c.cfg.Now().UTC()
	billed := o.wall
	if o.err == nil {
		billed = time.Duration(o.res.Usage.BilledMS) * time.Millisecond
	}
	a.WallSeconds = billed.Seconds()
	a.CostUSD = Cost(sp.Backend, billed)
	var kind EventKind
	var ack func() error
	switch {
	case stopReason != "":
		a.Status, a.Error = attemptInterrupted, stopReason
		t.State, t.LeaseToken = hptype.TrialInterrupted, ""
		kind = TrialInterrupted
		ack = func() error { return c.cfg.Queue.Release(ctx, o.token) }
	case o.err != nil:
		a.Status, a.Error = attemptError, o.err.Error()
		if o.failures >= c.cfg.MaxAttempts {
			t.State, t.Error, t.FinishedAt = hptype.TrialFailed, fmt.Sprintf("the trainer failed %d times; last: %v", o.failures, o.err), a.FinishedAt
			kind = TrialFailed
			ack = func() error { return c.cfg.Queue.Ack(ctx, o.token) }
		} else {
			t.State, t.LeaseToken = hptype.TrialQueued, ""
			kind = TrialRetrying
			ack = func() error { return c.cfg.Queue.Nack(ctx, o.token, o.err.Error()) }
		}
	default:
		t.Metrics = append(t.Metrics, o.res.Metrics...)
		t.FinishedAt = a.FinishedAt
		ack = func() error { return c.cfg.Queue.Ack(ctx, o.token) }
		if o.res.Status != hptype.SegmentCompleted {
			a.Status, a.Error = attemptFailed, o.res.Error
			t.State, t.Error, kind = hptype.TrialFailed, o.res.Error, TrialFailed
			break
		}
		a.Status = attemptCompleted
		if v, ok := finalValue(o.res.Metrics, sp.Objective.Metric); ok {
			t.State, t.Value, kind = hptype.TrialCompleted, &v, TrialCompleted
		} else {
			t.State, kind = hptype.TrialFailed, TrialFailed
			t.Error = fmt.Sprintf("the trainer reported no %q metric (objective.metric); it reported: %s", sp.Objective.Metric, metricNames(o.res.Metrics))
		}
	}
	if err := c.cfg.Store.UpdateTrial(ctx, t); err != nil {
		return fmt.Errorf("record trial %d: %w", t.Number, err)
	}
	if err := ack(); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return fmt.Errorf("settle the job of trial %d: %w", t.Number, err)
	}
	c.emit(kind, t, a.Error)
	return c.saveElapsed(ctx)
}

// Cost prices a billed duration on a backend: GB-seconds of the memory size
// times the GB-second price, plus the price of one request.
func Cost(b spec.Backend, billed time.Duration) float64 {
	gb := float64(b.MemoryMB) / 1024
	return billed.Seconds()*gb*b.PricePerGBSecond + b.PricePerRequest
}

func finalValue(ms []hptype.Metric, name string) (float64, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Name == name && !math.IsNaN(ms[i].Value) {
			return ms[i].Value, true
		}
	}
	return 0, false
}

func metricNames(ms []hptype.Metric) string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if !seen[m.Name] {
			seen[m.Name] = true
			out = append(out, m.Name)
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return fmt.Sprint(out)
}

// budgetSpent says which budget limit is reached, if any.
func (c *coordinator) budgetSpent() string {
	b := c.cfg.Spec.Budget
	if b.MaxWall > 0 && c.elapsed() >= b.MaxWall.Seconds() {
		return fmt.Sprintf("budget: max_wall %s reached", b.MaxWall)
	}
	if b.MaxCostUSD > 0 {
		if cost := c.progress().CostUSD; cost >= b.MaxCostUSD {
			return fmt.Sprintf("budget: max_cost_usd %g reached (spent $%.6f)", b.MaxCostUSD, cost)
		}
	}
	return ""
}

func (c *coordinator) elapsed() float64 {
	return c.elapsedBefore + c.cfg.Now().Sub(c.runStart).Seconds()
}

func (c *coordinator) saveElapsed(ctx context.Context) error {
	c.study.ElapsedSeconds = c.elapsed()
	c.study.UpdatedAt = c.cfg.Now().UTC()
	if err := c.cfg.Store.UpdateStudy(ctx, c.study); err != nil {
		return fmt.Errorf("record study %q: %w", c.study.Name, err)
	}
	return nil
}

// stopAll stops every running segment and records it as interrupted.
func (c *coordinator) stopAll(ctx context.Context, reason string) error {
	for _, f := range c.running {
		f.cancel()
	}
	var first error
	for len(c.running) > 0 {
		if err := c.handle(ctx, <-c.results, reason); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// abort stops running segments after an error that ends the run.
func (c *coordinator) abort(ctx context.Context, cause error) error {
	if err := c.stopAll(ctx, "stopped: "+cause.Error()); err != nil {
		c.cfg.Logger.Error("while stopping", "error", err)
	}
	return cause
}

func (c *coordinator) finish(ctx context.Context, state hptype.StudyState) error {
	c.study.State = state
	return c.saveElapsed(ctx)
}

func (c *coordinator) progress() Progress {
	return Summarize(c.cfg.Spec.Objective, c.cfg.Spec.MaxTrials, c.elapsed(), c.trials)
}

func (c *coordinator) emit(kind EventKind, t *hptype.Trial, msg string) {
	e := Event{Time: c.cfg.Now().UTC(), Kind: kind, Study: c.study.Name, Message: msg, Progress: c.progress()}
	if t != nil {
		cp := *t
		e.Trial = &cp
	}
	c.cfg.OnEvent(e)
}
