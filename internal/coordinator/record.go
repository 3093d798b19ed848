package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// errCoordinatorDied marks an attempt that was running when the previous
// coordinator died and left no result.
var errCoordinatorDied = errors.New("the coordinator stopped while this attempt ran and no result was stored; its duration is unknown")

// outcome is what a dispatched segment came back with.
type outcome struct {
	number int
	token  string
	// failures is how many earlier attempts of the job failed, plus one.
	failures int
	res      hptype.SegmentResult
	err      error
	wall     time.Duration
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
	if o.err == nil && o.res.Status == hptype.SegmentFailed && o.res.Retryable {
		// Not the workload's failure: retry it like a crashed trainer.
		o.wall = time.Duration(o.res.Usage.BilledMS) * time.Millisecond
		o.err = fmt.Errorf("the segment failed outside the workload: %s", o.res.Error)
	}
	a := &t.Attempts[len(t.Attempts)-1]
	if !errors.Is(o.err, errCoordinatorDied) {
		a.FinishedAt = c.cfg.Now().UTC()
	}
	var kind EventKind
	var settle func() error
	if o.err == nil {
		kind, settle = c.recordResult(ctx, t, a, o, stopReason)
	} else {
		kind, settle = c.recordLoss(ctx, t, a, o, stopReason)
	}
	if err := c.cfg.Store.UpdateTrial(ctx, t); err != nil {
		return fmt.Errorf("record trial %d: %w", t.Number, err)
	}
	if onPool(t) {
		c.readWorkers(ctx)
	}
	if err := settle(); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return fmt.Errorf("settle the job of trial %d: %w", t.Number, err)
	}
	c.emit(kind, t, a.Error)
	return c.saveElapsed(ctx)
}

// recordResult records a segment that returned a result.
func (c *coordinator) recordResult(ctx context.Context, t *hptype.Trial, a *hptype.Attempt, o outcome, stopReason string) (EventKind, func() error) {
	sp := c.cfg.Spec
	res := o.res
	billed := time.Duration(res.Usage.BilledMS) * time.Millisecond
	a.WallSeconds, a.CostUSD = billed.Seconds(), c.segmentCost(t, billed)
	a.BilledEstimated, a.Throttles = res.Usage.Estimated, res.Usage.Throttles
	a.ResourceTo = res.ResourceReached
	t.Metrics = append(t.Metrics, res.Metrics...)
	if res.Checkpoint != nil {
		t.Checkpoint, a.Checkpoint = res.Checkpoint, res.Checkpoint
	}
	for _, w := range res.Warnings {
		c.cfg.Logger.Warn("trainer warning", "trial", t.Number, "segment", a.Segment, "warning", w)
	}
	ack := func() error { return c.cfg.Queue.Ack(ctx, o.token) }
	// target is the resource the segment was asked to reach: a rung, when
	// below the scheduler's max.
	target := a.ResourceTarget
	finish := func(state hptype.TrialState, status, errText string) {
		a.Status, a.Error = status, errText
		t.State, t.Error, t.LeaseToken, t.FinishedAt = state, errText, "", a.FinishedAt
		t.Resource = res.ResourceReached
	}
	switch {
	case res.Status == hptype.SegmentSuspended && res.Checkpoint == nil:
		finish(hptype.TrialFailed, attemptFailed, "the segment stopped before the end without writing a checkpoint to resume from: "+res.Error)
		return TrialFailed, ack
	case res.Status == hptype.SegmentSuspended && stopReason == "" && res.Checkpoint.Resource <= a.ResourceFrom:
		// Another segment would stop at the same place.
		finish(hptype.TrialFailed, attemptFailed, fmt.Sprintf("segment %d made no progress before its deadline (still at %g): a step plus checkpoint.grace (%s) does not fit in backend.max_runtime (%s); raise max_runtime or lower the grace",
			a.Segment, a.ResourceFrom, sp.Checkpoint.Grace, sp.Backend.MaxRuntime))
		return TrialFailed, ack
	case res.Status == hptype.SegmentSuspended:
		a.Status, a.Error = attemptSuspended, ""
		a.ResourceTo = res.Checkpoint.Resource
		t.Resource, t.LeaseToken = res.Checkpoint.Resource, ""
		t.Segment++
		if stopReason != "" {
			a.Error = stopReason
			t.State = hptype.TrialInterrupted
			return TrialInterrupted, ack
		}
		t.State = hptype.TrialQueued
		return TrialSuspended, c.next(ctx, t, ack)
	case res.Status != hptype.SegmentCompleted:
		finish(hptype.TrialFailed, attemptFailed, res.Error)
		return TrialFailed, ack
	}
	v, ok := finalValue(res.Metrics, sp.Objective.Metric)
	if !ok {
		v, ok = finalValue(t.Metrics, sp.Objective.Metric)
	}
	if !ok {
		finish(hptype.TrialFailed, attemptCompleted, fmt.Sprintf("the trainer reported no %q metric (objective.metric); it reported: %s", sp.Objective.Metric, metricNames(t.Metrics)))
		return TrialFailed, ack
	}
	if target > 0 && target < sp.Scheduler.Max && res.ResourceReached >= target*(1-1e-9) {
		return c.decide(ctx, t, a, res, target, v, ack)
	}
	finish(hptype.TrialCompleted, attemptCompleted, "")
	t.Value = &v
	return TrialCompleted, ack
}

