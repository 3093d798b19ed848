// Package search proposes the parameters of trials: the Sampler contract,
// the random, grid and scrambled Sobol samplers, and the model-based TPE,
// GP-BO and CMA-ES samplers.
//
// Every sampler keeps no state that changes between calls: random, sobol
// and grid are pure functions of the space, the seed and the trial number;
// the model-based samplers are pure functions of those and of the trials
// numbered before n in the history, so a restarted coordinator gets the
// same proposals. They treat pending trials (queued, running) as bad
// results (a constant liar), so many proposals made at once spread out.
//
// Parameters are visited in declaration order. A parameter whose When
// conditions do not all hold for the values chosen before it is absent from
// the result. Values are float64 for float parameters, int64 for int
// parameters, the chosen element of Values for categorical parameters and
// Value for constant parameters.
//
// The samplers, chosen by the space file's sampler type:
//
//   - random draws each parameter independently: uniform on [min, max], or
//     log-uniform with log; an int uniformly among min, min+step, ... <= max,
//     or log-uniform on [min-0.5, max+0.5] rounded with log; a categorical
//     value uniformly. The draws are hashes of the seed, the trial number
//     and the parameter.
//   - sobol maps point n of a Sobol sequence (Joe and Kuo's direction
//     numbers) with Owen's nested uniform scrambling keyed by the seed to
//     trial n, with the same mapping from [0, 1) as random, one dimension
//     per non-constant parameter in declaration order, active or not. It
//     supports up to 64 such parameters and 2^32 trials.
//   - grid enumerates the Cartesian product of the parameters' discrete
//     values: an int's steps in ascending order, a categorical's values and
//     a float's points in declaration order, a constant's value. The order
//     is row-major over the parameters in declaration order, the last
//     varying fastest, as nested for-loops in declaration order. A
//     parameter that is inactive given the values before it contributes a
//     single choice, absent, so the grid holds each distinct combination of
//     active parameters once. Past the last point it returns ErrExhausted;
//     GridSize counts the points. The seed plays no part.
//   - tpe and tpe-multivariate: the Tree-structured Parzen Estimator (see
//     tpe.go), after 10 random trials.
//   - gp: Gaussian-process Bayesian optimisation with a Matérn 5/2 kernel
//     and expected improvement (see gp.go), for float and int parameters.
//   - cmaes: CMA-ES (see cmaes.go), for float and int parameters.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Sampler proposes the parameters of trials.
type Sampler interface {
	// Sample returns the parameters of trial number n (0-based). history
	// holds the trials created so far (any state); the random, grid and
	// Sobol samplers ignore it, model-based samplers use it. The result
	// depends only on the space, the seed, n and history, so a resumed
	// study gets the same parameters.
	Sample(ctx context.Context, n int, history []hptype.Trial) (hptype.Params, error)
}

// ErrExhausted is returned by a grid sampler asked for a trial past its
// last point.
var ErrExhausted = errors.New("search space exhausted")

// New returns the sampler s.Sampler.Type names (random when empty), seeded
// with s.Sampler.Seed. It fails if the space is unusable by that sampler,
// e.g. a float parameter without points for the grid sampler, or more
// dimensions than the Sobol sampler supports. The sampler is safe for
// concurrent use.
func New(s *spec.Spec) (Sampler, error) {
	sp, err := compile(s.Params)
	if err != nil {
		return nil, err
	}
	seed := uint64(s.Sampler.Seed)
	switch s.Sampler.Type {
	case spec.Random, "":
		return &unitSampler{space: sp, point: randomPoint(seed)}, nil
	case spec.Sobol:
		if sp.dims > len(directions) {
			return nil, fmt.Errorf("sobol sampler: the space has %d non-constant parameters and the sampler supports at most %d; use the random sampler", sp.dims, len(directions))
		}
		return &unitSampler{space: sp, point: sobolPoint(seed)}, nil
	case spec.Grid:
		g, err := newGrid(sp)
		if err != nil {
			return nil, err
		}
		return g, nil
	case spec.TPE, spec.TPEMultivariate:
		return newTPE(s)
	case spec.GP:
		return newGPSampler(sp, s)
	case spec.CMAES:
		return newCMASampler(sp, s)
	}
	return nil, fmt.Errorf("unknown sampler %q: want random, grid, sobol, tpe, tpe-multivariate, gp or cmaes", s.Sampler.Type)
}

