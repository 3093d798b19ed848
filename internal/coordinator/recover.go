package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// recover brings the trials of an earlier run to a state this run can go
// on from. An attempt that was running when that run died is reconciled
// from the result its trainer stored, if it stored one; otherwise it is
// recorded as lost, keeping the progress of its last checkpoint, and its job
// is given back. Every unfinished trial gets a job in the queue, and the
// jobs of finished trials are acknowledged.
func (c *coordinator) recover(ctx context.Context) error {
	var finishedTokens []string
	for _, t := range c.trials {
		switch {
		case t.State == hptype.TrialRunning:
			if err := c.recoverRunning(ctx, t); err != nil {
				return err
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
			if err := c.requeue(ctx, t); err != nil {
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

func (c *coordinator) recoverRunning(ctx context.Context, t *hptype.Trial) error {
	a := &t.Attempts[len(t.Attempts)-1]
	prefix := c.prefix(t.Number)
	res, err := c.cfg.Checkpoints.Result(ctx, prefix, a.Segment, a.Number)
	if err != nil {
		c.cfg.Logger.Warn("could not read a stored segment result; the segment will run again", "trial", t.Number, "error", err)
	}
	o := outcome{number: t.Number, token: t.LeaseToken}
	switch {
	case res != nil:
		// The segment finished while no coordinator was there to hear it.
		o.res = c.stored(t, *res)
	case onPool(t):
		// Its job is still on the pool's queue, waiting or running: the
		// pool executor finds it there (enqueueing it again changes
		// nothing) and waits for its result, however long it queues.
		c.cfg.Logger.Info("waiting for a pool segment started before a restart", "trial", t.Number, "segment", a.Segment, "attempt", a.Number)
		req := c.request(t, c.cfg.Now().UTC())
		c.launch(ctx, t.Number, t.LeaseToken, 1, false, func(ctx context.Context) (hptype.SegmentResult, error) {
			return c.cfg.Pool.Run(ctx, req)
		})
		return nil
	case c.cfg.Spec.Backend.Type != spec.Local && c.cfg.Now().Before(c.orphanDeadline(a)):
		// A function invocation outlives the coordinator that made it: wait
		// for its result rather than run the segment twice. Its lease may
		// have expired while no coordinator ran, so it is not extended: the
		// trial's attempt, not the lease, fences the result.
		c.cfg.Logger.Info("waiting for the result of a segment started before a restart", "trial", t.Number, "segment", a.Segment, "attempt", a.Number)
		c.launch(ctx, t.Number, t.LeaseToken, 1, false, func(ctx context.Context) (hptype.SegmentResult, error) {
			return c.awaitResult(ctx, t, a.Segment, a.Number, c.orphanDeadline(a))
		})
		return nil
	default:
		o.err = errCoordinatorDied
	}
	return c.handle(ctx, o, "")
}

// stored marks a result read from the checkpoint store: its billed time is
// the trainer's own measure, which on a function backend is an estimate of
// what the platform billed.
func (c *coordinator) stored(t *hptype.Trial, res hptype.SegmentResult) hptype.SegmentResult {
	if c.cfg.Spec.Backend.Type != spec.Local && !onPool(t) {
		res.Usage.Estimated = true
	}
	return res
}

// orphanDeadline is when a segment started by an earlier coordinator must
// have stored its result: its deadline, plus a minute for the platform.
func (c *coordinator) orphanDeadline(a *hptype.Attempt) time.Time {
	return a.StartedAt.Add(c.cfg.Spec.Backend.MaxRuntime + time.Minute)
}

// awaitResult polls the checkpoint store for a segment's stored result
// until the deadline.
func (c *coordinator) awaitResult(ctx context.Context, t *hptype.Trial, segment, attempt int, deadline time.Time) (hptype.SegmentResult, error) {
	prefix := c.prefix(t.Number)
	tick := time.NewTicker(max(c.cfg.PollInterval, time.Second))
	defer tick.Stop()
	for {
		res, err := c.cfg.Checkpoints.Result(ctx, prefix, segment, attempt)
		switch {
		case err != nil:
			c.cfg.Logger.Warn("could not read a stored segment result", "prefix", prefix, "error", err)
		case res != nil:
			return c.stored(t, *res), nil
		}
		if c.cfg.Now().After(deadline) {
			return hptype.SegmentResult{}, errCoordinatorDied
		}
		select {
		case <-ctx.Done():
			return hptype.SegmentResult{}, context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// requeue makes sure a queued trial's job can be leased: it enqueues the job
// if it is missing, and gives back a lease that a previous coordinator took
// but died before recording on the trial. Only one coordinator holds a study
// at a time, so a lease under its owner name found now is a dead one's.
func (c *coordinator) requeue(ctx context.Context, t *hptype.Trial) error {
	info, err := c.cfg.Queue.Get(ctx, c.jobID(t))
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return c.enqueue(ctx, t)
	case err != nil:
		return fmt.Errorf("look up the job of trial %d: %w", t.Number, err)
	case info.State == queue.StateLeased && info.Owner == leaseOwner:
		if err := c.cfg.Queue.Release(ctx, info.Token); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return fmt.Errorf("give back the job of trial %d: %w", t.Number, err)
		}
	}
	return nil
}

// leaseOwner names the coordinator's leases in the queue.
const leaseOwner = "coordinator"

// jobPayload is what a queued job carries: which segment of which trial.
type jobPayload struct {
	Study   string `json:"study"`
	Trial   int    `json:"trial"`
	Segment int    `json:"segment"`
}

// jobID names the job of a trial's current segment.
func (c *coordinator) jobID(t *hptype.Trial) string {
	return fmt.Sprintf("%s/trial/%d/segment/%d", c.study.ID, t.Number, t.Segment)
}

// prefix is a trial's folder in the checkpoint store.
func (c *coordinator) prefix(n int) string {
	return fmt.Sprintf("%s/trial-%d", c.study.ID, n)
}

func (c *coordinator) enqueue(ctx context.Context, t *hptype.Trial) error {
	payload, err := json.Marshal(jobPayload{Study: c.study.ID, Trial: t.Number, Segment: t.Segment})
	if err != nil {
		return err
	}
	if _, err := c.cfg.Queue.Enqueue(ctx, queue.Job{ID: c.jobID(t), Payload: payload}); err != nil {
		return fmt.Errorf("queue trial %d segment %d: %w", t.Number, t.Segment, err)
	}
	return nil
}
