package schedule

import (
	"fmt"
	"math"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// halving is asynchronous successive halving (ASHA; Li et al., 2020) in its
// stopping form, over one bracket or several (Hyperband; Li et al., 2018).
//
// Bracket s has rungs at min*eta^s, min*eta^(s+1), ... below max. A trial
// that reaches a rung goes on to the next if its value ranks among the best
// max(1, floor(n/eta)) of the n trials of its bracket recorded at that rung
// so far, itself included; otherwise it stops there. The first trials at a
// rung go on, as ASHA promotes while the rung is too small to judge. Trial
// n belongs to bracket n mod brackets.
type halving struct {
	brackets []ladder
	eta      float64
	goal     spec.Goal
}

func newHalving(c spec.Scheduler, goal spec.Goal, brackets int) *halving {
	h := &halving{eta: c.ReductionFactor, goal: goal}
	for s := range max(brackets, 1) {
		h.brackets = append(h.brackets, geometric(c.Min*math.Pow(c.ReductionFactor, float64(s)), c.ReductionFactor, c.Max))
	}
	return h
}

func (h *halving) bracket(t *hptype.Trial) int { return t.Number % len(h.brackets) }

// Target implements Scheduler.
func (h *halving) Target(t *hptype.Trial) float64 {
	return h.brackets[h.bracket(t)].next(t)
}

// Decide implements Scheduler.
func (h *halving) Decide(trials []*hptype.Trial, t *hptype.Trial, resource, value float64) Decision {
	b := h.bracket(t)
	d := Decision{Bracket: b, Rung: h.brackets[b].index(resource)}
	switch {
	case d.Rung < 0:
		d.Action = hptype.RungContinue
		d.Reason = fmt.Sprintf("resource %g is not a rung of bracket %d", resource, b)
		return d
	case math.IsNaN(value):
		d.Action = hptype.RungStop
		d.Reason = "the objective is NaN"
		return d
	}
	others := recorded(trials, t.Number, b, d.Rung)
	n := len(others) + 1
	keep := max(1, int(math.Floor(float64(n)/h.eta)))
	rank := 1
	for _, o := range others {
		if better(h.goal, o.Value, value) {
			rank++
		}
	}
	d.Reason = fmt.Sprintf("ranked %d of %d at rung %d (resource %g); the best %d go on", rank, n, d.Rung, resource, keep)
	d.Action = hptype.RungContinue
	if rank > keep {
		d.Action = hptype.RungStop
	}
	return d
}