// space is a validated list of parameters, prepared for sampling.
type space struct {
	params []param
	// dims is the number of non-constant parameters.
	dims int
}

// param is one parameter with its conditions resolved to indices.
type param struct {
	*spec.Param
	// dim is the parameter's coordinate in the unit hypercube: its index
	// among the non-constant parameters in declaration order, -1 for a
	// constant.
	dim int
	// when are the parameter's conditions.
	when []cond
	// lo and step are an int parameter's Min and Step as integers, count
	// the number of its values.
	lo, step, count int64
}

// cond holds when the parameter at index ref is present and equals one of
// values.
type cond struct {
	ref    int
	values []any
}

// maxExactInt bounds int parameters so that every value and count is exact
// in a float64.
const maxExactInt = 1 << 53

// compile validates params for sampling and resolves their conditions.
func compile(params []spec.Param) (*space, error) {
	sp := &space{params: make([]param, len(params))}
	byName := make(map[string]int, len(params))
	for i := range params {
		p := &params[i]
		if _, dup := byName[p.Name]; dup {
			return nil, fmt.Errorf("parameter %q is declared twice", p.Name)
		}
		q := param{Param: p, dim: -1}
		if err := q.check(); err != nil {
			return nil, fmt.Errorf("parameter %q: %w", p.Name, err)
		}
		if p.Type != spec.Constant {
			q.dim = sp.dims
			sp.dims++
		}
		for _, c := range p.When {
			ref, ok := byName[c.Param]
			if !ok {
				return nil, fmt.Errorf("parameter %q: condition on %q, which is not a parameter declared before it", p.Name, c.Param)
			}
			for _, v := range c.Values {
				if !scalar(v) {
					return nil, fmt.Errorf("parameter %q: condition on %q: value %v is %T, want a string, number or bool", p.Name, c.Param, v, v)
				}
			}
			q.when = append(q.when, cond{ref: ref, values: c.Values})
		}
		byName[p.Name] = i
		sp.params[i] = q
	}
	return sp, nil
}

// check validates one parameter and fills in its integer fields.
func (p *param) check() error {
	switch p.Type {
	case spec.Float:
		if math.IsNaN(p.Min) || math.IsNaN(p.Max) || math.IsInf(p.Min, 0) || math.IsInf(p.Max, 0) || p.Min > p.Max {
			return fmt.Errorf("bounds [%v, %v] are not a finite range with min <= max", p.Min, p.Max)
		}
		if p.Log && p.Min <= 0 {
			return fmt.Errorf("log scale needs min > 0, got %v", p.Min)
		}
	case spec.Int:
		if p.Min != math.Trunc(p.Min) || p.Max != math.Trunc(p.Max) || math.Abs(p.Min) > maxExactInt || math.Abs(p.Max) > maxExactInt || p.Min > p.Max {
			return fmt.Errorf("bounds [%v, %v] are not whole numbers with min <= max and magnitude at most 2^53", p.Min, p.Max)
		}
		p.lo, p.step = int64(p.Min), p.Step
		if p.step == 0 {
			p.step = 1
		}
		switch {
		case p.step < 0:
			return fmt.Errorf("step %d is negative", p.step)
		case p.Log && p.Min <= 0:
			return fmt.Errorf("log scale needs min > 0, got %v", p.Min)
		case p.Log && p.step != 1:
			return fmt.Errorf("log scale needs step 1, got %d", p.step)
		}
		p.count = (int64(p.Max)-p.lo)/p.step + 1
	case spec.Categorical:
		if len(p.Values) == 0 {
			return errors.New("categorical parameter has no values")
		}
		for _, v := range p.Values {
			if !scalar(v) {
				return fmt.Errorf("value %v is %T, want a string, number or bool", v, v)
			}
		}
	case spec.Constant:
		if !scalar(p.Value) {
			return fmt.Errorf("value %v is %T, want a string, number or bool", p.Value, p.Value)
		}
	default:
		return fmt.Errorf("unknown type %q", p.Type)
	}
	return nil
}

