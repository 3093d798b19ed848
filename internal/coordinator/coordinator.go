// Package coordinator runs a study: it expands the space into trials,
// queues a job per trial segment, dispatches jobs to an executor up to the
// study's concurrency, records every result with a compare-and-set on the
// trial, continues suspended trials from their checkpoints, lets the
// scheduler stop, promote or (PBT) reseed trials at their rungs, accounts for the
// cost of every attempt (and for the work lost by failed ones), and enforces
// the budget. A coordinator killed at any moment and started again continues
// the study: the store, the queue and the checkpoint store are the source of
// truth, not its memory.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/placement"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/store"
)

// Attempt statuses recorded on trials.
const (
	attemptRunning   = "running"
	attemptCompleted = "completed"
	// attemptSuspended: the segment reached its deadline and checkpointed.
	attemptSuspended = "suspended"
	// attemptFailed: the workload failed; useful to know, not retried.
	attemptFailed = "failed"
	// attemptError: the trainer could not run, crashed or was killed; retried.
	attemptError = "error"
	// attemptInterrupted: stopped by the user or the budget.
	attemptInterrupted = "interrupted"
	// attemptLost: the coordinator died while it ran.
	attemptLost = "lost"
)

// ErrSearchChanged is returned when a study is resumed with a space file
// whose search (space, sampler, objective or trainer) differs from the one it
// started with.
var ErrSearchChanged = errors.New("the study exists with a different search")

// Checkpoints is what the coordinator reads of the checkpoint store: the
// traces trainers leave there, so that a crash loses as little as possible.
type Checkpoints interface {
	// URI names the store for trainers, e.g. "file:///state/checkpoints".
	URI() string
	// LastOf returns the newest valid checkpoint that the given attempt of
	// a segment wrote under prefix, with the metrics reported up to it, or
	// nil when it wrote none.
	LastOf(ctx context.Context, prefix string, segment, attempt int) (*hptype.CheckpointRef, []hptype.Metric, error)
	// Result returns the SegmentResult a trainer stored for an attempt, or
	// nil when there is none.
	Result(ctx context.Context, prefix string, segment, attempt int) (*hptype.SegmentResult, error)
	// Finish removes a finished trial's checkpoints, all of them or all but
	// the newest.
	Finish(ctx context.Context, prefix string, keepNewest bool) error
	// Handover copies the newest checkpoint under from whose resource is
	// below the limit into trial's prefix to, as the newest checkpoint of
	// the given attempt of a segment, for population-based training's
	// exploit; DropHandover deletes such a copy.
	Handover(ctx context.Context, from, to string, trial, segment, attempt int, below float64) (*hptype.CheckpointRef, error)
	DropHandover(ctx context.Context, to string, segment, attempt int) error
}

