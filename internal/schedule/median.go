package schedule

import (
	"fmt"
	"math"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// median is the median stopping rule (Golovin et al., 2017): at each rung,
// a trial stops if its best value so far is worse than the median of the
// best values so far of the other trials recorded at that rung. No trial
// stops before the first rung (the grace period, min) or while fewer than
// minTrials others have reached the rung.
type median struct {
	ladder    ladder
	goal      spec.Goal
	minTrials int
}

// Target implements Scheduler.
func (m *median) Target(t *hptype.Trial) float64 { return m.ladder.next(t) }

// Decide implements Scheduler.
func (m *median) Decide(trials []*hptype.Trial, t *hptype.Trial, resource, value float64) Decision {
	d := Decision{Rung: m.ladder.index(resource), Action: hptype.RungContinue}
	switch {
	case d.Rung < 0:
		d.Reason = fmt.Sprintf("resource %g is not a rung", resource)
		return d
	case math.IsNaN(value):
		d.Action, d.Reason = hptype.RungStop, "the objective is NaN"
		return d
	}
	mine := m.bestUpTo(t, d.Rung, value)
	var others []float64
	for _, e := range recorded(trials, t.Number, 0, d.Rung) {
		if v := m.bestUpTo(trials[e.trial], d.Rung, math.NaN()); !math.IsNaN(v) {
			others = append(others, v)
		}
	}
	if len(others) < m.minTrials {
		d.Reason = fmt.Sprintf("%d other trials reached rung %d (resource %g); the rule needs %d", len(others), d.Rung, resource, m.minTrials)
		return d
	}
	slices.Sort(others)
	med := others[len(others)/2]
	if len(others)%2 == 0 {
		med = (others[len(others)/2-1] + med) / 2
	}
	d.Reason = fmt.Sprintf("best so far %g against the median %g of %d trials at rung %d (resource %g)", mine, med, len(others), d.Rung, resource)
	if better(m.goal, med, mine) {
		d.Action = hptype.RungStop
	}
	return d
}

// bestUpTo is the best of the trial's values recorded at rungs up to rung,
// and of value (NaN for none).
func (m *median) bestUpTo(t *hptype.Trial, rung int, value float64) float64 {
	best := value
	for _, r := range t.Rungs {
		if r.Rung <= rung && !math.IsNaN(r.Value) && (math.IsNaN(best) || better(m.goal, r.Value, best)) {
			best = r.Value
		}
	}
	return best
}