// recordLoss records a segment that came back without a result: its
// trainer crashed or was killed, the study is stopping, or the coordinator
// died while it ran. The progress of the last checkpoint the attempt wrote
// is kept; the work done after it is recorded as wasted.
func (c *coordinator) recordLoss(ctx context.Context, t *hptype.Trial, a *hptype.Attempt, o outcome, stopReason string) (EventKind, func() error) {
	ck, metrics, err := c.cfg.Checkpoints.LastOf(ctx, c.prefix(t.Number), a.Segment, a.Number)
	if err != nil {
		c.cfg.Logger.Warn("could not look for the checkpoints of a failed attempt; its work counts as lost", "trial", t.Number, "attempt", a.Number, "error", err)
	}
	lostFrom := a.StartedAt
	a.ResourceTo = a.ResourceFrom
	if ck != nil {
		t.Checkpoint, a.Checkpoint = ck, ck
		t.Resource, a.ResourceTo = ck.Resource, ck.Resource
		t.Metrics = append(t.Metrics, metrics...)
		if ck.CreatedAt.After(lostFrom) {
			lostFrom = ck.CreatedAt
		}
	}
	lost := errors.Is(o.err, errCoordinatorDied)
	wall := o.wall
	if lost {
		// Nothing says how long it ran: only that it ran up to its last
		// checkpoint. That much is priced; nothing counts as wasted.
		wall = max(0, lostFrom.Sub(a.StartedAt))
	}
	a.WallSeconds, a.CostUSD = wall.Seconds(), c.segmentCost(t, wall)
	a.BilledEstimated = true
	if !lost {
		wasted := min(max(0, a.FinishedAt.Sub(lostFrom)), wall)
		a.WastedSeconds = wasted.Seconds()
		a.WastedCostUSD = wasted.Seconds() * c.ratePerSecond(t)
	}
	a.Error = o.err.Error()
	token := o.token
	t.LeaseToken = ""
	release := func() error { return c.cfg.Queue.Release(ctx, token) }
	progressed := ck != nil && ck.Resource > a.ResourceFrom
	switch {
	case stopReason == "" && progressed:
		// The attempt saved progress before it died: what follows is a new
		// segment from that checkpoint, with a fresh retry budget, so
		// failures that keep making progress never fail the trial.
		a.Status = attemptError
		if lost {
			a.Status = attemptLost
		}
		t.State = hptype.TrialQueued
		t.Segment++
		return TrialRetrying, c.next(ctx, t, func() error { return c.cfg.Queue.Ack(ctx, token) })
	case lost:
		a.Status = attemptLost
		t.State = hptype.TrialQueued
		return TrialRetrying, func() error {
			if err := release(); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
				return err
			}
			return c.requeue(ctx, t)
		}
	case stopReason != "":
		a.Status, a.Error = attemptInterrupted, stopReason
		t.State = hptype.TrialInterrupted
		return TrialInterrupted, release
	case o.failures >= c.cfg.MaxAttempts:
		a.Status = attemptError
		t.State, t.FinishedAt = hptype.TrialFailed, a.FinishedAt
		t.Error = fmt.Sprintf("the trainer failed %d times; last: %v", o.failures, o.err)
		return TrialFailed, func() error { return c.cfg.Queue.Ack(ctx, token) }
	}
	a.Status = attemptError
	t.State = hptype.TrialQueued
	return TrialRetrying, func() error { return c.cfg.Queue.Nack(ctx, token, o.err.Error()) }
}

