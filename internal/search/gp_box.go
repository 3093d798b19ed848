package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// modelStartup is the number of trials the gp and cmaes samplers draw at
// random, exactly as the random sampler with the same seed would, before
// they model the objective.
const modelStartup = 10

// box is the unit hypercube of a space of float and int parameters, one
// coordinate per non-constant parameter in declaration order: the domain
// of the gp and cmaes samplers. A float maps linearly (logarithmically with
// log) from [min, max]; an int maps to the centre of its slice of [0, 1),
// the inverse of the random sampler's mapping.
type box struct {
	space *space
	// sign is 1 when the objective is minimised and -1 when it is
	// maximised: sign x value is always minimised.
	sign float64
	// random proposes the startup trials.
	random *unitSampler
}

// newBox checks that the space suits a model of the unit hypercube: it has
// no categorical parameter.
func newBox(sampler spec.SamplerType, sp *space, s *spec.Spec) (*box, error) {
	for i := range sp.params {
		if p := &sp.params[i]; p.Type == spec.Categorical {
			return nil, fmt.Errorf("%s sampler: parameter %q is categorical and the %s sampler supports only float and int parameters; declare it as an int, or use the random or sobol sampler", sampler, p.Name, sampler)
		}
	}
	sign := 1.0
	if s.Objective.Goal == spec.Maximize {
		sign = -1
	}
	return &box{space: sp, sign: sign, random: &unitSampler{space: sp, point: randomPoint(uint64(s.Sampler.Seed))}}, nil
}

// decode returns the parameters at point u of the box.
func (b *box) decode(ctx context.Context, n int, u []float64) (hptype.Params, error) {
	at := unitSampler{space: b.space, point: func(_, dim int) (float64, error) { return u[dim], nil }}
	return at.Sample(ctx, n, nil)
}

// encode returns the point of the box of parameters p. An absent
// (inactive) parameter takes the centre; it fails if a parameter is not a
// number.
func (b *box) encode(p hptype.Params) ([]float64, bool) {
	u := make([]float64, b.space.dims)
	for i := range b.space.params {
		q := &b.space.params[i]
		if q.dim < 0 {
			continue
		}
		u[q.dim] = 0.5
		if _, ok := p[q.Name]; !ok {
			continue
		}
		v, err := p.Float(q.Name)
		if err != nil || math.IsNaN(v) {
			return nil, false
		}
		u[q.dim] = clamp(q.toUnit(v), 0, 1)
	}
	return u, true
}

// toUnit is the inverse of fromUnit for a float or int parameter.
func (p *param) toUnit(v float64) float64 {
	if p.Type == spec.Int {
		if p.Log {
			lmin, lmax := math.Log(p.Min-0.5), math.Log(p.Max+0.5)
			return (math.Log(v) - lmin) / (lmax - lmin)
		}
		i := math.Round((v - float64(p.lo)) / float64(p.step))
		return (i + 0.5) / float64(p.count)
	}
	if p.Max == p.Min {
		return 0.5
	}
	if p.Log {
		lmin, lmax := math.Log(p.Min), math.Log(p.Max)
		return (math.Log(v) - lmin) / (lmax - lmin)
	}
	return (v - p.Min) / (p.Max - p.Min)
}

// boxState is what a model knows of a trial.
type boxState int

const (
	// boxDone is a completed trial with a finite value.
	boxDone boxState = iota
	// boxFailed is a finished trial without a value: failed, pruned, or
	// completed with a value that is not finite.
	boxFailed
	// boxPending is a trial that is queued, running or interrupted.
	boxPending
)

// boxTrial is a trial as a model sees it.
type boxTrial struct {
	number int
	x      []float64
	// y is sign x value, to be minimised; set when state is boxDone.
	y     float64
	state boxState
}

// trials returns the trials of history numbered below n, by number: the
// proposal of trial n depends on nothing later. A trial whose parameters
// do not fit the space is left out.
func (b *box) trials(history []hptype.Trial, n int) []boxTrial {
	out := make([]boxTrial, 0, len(history))
	for i := range history {
		t := &history[i]
		if t.Number < 0 || t.Number >= n {
			continue
		}
		x, ok := b.encode(t.Params)
		if !ok {
			continue
		}
		p := boxTrial{number: t.Number, x: x, state: boxPending}
		switch {
		case t.State == hptype.TrialCompleted && t.Value != nil && !math.IsNaN(*t.Value) && !math.IsInf(*t.Value, 0):
			p.state, p.y = boxDone, b.sign**t.Value
		case t.State.Finished():
			p.state = boxFailed
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b boxTrial) int { return cmp.Compare(a.number, b.number) })
	return slices.CompactFunc(out, func(a, b boxTrial) bool { return a.number == b.number })
}

// checkModelSample validates a Sample call.
func checkModelSample(ctx context.Context, n int) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("trial number %d is negative", n)
	}
	return nil
}

// newGPSampler returns the gp sampler for the space of s.
func newGPSampler(sp *space, s *spec.Spec) (Sampler, error) {
	b, err := newBox(spec.GP, sp, s)
	if err != nil {
		return nil, err
	}
	return &gpSampler{box: b, seed: uint64(s.Sampler.Seed)}, nil
}

// newCMASampler returns the cmaes sampler for the space of s.
func newCMASampler(sp *space, s *spec.Spec) (Sampler, error) {
	b, err := newBox(spec.CMAES, sp, s)
	if err != nil {
		return nil, err
	}
	return &cmaSampler{box: b, seed: uint64(s.Sampler.Seed)}, nil
}
