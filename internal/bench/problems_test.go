package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func TestProblemOptima(t *testing.T) {
	for _, p := range Problems() {
		t.Run(p.Name, func(t *testing.T) {
			// The published argmins are rounded to about six digits.
			for _, x := range p.Argmin {
				if got := p.F(x); math.Abs(got-p.Optimum) > 1e-5 {
					t.Errorf("F(%v) = %.9g, want the optimum %.9g", x, got, p.Optimum)
				}
			}
			// No point of a dense random sample is below the optimum.
			rng := rand.New(rand.NewPCG(1, 2))
			x := make([]float64, p.Dim())
			for range 20000 {
				for i, b := range p.Bounds {
					x[i] = b[0] + rng.Float64()*(b[1]-b[0])
				}
				if f := p.F(x); f < p.Optimum-1e-6 {
					t.Fatalf("F(%v) = %.9g, below the optimum %.9g", x, f, p.Optimum)
				}
			}
		})
	}
}

func TestProblemValues(t *testing.T) {
	// Values away from the optimum, computed by hand from the definitions.
	for _, tc := range []struct {
		p    *Problem
		x    []float64
		want float64
	}{
		{Branin(), []float64{0, 0}, 55.602113},                    // (-6)^2 + 10(1-1/(8pi)) + 10
		{Rosenbrock(10), make([]float64, 10), 9},                  // nine terms (1-0)^2
		{Ackley(5), []float64{1, 1, 1, 1, 1}, 3.6253849384403627}, // -20e^-0.2 - e + 20 + e
		{Hartmann6(), make([]float64, 6), -0.00508911288},         // dominated by the third term, -3 exp(-6.3975)
	} {
		if got := tc.p.F(tc.x); math.Abs(got-tc.want) > 1e-6*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("%s(%v) = %.9g, want %.9g", tc.p.Name, tc.x, got, tc.want)
		}
	}
}

func TestProblemSpecAndEval(t *testing.T) {
	p := Hartmann6()
	sp := p.Spec(spec.TPE, 7, 30)
	if len(sp.Params) != 6 || sp.Params[5].Name != "x5" || sp.Params[5].Type != spec.Float || sp.Params[5].Max != 1 {
		t.Errorf("params %+v, want x0..x5 floats on [0, 1]", sp.Params)
	}
	if sp.Sampler != (spec.Sampler{Type: spec.TPE, Seed: 7}) || sp.MaxTrials != 30 || sp.Objective.Goal != spec.Minimize || sp.Objective.Metric != ObjectiveMetric {
		t.Errorf("spec %+v", sp)
	}
	params := hptype.Params{}
	for i, v := range p.Argmin[0] {
		params[ParamName(i)] = v
	}
	if got, err := p.Eval(params); err != nil || got != p.F(p.Argmin[0]) {
		t.Errorf("Eval(argmin) = %v, %v; want %v", got, err, p.F(p.Argmin[0]))
	}
	delete(params, "x3")
	if _, err := p.Eval(params); !errors.Is(err, hptype.ErrNotFound) {
		t.Errorf("Eval without x3: %v, want ErrNotFound", err)
	}
	if _, err := ProblemByName("rosenbrock10"); err != nil {
		t.Error(err)
	}
	if _, err := ProblemByName("sphere"); err == nil {
		t.Error("ProblemByName(sphere) found a problem")
	}
}
