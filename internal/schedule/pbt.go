package schedule

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// pbt is population-based training (Jaderberg et al., 2017) in its
// asynchronous form. Rungs are at min, min+interval, ... below max. A trial
// that reaches a rung is ranked against the other trials' latest values at
// that rung or an earlier one (a trial that is slow to reach the rung still
// counts, with its last value), as asynchronous PBT compares against the
// population's latest scores. If it ranks in the bottom quantile of the n
// trials ranked (itself included; floor(n*quantile) of them, so nothing
// happens until n >= 1/quantile) it exploits: it takes the newest checkpoint
// of a trial drawn from the top quantile and that trial's parameters, each
// explored parameter multiplied by a perturbation factor drawn for it (a
// categorical one is drawn anew among its values), clipped to its range.
// The draws are hashes of the seed, the trial and the decision's sequence
// number, so a replay draws the same.
type pbt struct {
	ladder   ladder
	goal     spec.Goal
	quantile float64
	factors  []float64
	explore  []*spec.Param
	seed     int64
}

func newPBT(s *spec.Spec) (*pbt, error) {
	c := s.Scheduler
	p := &pbt{
		ladder: arithmetic(c.Min, c.Interval, c.Max), goal: s.Objective.Goal,
		quantile: c.Quantile, factors: c.PerturbationFactors, seed: s.Sampler.Seed,
	}
	for _, name := range c.Explore {
		i := slices.IndexFunc(s.Params, func(q spec.Param) bool { return q.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("scheduler.explore: no parameter %q", name)
		}
		p.explore = append(p.explore, &s.Params[i])
	}
	return p, nil
}

// Target implements Scheduler.
func (p *pbt) Target(t *hptype.Trial) float64 { return p.ladder.next(t) }

// Decide implements Scheduler.
func (p *pbt) Decide(trials []*hptype.Trial, t *hptype.Trial, resource, value float64) Decision {
	d := Decision{Rung: p.ladder.index(resource), Action: hptype.RungContinue}
	if d.Rung < 0 {
		d.Reason = fmt.Sprintf("resource %g is not a rung", resource)
		return d
	}
	ranked := append(latest(trials, t.Number, d.Rung), entry{t.Number, hptype.RungDecision{Value: value}})
	// Best first; NaN last; ties by trial number.
	slices.SortFunc(ranked, func(a, b entry) int {
		an, bn := math.IsNaN(a.Value), math.IsNaN(b.Value)
		switch {
		case an != bn && an:
			return 1
		case an != bn:
			return -1
		case !an && better(p.goal, a.Value, b.Value):
			return -1
		case !an && better(p.goal, b.Value, a.Value):
			return 1
		}
		return a.trial - b.trial
	})
	n := len(ranked)
	q := int(math.Floor(float64(n) * p.quantile))
	rank := slices.IndexFunc(ranked, func(e entry) bool { return e.trial == t.Number })
	if q == 0 {
		d.Reason = fmt.Sprintf("%d trials at rung %d (resource %g); a quantile of %g needs %d", n, d.Rung, resource, p.quantile, int(math.Ceil(1/p.quantile)))
		return d
	}
	if rank < n-q {
		d.Reason = fmt.Sprintf("ranked %d of %d at rung %d (resource %g), above the bottom %d", rank+1, n, d.Rung, resource, q)
		return d
	}
	// Donors are at this rung or past it, so an exploit never sends a trial
	// back to an earlier point of training.
	var donors []int
	for _, e := range ranked[:q] {
		if o := trials[e.trial]; e.trial != t.Number && e.Rung == d.Rung && o.Checkpoint != nil && o.State != hptype.TrialFailed {
			donors = append(donors, e.trial)
		}
	}
	if len(donors) == 0 {
		d.Reason = fmt.Sprintf("ranked %d of %d at rung %d, but no trial of the top %d has reached the rung with a checkpoint to copy", rank+1, n, d.Rung, q)
		return d
	}
	seq := 1
	for _, o := range trials {
		for _, r := range o.Rungs {
			seq = max(seq, r.Seq+1)
		}
	}
	h := draws{seed: p.seed, trial: t.Number, seq: seq}
	donor := donors[h.index("donor", len(donors))]
	d.Action, d.Donor, d.Params = hptype.RungExploit, &donor, p.perturb(trials[donor].Params, h)
	d.Reason = fmt.Sprintf("ranked %d of %d at rung %d (resource %g), in the bottom %d: copies trial %d (ranked %d)",
		rank+1, n, d.Rung, resource, q, donor, slices.IndexFunc(ranked, func(e entry) bool { return e.trial == donor })+1)
	return d
}

// perturb returns a copy of params with each explored parameter perturbed.
func (p *pbt) perturb(params hptype.Params, h draws) hptype.Params {
	out := make(hptype.Params, len(params))
	for k, v := range params {
		out[k] = v
	}
	for _, q := range p.explore {
		v, err := params.Float(q.Name)
		if q.Type == spec.Categorical {
			if _, ok := params[q.Name]; ok {
				out[q.Name] = q.Values[h.index(q.Name, len(q.Values))]
			}
			continue
		}
		if err != nil {
			continue // inactive in the donor
		}
		v = min(max(v*p.factors[h.index(q.Name, len(p.factors))], q.Min), q.Max)
		if q.Type == spec.Int {
			step := float64(max(q.Step, 1))
			v = min(q.Min+math.Round((v-q.Min)/step)*step, q.Max)
			out[q.Name] = int64(v)
			continue
		}
		out[q.Name] = v
	}
	return out
}

// draws are deterministic choices keyed by the seed, a trial, a decision's
// sequence number and a label.
type draws struct {
	seed  int64
	trial int
	seq   int
}

func (h draws) index(label string, n int) int {
	f := fnv.New64a()
	fmt.Fprintf(f, "%d/%d/%d/%s", h.seed, h.trial, h.seq, label)
	return int(f.Sum64() % uint64(n))
}

// latest returns, for every trial other than self, its latest decision at
// rung or an earlier one (its Rung says which), in trial order.
func latest(trials []*hptype.Trial, self, rung int) []entry {
	var out []entry
	for _, o := range trials {
		if o.Number == self {
			continue
		}
		for i := len(o.Rungs) - 1; i >= 0; i-- {
			if r := o.Rungs[i]; r.Rung <= rung {
				out = append(out, entry{o.Number, r})
				break
			}
		}
	}
	return out
}
