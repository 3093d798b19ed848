package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// The tree-structured Parzen estimator (TPE) of Bergstra, Bardenet, Bengio
// and Kégl, "Algorithms for Hyper-Parameter Optimization" (NeurIPS 2011),
// with the refinements of Optuna's TPESampler described by Watanabe, "Tree-
// Structured Parzen Estimator: Understanding Its Algorithm Components and
// Their Roles for Better Empirical Performance" (2023):
//
//   - Until tpeStartup trials have completed with a value, trials come from
//     the random sampler with the same seed, so they match it exactly.
//   - The completed trials are ranked by value in the objective's
//     direction; the best gamma(m) = min(ceil(0.1 m), 25) of the m that
//     hold a parameter are good, the others bad. Failed, pruned and
//     completed-without-a-value trials are bad: a region where trials fail
//     is as unwanted as one where they score worst. Queued, running and
//     interrupted trials are bad too (the constant liar: they count as if
//     they had the worst value), so proposals made while others are in
//     flight avoid the points already proposed.
//   - A Parzen estimator l is fitted to the good trials and g to the bad:
//     a mixture with one kernel per trial plus a prior kernel of weight 1.
//     Trials are weighted by age: with n >= 25 trials, the 25 newest weigh
//     1 and the older ones ramp linearly from 1/n.
//   - A float or int parameter is modelled on its range, in logarithms for
//     Log; an int's range extends by half a step at either end and a value
//     stands for its rounding interval. A kernel is a Gaussian truncated to
//     the range, centred on the trial's value, with a bandwidth equal to
//     the larger distance to its neighbours among the sorted values and the
//     prior's centre (the inner one at the ends), clipped to [range /
//     min(100, 1 + kernels), range] (the "magic clip"). The prior kernel is
//     centred on the range with bandwidth the range. A categorical kernel
//     puts 1 + 1/k on the trial's choice and 1/k on each of the k choices
//     (normalised); the prior kernel is uniform.
//   - tpeCandidates candidates are drawn from l and the one maximising
//     log l(x) - log g(x) (the expected improvement, up to a monotone map)
//     is proposed.
//
// The independent variant (spec.TPE) fits and samples each parameter on its
// own, on the trials in which it is present, in declaration order, skipping
// inactive parameters. Its float kernels are not divided by their
// bandwidth: a kernel's height at its centre is the same whatever its
// width, so wide kernels (isolated trials, the prior) weigh more than in a
// true density. Optuna 3.1's TPESampler behaves so (its truncated-normal
// log density leaves out the -log sigma term), and on hpsearch's benchmark
// it finds better configurations on all four problems than the exact
// density does (docs/benchmarks.md, "TPE's kernels"). The multivariate variant (spec.TPEMultivariate)
// models the unconditional parameters jointly: each kernel is the product
// of the per-parameter kernels of one trial, with the same bandwidths, and
// candidates are drawn jointly from one kernel; conditional parameters are
// sampled as in the independent variant.
//
// The random draws are seeded with the seed and the trial number, and the
// history is read in trial-number order, so the parameters depend only on
// the seed, n and the set of trials in history.
const (
	tpeStartup     = 10
	tpeCandidates  = 24
	tpePriorWeight = 1.0
	// tpeMaxGood caps how many trials are good; the tpeFlatWeights newest
	// trials of a mixture weigh 1.
	tpeMaxGood     = 25
	tpeFlatWeights = 25
)

// tpeSampler is the TPE sampler. It is immutable and safe for concurrent
// use.
type tpeSampler struct {
	space        *space
	seed         uint64
	multivariate bool
	liar         bool
	// sign is 1 to minimise the objective, -1 to maximise it.
	sign   float64
	random *unitSampler
	// group lists the parameters the multivariate variant models jointly:
	// the non-constant ones without conditions, in declaration order.
	// inGroup maps a parameter's index to its position in group, or -1.
	group   []*param
	inGroup []int
}

// tpeOption changes a default of the TPE sampler (for tests).
type tpeOption func(*tpeSampler)

// tpeNoLiar makes the sampler ignore trials in flight.
func tpeNoLiar() tpeOption {
	return func(s *tpeSampler) { s.liar = false }
}

