package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
)

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
	if t.State != hptype.TrialQueued || p.Segment != t.Segment {
		// A duplicate delivery, or the job of a segment already done.
		c.cfg.Logger.Debug("dropping a stale job", "trial", t.Number, "state", t.State, "job", l.Job.ID)
		if t.State == hptype.TrialRunning && p.Segment == t.Segment {
			return nil
		}
		return c.cfg.Queue.Ack(wctx, l.Token)
	}
	now := c.cfg.Now().UTC()
	if timeout := c.cfg.Spec.Trainer.Timeout; t.WallSeconds() >= timeout.Seconds() {
		t.State, t.FinishedAt = hptype.TrialFailed, now
		t.Error = fmt.Sprintf("the trial trained for %s over %d segments, reaching its trainer.timeout of %s; raise trainer.timeout", formatSeconds(t.WallSeconds()), t.Segments(), timeout)
		if err := c.cfg.Store.UpdateTrial(wctx, t); err != nil {
			return fmt.Errorf("fail trial %d: %w", t.Number, err)
		}
		c.emit(TrialFailed, t, t.Error)
		return c.cfg.Queue.Ack(wctx, l.Token)
	}
	var target float64
	if c.cfg.Scheduler != nil {
		target = c.cfg.Scheduler.Target(t)
	}
	t.State, t.LeaseToken = hptype.TrialRunning, l.Token
	t.Attempts = append(t.Attempts, hptype.Attempt{
		Number: len(t.Attempts) + 1, Segment: t.Segment, ResourceFrom: t.Resource, ResourceTarget: target,
		StartedAt: now, Status: attemptRunning,
	})
	if err := c.cfg.Store.UpdateTrial(wctx, t); err != nil {
		return fmt.Errorf("start trial %d: %w", t.Number, err)
	}
	req := c.request(t, now)
	exec := c.cfg.Executor
	if onPool(t) {
		exec = c.cfg.Pool
	}
	c.launch(ctx, t.Number, l.Token, l.Attempt, true, func(ctx context.Context) (hptype.SegmentResult, error) {
		return exec.Run(ctx, req)
	})
	c.emit(TrialStarted, t, "")
	return nil
}

// launch runs a segment in its own goroutine, extending its lease while it
// runs if heartbeat is set, and hands the outcome to the coordinator's
// goroutine.
func (c *coordinator) launch(ctx context.Context, trial int, token string, failures int, heartbeat bool, run func(context.Context) (hptype.SegmentResult, error)) {
	sctx, cancel := context.WithCancel(ctx)
	c.running[trial] = &inflight{cancel: cancel}
	go func() {
		hctx, stopHeartbeat := context.WithCancelCause(sctx)
		if heartbeat {
			go func() {
				if err := queue.KeepLeased(hctx, c.cfg.Queue, token, c.cfg.Visibility, c.cfg.Logger); err != nil {
					c.cfg.Logger.Warn("lease lost; stopping the segment", "trial", trial, "error", err)
					stopHeartbeat(err)
				}
			}()
		}
		start := time.Now()
		res, err := run(hctx)
		wall := time.Since(start)
		if cause := context.Cause(hctx); err == nil && errors.Is(cause, queue.ErrLeaseLost) {
			err = cause
		}
		stopHeartbeat(nil)
		c.results <- outcome{number: trial, token: token, failures: failures, res: res, err: err, wall: wall}
	}()
}

func formatSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

// request builds the SegmentRequest of a trial's next segment. The segment
// may run until the backend's max_runtime or the rest of the trial's
// timeout, whichever comes first.
func (c *coordinator) request(t *hptype.Trial, now time.Time) hptype.SegmentRequest {
	sp := c.cfg.Spec
	tr := sp.Trainer
	w := hptype.Workload{Builtin: tr.Builtin, Command: tr.Command, Env: tr.Env}
	unit := "epoch"
	if len(tr.Command) > 0 {
		unit = "step"
		w.Dir = tr.Dir
		if !filepath.IsAbs(w.Dir) {
			w.Dir = filepath.Join(c.cfg.SpecDir, w.Dir)
		}
	}
	var logPath string
	if c.cfg.LogDir != "" {
		logPath = filepath.Join(c.cfg.LogDir, c.study.Name, fmt.Sprintf("trial-%d.log", t.Number))
	}
	run := tr.Timeout - time.Duration(t.WallSeconds()*float64(time.Second))
	if mr := sp.Backend.MaxRuntime; mr > 0 && mr < run && !onPool(t) {
		run = mr
	}
	a := t.Attempts[len(t.Attempts)-1]
	resource := hptype.ResourceRange{From: t.Resource, To: a.ResourceTarget, Unit: unit}
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      c.study.ID,
		StudyName:  c.study.Name,
		Trial:      t.Number,
		Segment:    a.Segment,
		Attempt:    a.Number,
		Params:     t.Params,
		Seed:       TrialSeed(sp.Sampler.Seed, t.Number),
		Deadline:   now.Add(run),
		Resource:   resource,
		Checkpoint: &hptype.CheckpointPolicy{
			Store:     c.cfg.Checkpoints.URI(),
			Prefix:    c.prefix(t.Number),
			Every:     hptype.Duration(sp.Checkpoint.Every),
			Grace:     hptype.Duration(sp.Checkpoint.Grace),
			KeepLast:  sp.Checkpoint.KeepLast,
			Inherited: inherited(t),
		},
		Workload: w,
		LogPath:  logPath,
	}
}

// inherited is the checkpoint the trial's latest exploit copied, if any.
func inherited(t *hptype.Trial) string {
	for i := len(t.Rungs) - 1; i >= 0; i-- {
		if t.Rungs[i].Action == hptype.RungExploit {
			return t.Rungs[i].Checkpoint
		}
	}
	return ""
}

// TrialSeed derives a trial's workload seed from the study's seed, so a
// trial trains the same way however often it is run.
func TrialSeed(seed int64, trial int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", seed, trial)
	return int64(h.Sum64() & math.MaxInt64)
}
