// Package worker is the pool worker (hpsearch worker): a long-running
// process on a (GPU) machine that leases segment jobs from its pool's
// queue, runs each with the trainer runtime, and leaves the result next to
// the trial's checkpoints for the coordinator.
//
// While a segment runs the worker extends its lease at 0.8 x the
// visibility timeout, and stops the segment (the trainer checkpoints) when
// the lease is lost or the coordinator cancels it. When the worker itself
// is told to stop (SIGTERM, a spot interruption notice), it stops the
// segment the same way, stores the trainer's answer (suspended, with its
// checkpoint), acknowledges the job and exits: the coordinator queues the
// next segment from that checkpoint, which another worker takes. A worker
// that dies without a word loses its lease; the worker that gets the job
// next reports the attempt as lost, so the coordinator continues the trial
// from its last checkpoint under a new attempt.
//
// Pool machines are billed by the hour, busy or idle, so the worker keeps
// a ledger of its busy and idle seconds in every checkpoint store it has
// served, under pools/POOL/workers/ID.json (see ReadUsage).
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/executor/pool"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
)

// Config configures a worker.
type Config struct {
	// Pool names the worker's pool; ID names the worker in it.
	Pool, ID string
	Queue    queue.Queue
	// Executor runs a segment: local trainer processes.
	Executor executor.Executor
	// OpenStore opens the checkpoint store a job names.
	OpenStore func(ctx context.Context, uri string) (blob.Store, error)
	// WorkDir holds the trial logs, as WorkDir/logs/STUDY/trial-N.log.
	WorkDir string
	// InstanceType and PricePerHour describe the machine, for the ledger.
	InstanceType string
	PricePerHour float64
	// Visibility is the lease's visibility timeout. Defaults to 30 s.
	Visibility time.Duration
	// Wait is how long one Lease waits for a job. Defaults to 10 s.
	Wait time.Duration
	// CancelPoll is how often a running segment's cancellation is looked
	// for. Defaults to 2 s.
	CancelPoll time.Duration
	// LedgerEvery is how often the ledger is written while idle. Defaults
	// to 30 s.
	LedgerEvery time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Pool == "" || c.ID == "" || c.Queue == nil || c.Executor == nil || c.OpenStore == nil {
		return c, errors.New("worker: Pool, ID, Queue, Executor and OpenStore are required")
	}
	if c.Visibility <= 0 {
		c.Visibility = 30 * time.Second
	}
	if c.Wait <= 0 {
		c.Wait = 10 * time.Second
	}
	if c.CancelPoll <= 0 {
		c.CancelPoll = 2 * time.Second
	}
	if c.LedgerEvery <= 0 {
		c.LedgerEvery = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

type worker struct {
	cfg     Config
	started time.Time
	busy    time.Duration
	jobs    int
	// stores are the checkpoint stores served so far, by URI.
	stores map[string]blob.Store
	mu     sync.Mutex
}

// Run works until ctx ends, then stops the segment it runs (which
// checkpoints), stores its answer and returns nil. A queue that cannot be
// reached (the coordinator restarting, or gone until the next study) is
// tried again, every few seconds: a pool outlives studies.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	w := &worker{cfg: cfg, started: cfg.Now(), stores: map[string]blob.Store{}}
	log := cfg.Logger.With("pool", cfg.Pool, "worker", cfg.ID)
	log.Info("worker started", "instance_type", cfg.InstanceType, "price_per_hour", cfg.PricePerHour)
	lastLedger := cfg.Now()
	backoff := time.Second
	for ctx.Err() == nil {
		leases, err := cfg.Queue.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: cfg.Visibility, Wait: cfg.Wait, Owner: cfg.ID})
		switch {
		case ctx.Err() != nil:
		case err != nil:
			log.Warn("could not lease a job; trying again", "in", backoff, "error", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 10*time.Second)
		default:
			backoff = time.Second
		}
		for _, l := range leases {
			w.handle(ctx, log, l)
		}
		if len(leases) > 0 || cfg.Now().Sub(lastLedger) >= cfg.LedgerEvery {
			w.writeLedger(context.WithoutCancel(ctx), log, false)
			lastLedger = cfg.Now()
		}
	}
	w.writeLedger(context.WithoutCancel(ctx), log, true)
	log.Info("worker stopped", "segments", w.jobs, "busy", w.busy.Round(time.Millisecond))
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// lostMessage explains the result of an attempt whose earlier lease ended
// without a result: the worker running it died, or could not store it.
const lostMessage = "the pool worker running this segment stopped without storing a result (its lease expired, or the result could not be stored); the trial continues from its last checkpoint"