// newTPE returns the TPE sampler of s: multivariate when s.Sampler.Type is
// spec.TPEMultivariate.
func newTPE(s *spec.Spec, opts ...tpeOption) (Sampler, error) {
	sp, err := compile(s.Params)
	if err != nil {
		return nil, err
	}
	seed := uint64(s.Sampler.Seed)
	t := &tpeSampler{
		space:        sp,
		seed:         mix(seed ^ 0x747065), // "tpe"
		multivariate: s.Sampler.Type == spec.TPEMultivariate,
		liar:         true,
		sign:         1,
		random:       &unitSampler{space: sp, point: randomPoint(seed)},
		inGroup:      make([]int, len(sp.params)),
	}
	for i := range sp.params {
		p := &sp.params[i]
		t.inGroup[i] = -1
		if t.multivariate && p.Type != spec.Constant && len(p.when) == 0 {
			t.inGroup[i] = len(t.group)
			t.group = append(t.group, p)
		}
	}
	for _, o := range opts {
		o(t)
	}
	if s.Objective.Goal == spec.Maximize {
		t.sign = -1
	}
	return t, nil
}

// observation is a trial of the history as the estimators see it.
type observation struct {
	params hptype.Params
	number int
	// rank orders the trials that completed with a value from best (0) to
	// worst; it is -1 for the others, which are always bad.
	rank int
}

// Sample implements Sampler.
func (s *tpeSampler) Sample(ctx context.Context, n int, history []hptype.Trial) (hptype.Params, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("trial number %d is negative", n)
	}
	obs, completed := s.observations(history)
	if completed < tpeStartup {
		return s.random.Sample(ctx, n, nil)
	}
	rng := rand.New(rand.NewPCG(s.seed, mix(uint64(n))))
	var scratch tpeScratch
	var joint []any
	if len(s.group) > 0 {
		joint = s.propose(rng, &scratch, obs, completed, s.group)
	}
	params := s.space.params
	vals := make([]any, len(params))
	out := make(hptype.Params, len(params))
	for i := range params {
		p := &params[i]
		if !p.active(vals) {
			continue
		}
		v := p.Value
		switch {
		case p.Type == spec.Constant:
		case s.inGroup[i] >= 0:
			v = joint[s.inGroup[i]]
		default:
			v = s.propose(rng, &scratch, obs, completed, []*param{p})[0]
		}
		vals[i] = v
		out[p.Name] = v
	}
	return out, nil
}

// observations returns the trials of history the estimators use, in
// trial-number order, and how many of them completed with a value.
func (s *tpeSampler) observations(history []hptype.Trial) ([]observation, int) {
	obs := make([]observation, 0, len(history))
	var values []float64
	for i := range history {
		t := &history[i]
		o := observation{params: t.Params, number: t.Number, rank: -1}
		switch {
		case t.State == hptype.TrialCompleted && t.Value != nil && !math.IsNaN(*t.Value):
			o.rank = len(values)
			values = append(values, s.sign**t.Value)
		case t.State == hptype.TrialQueued || t.State == hptype.TrialRunning || t.State == hptype.TrialInterrupted:
			if !s.liar {
				continue
			}
		}
		obs = append(obs, o)
	}
	slices.SortStableFunc(obs, func(a, b observation) int { return cmp.Compare(a.number, b.number) })
	// Rank the completed trials by value, ties by trial number.
	done := make([]int, 0, len(values))
	for i := range obs {
		if obs[i].rank >= 0 {
			done = append(done, i)
		}
	}
	slices.SortStableFunc(done, func(a, b int) int {
		return cmp.Compare(values[obs[a].rank], values[obs[b].rank])
	})
	for r, i := range done {
		obs[i].rank = r
	}
	return obs, len(values)
}

// tpeGamma is how many of m completed trials are good.
func tpeGamma(m int) int {
	return min((m+9)/10, tpeMaxGood)
}

// propose fits l and g to the trials that hold every parameter of ps and
// returns the values of ps at the best of the candidates drawn from l.
func (s *tpeSampler) propose(rng *rand.Rand, sc *tpeScratch, obs []observation, completed int, ps []*param) []any {
	good, bad := split(obs, completed, ps)
	l := fitParzen(ps, good, sc, s.multivariate)
	g := fitParzen(ps, bad, sc, s.multivariate)
	best, bestScore := make([]point, len(ps)), math.NaN()
	// Discrete parameters draw the same candidate often: score it once.
	seen := make([]point, 0, tpeCandidates*len(ps))
	c := make([]point, len(ps))
	for i := range tpeCandidates {
		l.draw(rng, c)
		if drawn(seen, c) {
			continue
		}
		seen = append(seen, c...)
		// A NaN score (both densities zero) never beats another.
		if score := l.logPDF(c, sc) - g.logPDF(c, sc); i == 0 || score > bestScore || math.IsNaN(bestScore) {
			bestScore = score
			copy(best, c)
		}
	}
	out := make([]any, len(ps))
	for d, p := range ps {
		out[d] = p.fromPoint(best[d])
	}
	return out
}

