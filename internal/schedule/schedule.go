// Package schedule decides, at resource milestones called rungs, whether a
// trial trains on, stops, or (population-based training) takes over a
// better trial's checkpoint: the ASHA, Hyperband, median-stopping and PBT
// schedulers of the space file's scheduler section.
//
// Schedulers are pure: a decision is a function of the space file, the
// trials' parameters and the decisions already recorded on the trials
// (hptype.Trial.Rungs), never of memory or of the clock. The coordinator
// records each decision on its trial in the same store update as the
// segment result that led to it, so a coordinator killed mid-study and
// started again replays the same history and decides the same way.
package schedule

import (
	"fmt"
	"math"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Scheduler decides the fate of trials at rungs.
type Scheduler interface {
	// Target is the resource the trial's next segment trains up to: the
	// trial's next rung above t.Resource (or at it, when the trial stopped
	// exactly there without being judged), or the scheduler's Max.
	Target(t *hptype.Trial) float64
	// Decide decides about trial t, which has just reached resource (one
	// of its rungs, below Max) where the objective had value. trials are
	// all the study's trials indexed by number, t among them, with the decisions
	// recorded so far.
	Decide(trials []*hptype.Trial, t *hptype.Trial, resource, value float64) Decision
}

// Decision is what a Scheduler decided, before it is recorded.
type Decision struct {
	Action  hptype.RungAction
	Reason  string
	Bracket int
	Rung    int
	// Donor and Params are set for RungExploit: the trial whose newest
	// checkpoint the trial continues from, and its new parameters.
	Donor  *int
	Params hptype.Params
}

// Record appends d, taken when t reached resource with value, to t.Rungs
// with the study's next sequence number.
func Record(trials []*hptype.Trial, t *hptype.Trial, resource, value float64, d Decision, now time.Time) hptype.RungDecision {
	seq := 0
	for _, o := range trials {
		for _, r := range o.Rungs {
			seq = max(seq, r.Seq)
		}
	}
	r := hptype.RungDecision{
		Seq: seq + 1, Bracket: d.Bracket, Rung: d.Rung, Resource: resource, Value: value,
		Action: d.Action, Reason: d.Reason, Donor: d.Donor, DecidedAt: now.UTC(),
	}
	if d.Action == hptype.RungExploit && d.Donor != nil {
		r.DonorParams = trials[*d.Donor].Params
		r.ParamsBefore = t.Params
	}
	t.Rungs = append(t.Rungs, r)
	return r
}

// New returns the scheduler s.Scheduler names, or nil when the space file
// has none. The section must have been validated by spec.Decode.
func New(s *spec.Spec) (Scheduler, error) {
	c := s.Scheduler
	goal := s.Objective.Goal
	switch c.Type {
	case spec.NoScheduler:
		return nil, nil
	case spec.ASHA:
		return newHalving(c, goal, 1), nil
	case spec.Hyperband:
		return newHalving(c, goal, c.Brackets), nil
	case spec.Median:
		return &median{ladder: arithmetic(c.Min, c.Interval, c.Max), goal: goal, minTrials: c.MinTrials}, nil
	case spec.PBT:
		return newPBT(s)
	}
	return nil, fmt.Errorf("unknown scheduler %q: want asha, hyperband, median or pbt", c.Type)
}

// better reports whether a beats b for the goal. NaN beats nothing.
func better(goal spec.Goal, a, b float64) bool {
	if goal == spec.Maximize {
		return a > b
	}
	return a < b
}

// ladder is a sorted list of rung resources below a maximum.
type ladder struct {
	rungs []float64
	max   float64
}

// geometric is min, min*eta, min*eta^2, ... below max.
func geometric(min, eta, max float64) ladder {
	l := ladder{max: max}
	for r := min; r < max*(1-1e-9); r *= eta {
		l.rungs = append(l.rungs, r)
	}
	return l
}

// arithmetic is min, min+step, min+2*step, ... below max.
func arithmetic(min, step, max float64) ladder {
	l := ladder{max: max}
	for i := 0; ; i++ {
		r := min + float64(i)*step
		if r >= max*(1-1e-9) {
			return l
		}
		l.rungs = append(l.rungs, r)
	}
}

// next is the trial's next rung, or max: the first rung above its
// resource, or the rung it stands on when it has no decision there yet (its
// last segment stopped exactly at the rung, suspended or interrupted, and
// was not judged). While the trial stands on the copy an exploit gave it
// (the donor's resource), it has nothing of its own to be judged by there,
// so it goes on to the rung above.
func (l ladder) next(t *hptype.Trial) float64 {
	exploited := false
	if n := len(t.Rungs); n > 0 && t.Rungs[n-1].Action == hptype.RungExploit && t.Checkpoint != nil {
		exploited = t.Checkpoint.ID == t.Rungs[n-1].Checkpoint
	}
	for i, r := range l.rungs {
		switch {
		case r > t.Resource*(1+1e-9):
			return r
		case !exploited && r >= t.Resource*(1-1e-9) && !decided(t, i):
			return r
		}
	}
	return l.max
}

// decided reports whether the trial has a decision at rung i.
func decided(t *hptype.Trial, rung int) bool {
	for _, r := range t.Rungs {
		if r.Rung == rung {
			return true
		}
	}
	return false
}

// index is the rung at resource, or -1.
func (l ladder) index(resource float64) int {
	for i, r := range l.rungs {
		if math.Abs(r-resource) <= 1e-9*math.Max(1, r) {
			return i
		}
	}
	return -1
}

// entry is a trial's decision at a rung.
type entry struct {
	trial int
	hptype.RungDecision
}

// recorded returns the decisions other trials than self recorded at rung
// (of bracket), each trial's latest there, in trial order.
func recorded(trials []*hptype.Trial, self int, bracket, rung int) []entry {
	var out []entry
	for _, o := range trials {
		if o.Number == self {
			continue
		}
		for i := len(o.Rungs) - 1; i >= 0; i-- {
			if r := o.Rungs[i]; r.Bracket == bracket && r.Rung == rung {
				out = append(out, entry{o.Number, r})
				break
			}
		}
	}
	return out
}