// notStarted begins the cause of a job a worker gave back before it ran
// the segment, so that the next worker knows it may run it.
const notStarted = "not started: "

// neverStarted reports whether every earlier lease of the job ended before
// its segment started: the last failure was a worker giving it back
// unstarted. Otherwise (a lease expired, or the result could not be
// stored) the segment may have written checkpoints under this attempt, and
// running it again would write them a second time.
func (w *worker) neverStarted(ctx context.Context, id string) bool {
	info, err := w.cfg.Queue.Get(ctx, id)
	return err == nil && strings.HasPrefix(info.Cause, notStarted) && info.Failures == 1
}

// handle runs one leased job and settles its lease.
func (w *worker) handle(ctx context.Context, log *slog.Logger, l queue.Lease) {
	// Settling a lease must happen even when the worker is stopping.
	wctx := context.WithoutCancel(ctx)
	var job pool.Job
	err := json.Unmarshal(l.Job.Payload, &job)
	req := job.Request
	if err != nil || req.Checkpoint == nil {
		log.Error("dropping a job that is not a segment request with a checkpoint store", "job", l.Job.ID, "error", err)
		w.settle(wctx, log, l, notStarted+"the job is not a segment request with a checkpoint store")
		return
	}
	log = log.With("study", req.StudyName, "trial", req.Trial, "segment", req.Segment, "attempt", req.Attempt)
	st, err := w.store(wctx, req.Checkpoint.Store)
	if err != nil {
		log.Error("cannot open the checkpoint store", "store", req.Checkpoint.Store, "error", err)
		w.settle(wctx, log, l, notStarted+err.Error())
		return
	}
	prefix := req.Checkpoint.Prefix
	if res, err := st.Result(wctx, prefix, req.Segment, req.Attempt); err == nil && res != nil {
		log.Info("the segment has a result already; acknowledging its job")
		w.ack(wctx, log, l)
		return
	}
	if done, err := st.Cancelled(wctx, prefix, req.Segment, req.Attempt); err == nil && done {
		log.Info("the coordinator cancelled the segment before it started")
		w.ack(wctx, log, l)
		return
	}
	if l.Attempt > 1 && !w.neverStarted(wctx, l.Job.ID) {
		log.Warn("an earlier lease of this job ended without a result; reporting the attempt lost")
		res := hptype.SegmentResult{APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
			Status: hptype.SegmentFailed, Retryable: true, Error: lostMessage}
		w.finish(wctx, log, l, st, req, res)
		return
	}

	req.LogPath = filepath.Join(w.cfg.WorkDir, "logs", req.StudyName, fmt.Sprintf("trial-%d.log", req.Trial))
	req.Deadline = w.cfg.Now().Add(time.Duration(job.RunFor))
	runCtx, stop := context.WithCancelCause(wctx)
	defer stop(nil)
	go func() {
		select {
		case <-ctx.Done():
			stop(errors.New("the worker is stopping"))
		case <-runCtx.Done():
		}
	}()
	go func() {
		if err := queue.KeepLeased(runCtx, w.cfg.Queue, l.Token, w.cfg.Visibility, log); err != nil {
			log.Warn("lease lost; stopping the segment", "error", err)
			stop(err)
		}
	}()
	go w.watchCancel(runCtx, st, req, stop)
	log.Info("segment started")
	start := w.cfg.Now()
	res, err := w.cfg.Executor.Run(runCtx, req)
	wall := w.cfg.Now().Sub(start)
	w.mu.Lock()
	w.busy += wall
	w.jobs++
	w.mu.Unlock()
	if err != nil {
		log.Warn("the segment ended without a result", "error", err)
		res = hptype.SegmentResult{APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
			Status: hptype.SegmentFailed, Retryable: true, Error: "pool worker " + w.cfg.ID + ": " + err.Error(),
			Usage: hptype.Usage{WallMS: wall.Milliseconds(), BilledMS: wall.Milliseconds()}}
	}
	log.Info("segment ended", "status", res.Status, "resource", res.ResourceReached, "cause", context.Cause(runCtx))
	w.finish(wctx, log, l, st, req, res)
}