// fromUnit maps a coordinate u in [0, 1) to a value of a non-constant
// parameter. Equal-width slices of [0, 1) map to equally likely values (on
// the log scale for Log parameters).
func (p *param) fromUnit(u float64) any {
	switch p.Type {
	case spec.Float:
		if p.Log {
			lmin, lmax := math.Log(p.Min), math.Log(p.Max)
			return clamp(math.Exp(lmin+u*(lmax-lmin)), p.Min, p.Max)
		}
		return clamp(p.Min+u*(p.Max-p.Min), p.Min, p.Max)
	case spec.Int:
		if p.Log {
			// Log-uniform over [min-0.5, max+0.5], rounded: every integer
			// gets the log-width of its rounding interval.
			lmin, lmax := math.Log(p.Min-0.5), math.Log(p.Max+0.5)
			return int64(clamp(math.Round(math.Exp(lmin+u*(lmax-lmin))), p.Min, p.Max))
		}
		return p.lo + p.step*index(u, p.count)
	case spec.Categorical:
		return p.Values[index(u, int64(len(p.Values)))]
	}
	return p.Value
}

// index maps u in [0, 1) to one of count equal slices.
func index(u float64, count int64) int64 {
	return min(int64(u*float64(count)), count-1)
}

func clamp(x, lo, hi float64) float64 {
	return math.Min(math.Max(x, lo), hi)
}

// active reports whether every condition of p holds for vals, the values
// chosen so far by parameter index (nil for an absent parameter).
func (p *param) active(vals []any) bool {
	for _, c := range p.when {
		v := vals[c.ref]
		if v == nil || !oneOf(v, c.values) {
			return false
		}
	}
	return true
}

func oneOf(v any, values []any) bool {
	for _, w := range values {
		if spec.SameValue(v, w) {
			return true
		}
	}
	return false
}

// number returns v as a float64 if it is a number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// scalar reports whether v is a string, a bool or a number.
func scalar(v any) bool {
	switch v.(type) {
	case string, bool:
		return true
	}
	_, ok := number(v)
	return ok
}

// unitSampler maps a point of the unit hypercube, one coordinate per
// non-constant parameter, to parameters: the random and Sobol samplers.
type unitSampler struct {
	space *space
	// point returns coordinate dim of point n, in [0, 1).
	point func(n, dim int) (float64, error)
}

// Sample implements Sampler.
func (s *unitSampler) Sample(ctx context.Context, n int, _ []hptype.Trial) (hptype.Params, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("trial number %d is negative", n)
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
		if p.Type != spec.Constant {
			u, err := s.point(n, p.dim)
			if err != nil {
				return nil, err
			}
			v = p.fromUnit(u)
		}
		vals[i] = v
		out[p.Name] = v
	}
	return out, nil
}

// randomPoint returns independent uniform coordinates, each a hash of the
// seed, the trial number and the dimension.
func randomPoint(seed uint64) func(n, dim int) (float64, error) {
	base := mix(seed ^ 0x72616e646f6d) // "random"
	return func(n, dim int) (float64, error) {
		h := mix(mix(base+uint64(n)) + uint64(dim))
		return float64(h>>11) * 0x1p-53, nil
	}
}

// mix is the splitmix64 finaliser (Steele, Lea and Flood, 2014): a
// bijective hash of 64 bits with good avalanche.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
