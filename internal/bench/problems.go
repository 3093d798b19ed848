// Package bench measures the samplers and schedulers on problems with known
// optima: the test functions Branin, Hartmann6, Rosenbrock and Ackley for
// the samplers, and a synthetic learning-curve problem whose final values
// are known exactly for the schedulers. It reports the simple regret (the
// best value found minus the optimum) as a median and inter-quartile range
// over seeds, and for the schedulers the resource they consumed against
// training every trial to the end.
//
// Everything is deterministic for a seed: the same command gives the same
// figures on any machine, only the timings change.
package bench

import (
	"fmt"
	"math"
	"strconv"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// ObjectiveMetric is the metric the problems report and minimise.
const ObjectiveMetric = "value"

// Problem is a test function to minimise over a box, with its known
// optimum. Its parameters are float parameters x0, x1, ..., one per
// dimension.
type Problem struct {
	Name string
	// Bounds are each dimension's [min, max].
	Bounds [][2]float64
	// Optimum is the global minimum of F over Bounds.
	Optimum float64
	// Argmin holds points where F reaches Optimum.
	Argmin [][]float64
	// F is the function; x has one coordinate per dimension.
	F func(x []float64) float64
}

// Dim is the problem's number of dimensions.
func (p *Problem) Dim() int { return len(p.Bounds) }

// ParamName is the name of the parameter of dimension i.
func ParamName(i int) string { return "x" + strconv.Itoa(i) }

// Spec returns a space for the problem searched by the given sampler and
// seed for maxTrials trials: one float parameter per dimension, the
// objective ObjectiveMetric minimised.
func (p *Problem) Spec(sampler spec.SamplerType, seed int64, maxTrials int) *spec.Spec {
	params := make([]spec.Param, p.Dim())
	for i, b := range p.Bounds {
		params[i] = spec.Param{Name: ParamName(i), Type: spec.Float, Min: b[0], Max: b[1]}
	}
	return &spec.Spec{
		Name:           "bench-" + p.Name,
		Objective:      spec.Objective{Metric: ObjectiveMetric, Goal: spec.Minimize},
		Params:         params,
		Sampler:        spec.Sampler{Type: sampler, Seed: seed},
		MaxTrials:      maxTrials,
		MaxConcurrency: 1,
	}
}

// Eval returns F at the point the parameters x0, x1, ... name.
func (p *Problem) Eval(params hptype.Params) (float64, error) {
	x := make([]float64, p.Dim())
	for i := range x {
		v, err := params.Float(ParamName(i))
		if err != nil {
			return 0, fmt.Errorf("problem %s: %w", p.Name, err)
		}
		x[i] = v
	}
	return p.F(x), nil
}

// Problems returns the sampler benchmark's problems: Branin (2-D),
// Hartmann6 (6-D), Rosenbrock (10-D) on [-5, 10]^10 and Ackley (5-D) on
// [-32.768, 32.768]^5. The definitions are those of Surjanovic and
// Bingham's Virtual Library of Simulation Experiments
// (https://www.sfu.ca/~ssurjano/optimization.html).
func Problems() []*Problem {
	return []*Problem{Branin(), Hartmann6(), Rosenbrock(10), Ackley(5)}
}

// ProblemByName returns the problem of Problems with the given name.
func ProblemByName(name string) (*Problem, error) {
	var names []string
	for _, p := range Problems() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("unknown problem %q: want one of %v", name, names)
}

// Branin is the Branin-Hoo function on x0 in [-5, 10], x1 in [0, 15]; its
// minimum 0.397887 is reached at (-pi, 12.275), (pi, 2.275) and
// (9.42478, 2.475).
func Branin() *Problem {
	return &Problem{
		Name:    "branin",
		Bounds:  [][2]float64{{-5, 10}, {0, 15}},
		Optimum: 0.397887,
		Argmin:  [][]float64{{-math.Pi, 12.275}, {math.Pi, 2.275}, {9.42478, 2.475}},
		F: func(x []float64) float64 {
			const (
				b = 5.1 / (4 * math.Pi * math.Pi)
				c = 5 / math.Pi
				r = 6
				s = 10
				t = 1 / (8 * math.Pi)
			)
			u := x[1] - b*x[0]*x[0] + c*x[0] - r
			return u*u + s*(1-t)*math.Cos(x[0]) + s
		},
	}
}

// hartmann6 holds the constants of the Hartmann6 function.
var hartmann6 = struct {
	alpha [4]float64
	a, p  [4][6]float64
}{
	alpha: [4]float64{1.0, 1.2, 3.0, 3.2},
	a: [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	},
	p: [4][6]float64{
		{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
		{0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
		{0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
		{0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381},
	},
}

// Hartmann6 is the six-dimensional Hartmann function on [0, 1]^6; its
// minimum -3.32237 is reached at (0.20169, 0.150011, 0.476874, 0.275332,
// 0.311652, 0.6573).
func Hartmann6() *Problem {
	return &Problem{
		Name:    "hartmann6",
		Bounds:  [][2]float64{{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}},
		Optimum: -3.32237,
		Argmin:  [][]float64{{0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}},
		F: func(x []float64) float64 {
			h := &hartmann6
			var f float64
			for i := range 4 {
				var e float64
				for j := range 6 {
					d := x[j] - h.p[i][j]
					e += h.a[i][j] * d * d
				}
				f -= h.alpha[i] * math.Exp(-e)
			}
			return f
		},
	}
}

// Rosenbrock is the d-dimensional Rosenbrock function on [-5, 10]^d; its
// minimum 0 is reached at (1, ..., 1).
func Rosenbrock(d int) *Problem {
	one := make([]float64, d)
	for i := range one {
		one[i] = 1
	}
	return &Problem{
		Name:    "rosenbrock" + strconv.Itoa(d),
		Bounds:  box(d, -5, 10),
		Optimum: 0,
		Argmin:  [][]float64{one},
		F: func(x []float64) float64 {
			var f float64
			for i := range len(x) - 1 {
				u, v := x[i+1]-x[i]*x[i], 1-x[i]
				f += 100*u*u + v*v
			}
			return f
		},
	}
}

// Ackley is the d-dimensional Ackley function (a = 20, b = 0.2, c = 2 pi)
// on [-32.768, 32.768]^d; its minimum 0 is reached at the origin.
func Ackley(d int) *Problem {
	return &Problem{
		Name:    "ackley" + strconv.Itoa(d),
		Bounds:  box(d, -32.768, 32.768),
		Optimum: 0,
		Argmin:  [][]float64{make([]float64, d)},
		F: func(x []float64) float64 {
			var sq, cs float64
			for _, v := range x {
				sq += v * v
				cs += math.Cos(2 * math.Pi * v)
			}
			n := float64(len(x))
			return -20*math.Exp(-0.2*math.Sqrt(sq/n)) - math.Exp(cs/n) + 20 + math.E
		},
	}
}

// box returns d copies of [lo, hi].
func box(d int, lo, hi float64) [][2]float64 {
	b := make([][2]float64, d)
	for i := range b {
		b[i] = [2]float64{lo, hi}
	}
	return b
}