// Config configures a coordinator run.
type Config struct {
	Spec *spec.Spec
	// SpecDir resolves the trainer's relative working directory.
	SpecDir  string
	Store    store.Store
	Queue    queue.Queue
	Executor executor.Executor
	// Checkpoints is the store trials checkpoint to. Required.
	Checkpoints Checkpoints
	// Sampler defaults to search.New(Spec).
	Sampler search.Sampler
	// Scheduler defaults to schedule.New(Spec): none when the space file
	// has no scheduler section.
	Scheduler schedule.Scheduler
	// Pool runs the segments of the trials placed on the space file's
	// worker pool. Required when the space file has a pool.
	Pool executor.Executor
	// PoolUsage reads the pool workers' ledgers, for the cost of their
	// idle time; nil when there is no pool.
	PoolUsage func(ctx context.Context) ([]hptype.WorkerUsage, error)
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
	// MaxAttempts is how many times a segment whose trainer crashed is tried
	// before the trial fails. Defaults to 3; it should match the queue's.
	MaxAttempts int
	// PollInterval is how often queued work is looked for while none is
	// visible (a retry in backoff). Defaults to 200 milliseconds.
	PollInterval time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Spec == nil || c.Store == nil || c.Queue == nil || c.Executor == nil || c.Checkpoints == nil {
		return c, errors.New("coordinator: Spec, Store, Queue, Executor and Checkpoints are required")
	}
	if c.Spec.Pool != nil && c.Pool == nil {
		return c, fmt.Errorf("coordinator: the space file has pool %q but no pool executor was given", c.Spec.Pool.Name)
	}
	if c.Sampler == nil {
		s, err := search.New(c.Spec)
		if err != nil {
			return c, err
		}
		c.Sampler = s
	}
	if c.Scheduler == nil {
		s, err := schedule.New(c.Spec)
		if err != nil {
			return c, err
		}
		c.Scheduler = s
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

type inflight struct {
	cancel context.CancelFunc
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
	// workers are the pool workers' ledgers, as last read, and since as
	// they were when this run began.
	workers, since []hptype.WorkerUsage
}

// Run runs the study of cfg.Spec until it completes, its budget is spent or
// ctx ends; a study that exists already is resumed. On ctx's end it stops
// the running trials (they checkpoint if they can), records them as
// interrupted and returns with the study stopped; running it again resumes
// it.
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
	c.runStart = cfg.Now()
	if cfg.Spec.Pool != nil {
		c.readWorkers(wctx)
		if c.since == nil {
			c.since = []hptype.WorkerUsage{}
		}
	}
	if err := c.recover(wctx); err != nil {
		return nil, err
	}
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
		where, err := placement.Place(c.cfg.Spec, params)
		if err != nil {
			t.State, t.FinishedAt, t.Error = hptype.TrialFailed, t.CreatedAt, "placement: "+err.Error()
		}
		t.Placement = &where
		if err := c.cfg.Store.CreateTrial(ctx, t); err != nil {
			return fmt.Errorf("create trial %d: %w", n, err)
		}
		c.trials = append(c.trials, t)
		if t.State == hptype.TrialFailed {
			c.emit(TrialFailed, t, t.Error)
			continue
		}
		if err := c.enqueue(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// budgetSpent says which budget limit is reached, if any.
func (c *coordinator) budgetSpent() string {
	b := c.cfg.Spec.Budget
	if b.MaxWall > 0 && c.elapsed() >= b.MaxWall.Seconds() {
		return fmt.Sprintf("budget: max_wall %s reached", b.MaxWall)
	}
	if b.MaxCostUSD > 0 {
		p := c.progress()
		cost := p.CostUSD
		if p.Pool != nil {
			cost += p.Pool.IdleCostUSD
		}
		if cost >= b.MaxCostUSD {
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

// finish records the study's end and, when it is over, applies the
// checkpoint keep policy.
func (c *coordinator) finish(ctx context.Context, state hptype.StudyState) error {
	c.readWorkers(ctx)
	c.study.State = state
	if state == hptype.StudyCompleted || state == hptype.StudyFailed {
		c.dropCheckpoints(ctx)
	}
	return c.saveElapsed(ctx)
}

// dropCheckpoints removes what the keep policy does not keep. Failing to
// remove a checkpoint costs storage, not correctness, so it is logged.
func (c *coordinator) dropCheckpoints(ctx context.Context) {
	keep := c.cfg.Spec.Checkpoint.Keep
	if keep == spec.KeepAll {
		return
	}
	best := c.progress().Best
	for _, t := range c.trials {
		if t.Checkpoint == nil && len(t.Attempts) == 0 {
			continue
		}
		keepNewest := keep == spec.KeepBest && best != nil && best.Number == t.Number
		if err := c.cfg.Checkpoints.Finish(ctx, c.prefix(t.Number), keepNewest); err != nil {
			c.cfg.Logger.Warn("could not remove checkpoints", "trial", t.Number, "error", err)
		}
	}
}

func (c *coordinator) progress() Progress {
	p := Summarize(c.cfg.Spec.Objective, c.cfg.Spec.MaxTrials, c.elapsed(), c.trials)
	if c.cfg.Spec.Pool != nil {
		p.Pool = PoolSummary(c.cfg.Spec.Pool, c.trials, c.workers, c.since)
	}
	return p
}

func (c *coordinator) emit(kind EventKind, t *hptype.Trial, msg string) {
	e := Event{Time: c.cfg.Now().UTC(), Kind: kind, Study: c.study.Name, Message: msg, Progress: c.progress()}
	e.Trial = summaryOf(t)
	e.Progress.Best = summaryOf(e.Progress.Best)
	c.cfg.OnEvent(e)
}

// summaryOf copies a trial for an event, without its metric history, which
// grows with every step of training and would make every event as long.
func summaryOf(t *hptype.Trial) *hptype.Trial {
	if t == nil {
		return nil
	}
	cp := *t
	cp.Metrics = nil
	return &cp
}