// drawn reports whether c is among the candidates in seen, len(c) points
// each.
func drawn(seen, c []point) bool {
	for i := 0; i < len(seen); i += len(c) {
		if slices.Equal(seen[i:i+len(c)], c) {
			return true
		}
	}
	return false
}

// split returns the coordinates of the trials that hold every parameter of
// ps, the good and the bad ones, each in trial-number order: rows of
// len(ps) coordinates (see param.coord).
func split(obs []observation, completed int, ps []*param) (good, bad []float64) {
	rows := make([]float64, 0, len(obs)*len(ps))
	var keep []int // index in obs of each row
	byRank := make([]int, completed)
	for i := range byRank {
		byRank[i] = -1
	}
	m := 0
	for i := range obs {
		o := &obs[i]
		n := len(rows)
		ok := true
		for _, p := range ps {
			x, has := p.coord(o.params[p.Name])
			if !has {
				ok = false
				break
			}
			rows = append(rows, x)
		}
		if !ok {
			rows = rows[:n]
			continue
		}
		if o.rank >= 0 {
			byRank[o.rank] = len(keep)
			m++
		}
		keep = append(keep, i)
	}
	isGood := make([]bool, len(keep))
	for r, want := 0, tpeGamma(m); r < len(byRank) && want > 0; r++ {
		if k := byRank[r]; k >= 0 {
			isGood[k] = true
			want--
		}
	}
	d := len(ps)
	for k := range keep {
		if isGood[k] {
			good = append(good, rows[k*d:(k+1)*d]...)
		} else {
			bad = append(bad, rows[k*d:(k+1)*d]...)
		}
	}
	return good, bad
}

// coord returns the coordinate of value v of a non-constant parameter in
// the space its kernels live in: the value, or its logarithm for Log, for
// a float or an int (clamped to the bounds); the index of the choice for a
// categorical. ok is false if v is absent or not a value of p.
func (p *param) coord(v any) (x float64, ok bool) {
	if v == nil {
		return 0, false
	}
	if p.Type == spec.Categorical {
		for i, w := range p.Values {
			if spec.SameValue(v, w) {
				return float64(i), true
			}
		}
		return 0, false
	}
	x, ok = number(v)
	if !ok || math.IsNaN(x) {
		return 0, false
	}
	x = clamp(x, p.Min, p.Max)
	if p.Type == spec.Int {
		x = p.Min + float64(p.step)*math.Round((x-p.Min)/float64(p.step))
		x = math.Min(x, p.Min+float64(p.step*(p.count-1)))
	}
	if p.Log {
		x = math.Log(x)
	}
	return x, true
}

// bounds returns the range of a numerical parameter's kernels: its bounds,
// in logarithms for Log, extended by half a step (half a unit before the
// logarithm for Log) for an int.
func (p *param) bounds() (lo, hi float64) {
	switch {
	case p.Type == spec.Int && p.Log:
		return math.Log(p.Min - 0.5), math.Log(p.Max + 0.5)
	case p.Type == spec.Int:
		h := float64(p.step) / 2
		return p.Min - h, p.Min + float64(p.step*(p.count-1)) + h
	case p.Log:
		return math.Log(p.Min), math.Log(p.Max)
	}
	return p.Min, p.Max
}

// fromPoint returns the parameter value a candidate coordinate stands for.
func (p *param) fromPoint(c point) any {
	switch {
	case p.Type == spec.Categorical:
		return p.Values[c.choice]
	case p.Type == spec.Int && p.Log:
		return int64(math.Round(math.Exp(c.x)))
	case p.Type == spec.Int:
		return int64(math.Round(c.x))
	case p.Log:
		return clamp(math.Exp(c.x), p.Min, p.Max)
	}
	return clamp(c.x, p.Min, p.Max)
}
