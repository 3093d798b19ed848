package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// SimResult is how a simulated study on the learning-curve problem went.
type SimResult struct {
	// Best is the final value of the best completed trial; +Inf when no
	// trial completed.
	Best float64
	// Resource is the resource trained over all segments of all trials;
	// a trial that took over another's checkpoint (an exploit) did not
	// train the part it copied.
	Resource float64
	// Makespan is the simulated wall time until the last trial ended, in
	// units of resource (a worker trains one unit per unit of time).
	Makespan  float64
	Completed int
	Pruned    int
	// Trials are the study's trials at the end, with their metrics and
	// the scheduler's recorded decisions.
	Trials []*hptype.Trial
}

// simEpoch is the simulated clock's origin, for the decisions' times.
var simEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Simulate runs the study sp on the learning curve c with sched deciding
// at rungs (nil: every trial trains to c.Max in one segment), as the
// coordinator would with sp.MaxConcurrency workers, over simulated time:
//
//   - Trials are created one at a time while fewer than MaxConcurrency
//     run, up to MaxTrials, their parameters proposed by sp's sampler
//     with the trials before them as history.
//   - A trial trains from its resource up to sched.Target (at most Max),
//     which takes as much time as the resource it trains; segments end in
//     order of time, ties by trial number.
//   - At a target below Max, the loss there is reported to sched.Decide
//     and the decision is recorded on the trial (schedule.Record). stop
//     prunes the trial; continue trains it on at once; exploit replaces its
//     parameters with the decision's and its checkpoint and resource with
//     the donor's newest checkpoint, and it trains on from there; from then
//     on its loss is that of its new parameters' curve.
//   - Every segment ends with a checkpoint at the resource it reached.
//   - At Max the trial completes with its final value.
//
// It is deterministic: the same arguments give the same result.
func Simulate(ctx context.Context, c LearningCurve, sp *spec.Spec, sched schedule.Scheduler) (*SimResult, error) {
	c = c.withDefaults()
	if sched == nil {
		sched = fullTraining{max: c.Max}
	}
	sampler, err := search.New(sp)
	if err != nil {
		return nil, err
	}
	s := &simulation{curve: c, sched: sched, sampler: sampler, res: &SimResult{Best: math.Inf(1)}}
	for {
		for len(s.running) < max(1, sp.MaxConcurrency) && len(s.res.Trials) < sp.MaxTrials {
			if err := s.create(ctx); err != nil {
				return nil, err
			}
		}
		if len(s.running) == 0 {
			s.res.Makespan = s.clock
			return s.res, nil
		}
		if err := s.step(ctx); err != nil {
			return nil, err
		}
	}
}

// fullTraining is the scheduler of a study without one: every trial
// trains to max in one segment.
type fullTraining struct{ max float64 }

func (f fullTraining) Target(*hptype.Trial) float64 { return f.max }

func (f fullTraining) Decide([]*hptype.Trial, *hptype.Trial, float64, float64) schedule.Decision {
	return schedule.Decision{Action: hptype.RungContinue}
}

// segment is a trial training from resource from to resource to, done at
// simulated time end.
type segment struct {
	t        *hptype.Trial
	from, to float64
	end      float64
}

type simulation struct {
	curve   LearningCurve
	sched   schedule.Scheduler
	sampler search.Sampler
	res     *SimResult
	running []segment
	clock   float64
}

func (s *simulation) now() time.Time {
	return simEpoch.Add(time.Duration(s.clock * float64(time.Second)))
}

// create samples the next trial and starts it.
func (s *simulation) create(ctx context.Context) error {
	n := len(s.res.Trials)
	history := make([]hptype.Trial, n)
	for i, t := range s.res.Trials {
		history[i] = *t
	}
	params, err := s.sampler.Sample(ctx, n, history)
	if err != nil {
		return fmt.Errorf("sample trial %d: %w", n, err)
	}
	t := &hptype.Trial{Study: "bench", Number: n, Params: params, State: hptype.TrialRunning, CreatedAt: s.now()}
	s.res.Trials = append(s.res.Trials, t)
	return s.start(t)
}