// finish stores the result unless the trainer did, then acknowledges the
// job; a job whose result could not be stored goes back to the queue.
func (w *worker) finish(ctx context.Context, log *slog.Logger, l queue.Lease, st *checkpoint.Store, req hptype.SegmentRequest, res hptype.SegmentResult) {
	if stored, err := st.Result(ctx, req.Checkpoint.Prefix, req.Segment, req.Attempt); err != nil || stored == nil {
		raw, err := json.Marshal(res)
		if err == nil {
			err = st.PutResult(ctx, req.Checkpoint.Prefix, req.Segment, req.Attempt, raw)
		}
		if err != nil {
			log.Error("could not store the segment result", "error", err)
			w.settle(ctx, log, l, "store the result: "+err.Error())
			return
		}
	}
	w.ack(ctx, log, l)
}

func (w *worker) ack(ctx context.Context, log *slog.Logger, l queue.Lease) {
	if err := w.cfg.Queue.Ack(ctx, l.Token); err != nil {
		log.Warn("could not acknowledge the job", "job", l.Job.ID, "error", err)
	}
}

// settle gives a job the worker could not run back as a failed attempt.
func (w *worker) settle(ctx context.Context, log *slog.Logger, l queue.Lease, cause string) {
	if err := w.cfg.Queue.Nack(ctx, l.Token, cause); err != nil {
		log.Warn("could not give the job back", "job", l.Job.ID, "error", err)
	}
}

// watchCancel stops the segment when the coordinator cancels it.
func (w *worker) watchCancel(ctx context.Context, st *checkpoint.Store, req hptype.SegmentRequest, stop context.CancelCauseFunc) {
	tick := time.NewTicker(w.cfg.CancelPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if done, err := st.Cancelled(ctx, req.Checkpoint.Prefix, req.Segment, req.Attempt); err == nil && done {
				stop(errors.New("the coordinator cancelled the segment"))
				return
			}
		}
	}
}

// store opens (once) the checkpoint store named uri.
func (w *worker) store(ctx context.Context, uri string) (*checkpoint.Store, error) {
	w.mu.Lock()
	b, ok := w.stores[uri]
	w.mu.Unlock()
	if !ok {
		var err error
		if b, err = w.cfg.OpenStore(ctx, uri); err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.stores[uri] = b
		w.mu.Unlock()
	}
	return checkpoint.New(b), nil
}

// writeLedger writes the worker's usage to every store it has served.
func (w *worker) writeLedger(ctx context.Context, log *slog.Logger, stopped bool) {
	now := w.cfg.Now()
	w.mu.Lock()
	u := hptype.WorkerUsage{
		ID: w.cfg.ID, Pool: w.cfg.Pool, InstanceType: w.cfg.InstanceType, PricePerHour: w.cfg.PricePerHour,
		StartedAt: w.started.UTC(), UpdatedAt: now.UTC(), BusySeconds: w.busy.Seconds(),
		IdleSeconds: max(0, now.Sub(w.started)-w.busy).Seconds(), Segments: w.jobs, Stopped: stopped,
	}
	stores := make([]blob.Store, 0, len(w.stores))
	for _, b := range w.stores {
		stores = append(stores, b)
	}
	w.mu.Unlock()
	raw, err := json.Marshal(u)
	if err != nil {
		log.Error("could not encode the ledger", "error", err)
		return
	}
	for _, b := range stores {
		if err := b.Put(ctx, ledgerKey(w.cfg.Pool, w.cfg.ID), bytes.NewReader(raw), int64(len(raw)), blob.PutOptions{}); err != nil {
			log.Warn("could not write the ledger", "store", b.URI(), "error", err)
		}
	}
}

func ledgerKey(pool, id string) string {
	return "pools/" + pool + "/workers/" + strings.NewReplacer("/", "_").Replace(id) + ".json"
}

// ReadUsage returns the ledgers of the workers of pool that wrote to b.
func ReadUsage(ctx context.Context, b blob.Store, pool string) ([]hptype.WorkerUsage, error) {
	infos, err := b.List(ctx, "pools/"+pool+"/workers/")
	if err != nil {
		return nil, fmt.Errorf("list the ledgers of pool %s: %w", pool, err)
	}
	var out []hptype.WorkerUsage
	for _, i := range infos {
		r, err := b.Get(ctx, i.Key)
		if err != nil {
			return nil, fmt.Errorf("read the ledger %s: %w", i.Key, err)
		}
		var u hptype.WorkerUsage
		err = json.NewDecoder(r).Decode(&u)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("decode the ledger %s: %w", i.Key, err)
		}
		out = append(out, u)
	}
	return out, nil
}