// decide records the scheduler's decision about a trial whose segment
// reached its rung (resource, the segment's target; the trainer may have
// gone a little past it) with the objective at value, in the same store
// update as the result; the trial then stops (pruned) or goes on with its
// next segment, from its own checkpoint or, after an exploit, from a copy
// of the donor's.
func (c *coordinator) decide(ctx context.Context, t *hptype.Trial, a *hptype.Attempt, res hptype.SegmentResult, resource, value float64, ack func() error) (EventKind, func() error) {
	d := c.cfg.Scheduler.Decide(c.trials, t, resource, value)
	a.Status, a.ResourceTo = attemptCompleted, res.ResourceReached
	t.Resource, t.LeaseToken = res.ResourceReached, ""
	if d.Action != hptype.RungExploit && c.cfg.Spec.Scheduler.Type == spec.PBT {
		// A copy made for an exploit that an earlier coordinator decided
		// but died before recording would be the trial's newest checkpoint.
		if err := c.cfg.Checkpoints.DropHandover(ctx, c.prefix(t.Number), a.Segment, a.Number); err != nil {
			c.cfg.Logger.Warn("could not look for a stale exploit copy", "trial", t.Number, "error", err)
		}
	}
	switch d.Action {
	case hptype.RungStop:
		schedule.Record(c.trials, t, resource, value, d, c.cfg.Now())
		t.State, t.FinishedAt = hptype.TrialPruned, a.FinishedAt
		return TrialPruned, ack
	case hptype.RungExploit:
		// Below max: a donor's final checkpoint would leave the trial
		// nothing to train, and so no value of its own.
		ref, err := c.cfg.Checkpoints.Handover(ctx, c.prefix(*d.Donor), c.prefix(t.Number), t.Number, a.Segment, a.Number, c.cfg.Spec.Scheduler.Max)
		if err != nil {
			c.cfg.Logger.Warn("could not copy the donor's checkpoint; the trial goes on with its own", "trial", t.Number, "donor", *d.Donor, "error", err)
			if err := c.cfg.Checkpoints.DropHandover(ctx, c.prefix(t.Number), a.Segment, a.Number); err != nil {
				c.cfg.Logger.Warn("could not remove a failed exploit copy", "trial", t.Number, "error", err)
			}
			d.Action, d.Donor, d.Params = hptype.RungContinue, nil, nil
			d.Reason += fmt.Sprintf("; the copy failed (%v), so the trial goes on with its own state", err)
			break
		}
		schedule.Record(c.trials, t, resource, value, d, c.cfg.Now())
		t.Rungs[len(t.Rungs)-1].Checkpoint = ref.ID
		t.Params, t.Checkpoint, t.Resource = d.Params, ref, ref.Resource
		t.Segment++
		t.State = hptype.TrialQueued
		return TrialRung, c.next(ctx, t, ack)
	}
	if res.Checkpoint == nil {
		d.Action = hptype.RungStop
		d.Reason = fmt.Sprintf("the trainer wrote no checkpoint at resource %g, so the trial cannot go on from its rung; make the trainer checkpoint when it reaches its target", resource)
		schedule.Record(c.trials, t, resource, value, d, c.cfg.Now())
		a.Status, a.Error = attemptFailed, d.Reason
		t.State, t.Error, t.FinishedAt = hptype.TrialFailed, d.Reason, a.FinishedAt
		return TrialFailed, ack
	}
	schedule.Record(c.trials, t, resource, value, d, c.cfg.Now())
	t.Segment++
	t.State = hptype.TrialQueued
	return TrialRung, c.next(ctx, t, ack)
}

// next enqueues a trial's next segment, then acknowledges the job of the
// one that ended: a crash in between leaves a stale job, never a missing
// one.
func (c *coordinator) next(ctx context.Context, t *hptype.Trial, ack func() error) func() error {
	return func() error {
		if err := c.enqueue(ctx, t); err != nil {
			return err
		}
		return ack()
	}
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

// stopAll stops every running segment and records how it ended.
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