// start starts the trial's next segment, up to its target.
func (s *simulation) start(t *hptype.Trial) error {
	if t.Resource >= s.curve.Max {
		return s.complete(t)
	}
	to := min(s.sched.Target(t), s.curve.Max)
	if !(to > t.Resource) {
		return fmt.Errorf("trial %d: the scheduler's target %v is not above the trial's resource %v", t.Number, to, t.Resource)
	}
	t.State = hptype.TrialRunning
	s.running = append(s.running, segment{t: t, from: t.Resource, to: to, end: s.clock + to - t.Resource})
	return nil
}

// step ends the first segment to end and acts on it.
func (s *simulation) step(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	first := 0
	for i, g := range s.running {
		if f := s.running[first]; g.end < f.end || g.end == f.end && g.t.Number < f.t.Number {
			first = i
		}
	}
	g := s.running[first]
	s.running = append(s.running[:first], s.running[first+1:]...)
	s.clock = g.end
	t := g.t
	s.res.Resource += g.to - g.from
	if err := s.report(t, g.from, g.to); err != nil {
		return err
	}
	t.Resource = g.to
	t.Checkpoint = &hptype.CheckpointRef{
		ID:        fmt.Sprintf("%06d.001.0001", t.Segment),
		Key:       fmt.Sprintf("trial-%d/%06d", t.Number, t.Segment),
		Resource:  g.to,
		CreatedAt: s.now(),
	}
	t.Segment++
	if g.to >= s.curve.Max {
		return s.complete(t)
	}
	value := t.Metrics[len(t.Metrics)-1].Value
	d := s.sched.Decide(s.res.Trials, t, g.to, value)
	schedule.Record(s.res.Trials, t, g.to, value, d, s.now())
	switch d.Action {
	case hptype.RungStop:
		t.State, t.FinishedAt = hptype.TrialPruned, s.now()
		s.res.Pruned++
		return nil
	case hptype.RungContinue:
		return s.start(t)
	case hptype.RungExploit:
		if d.Donor == nil || *d.Donor < 0 || *d.Donor >= len(s.res.Trials) || d.Params == nil {
			return fmt.Errorf("trial %d: an exploit decision without a donor trial or parameters: %+v", t.Number, d)
		}
		donor := s.res.Trials[*d.Donor]
		if donor.Checkpoint == nil {
			return fmt.Errorf("trial %d: exploits trial %d, which has no checkpoint", t.Number, donor.Number)
		}
		// As the coordinator does: the donor's newest checkpoint below Max
		// (a finished donor's is at its last rung), copied as the trial's.
		from := donor.Checkpoint.Resource
		if from >= s.curve.Max && len(donor.Rungs) > 0 {
			from = donor.Rungs[len(donor.Rungs)-1].Resource
		}
		id := fmt.Sprintf("%06d.001.9999", t.Segment-1)
		t.Rungs[len(t.Rungs)-1].Checkpoint = id
		t.Params, t.Resource = d.Params, from
		t.Checkpoint = &hptype.CheckpointRef{ID: id, Key: fmt.Sprintf("trial-%d/%s", t.Number, id), Resource: from, CreatedAt: s.now()}
		return s.start(t)
	}
	return fmt.Errorf("trial %d: unknown scheduler action %q", t.Number, d.Action)
}

// report appends the losses the trial reports while training from
// resource from to to: one per whole epoch, and one at to.
func (s *simulation) report(t *hptype.Trial, from, to float64) error {
	for r := math.Floor(from) + 1; r <= to; r++ {
		if err := s.metric(t, r); err != nil {
			return err
		}
	}
	if to != math.Floor(to) {
		return s.metric(t, to)
	}
	return nil
}

func (s *simulation) metric(t *hptype.Trial, r float64) error {
	v, err := s.curve.Value(t.Params, r)
	if err != nil {
		return fmt.Errorf("trial %d: %w", t.Number, err)
	}
	t.Metrics = append(t.Metrics, hptype.Metric{Step: r, Name: CurveMetric, Value: v})
	return nil
}

// complete ends the trial with its final value.
func (s *simulation) complete(t *hptype.Trial) error {
	v, err := s.curve.Value(t.Params, s.curve.Max)
	if err != nil {
		return fmt.Errorf("trial %d: %w", t.Number, err)
	}
	t.Resource = s.curve.Max
	t.State, t.Value, t.FinishedAt = hptype.TrialCompleted, &v, s.now()
	s.res.Completed++
	s.res.Best = min(s.res.Best, v)
	return nil
}
