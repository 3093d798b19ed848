package search

import (
	"reflect"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// sphere5 is Σ xᵢ² on [-5, 10]⁵, off-centre in its box, minimum 0 at 0.
var sphere5 = benchProblem{
	name:   "sphere5",
	params: problemParams([2]float64{-5, 10}, [2]float64{-5, 10}, [2]float64{-5, 10}, [2]float64{-5, 10}, [2]float64{-5, 10}),
	f: func(t testing.TB, p hptype.Params) float64 {
		var x [5]float64
		problemPoint(t, p, x[:])
		var s float64
		for _, v := range x {
			s += v * v
		}
		return s
	},
}

// rosenbrock5 is Rosenbrock's function on [-2, 2]⁵, minimum 0 at (1, ..., 1).
var rosenbrock5 = benchProblem{
	name:   "rosenbrock5",
	params: problemParams([2]float64{-2, 2}, [2]float64{-2, 2}, [2]float64{-2, 2}, [2]float64{-2, 2}, [2]float64{-2, 2}),
	f: func(t testing.TB, p hptype.Params) float64 {
		var x [5]float64
		problemPoint(t, p, x[:])
		var s float64
		for i := range 4 {
			a, b := x[i+1]-x[i]*x[i], 1-x[i]
			s += 100*a*a + b*b
		}
		return s
	},
}

func TestCMAESBeatsRandom(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5}
	if testing.Short() {
		seeds = seeds[:3]
	}
	for _, fn := range []benchProblem{sphere5, rosenbrock5} {
		t.Run(fn.name, func(t *testing.T) {
			t.Parallel()
			compareWithRandom(t, spec.CMAES, fn, 100, seeds)
		})
	}
}

func TestCMAESParameters(t *testing.T) {
	for _, tc := range []struct{ d, lambda, mu int }{{1, 4, 2}, {2, 6, 3}, {5, 8, 4}, {20, 12, 6}} {
		e := newCMA(tc.d)
		if e.lambda != tc.lambda || e.mu != tc.mu {
			t.Errorf("d = %d: λ = %d, μ = %d, want %d and %d", tc.d, e.lambda, e.mu, tc.lambda, tc.mu)
		}
		var sum float64
		for i, w := range e.weights {
			sum += w
			if i > 0 && w >= e.weights[i-1] {
				t.Errorf("d = %d: weights %v are not decreasing", tc.d, e.weights)
			}
		}
		if sum < 1-1e-12 || sum > 1+1e-12 || e.mueff < 1 || e.mueff > float64(e.mu) {
			t.Errorf("d = %d: weights sum to %g, μ_eff = %g", tc.d, sum, e.mueff)
		}
	}
}

// TestCMAESRestart checks that a fresh sampler, as after a coordinator
// restart, proposes every trial of a run exactly as the sampler that ran
// it did.
func TestCMAESRestart(t *testing.T) {
	history := runSequential(t, spec.CMAES, 7, rosenbrock5, 60)
	for n := range history {
		fresh := newSampler(t, spec.CMAES, 7, rosenbrock5.params)
		p, err := fresh.Sample(t.Context(), n, history)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, history[n].Params) {
			t.Fatalf("trial %d: restarted sampler proposed %v, the run %v", n, p, history[n].Params)
		}
	}
	other := newSampler(t, spec.CMAES, 8, rosenbrock5.params)
	p, err := other.Sample(t.Context(), 40, history)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(p, history[40].Params) {
		t.Errorf("seeds 7 and 8 both proposed %v", p)
	}
}

// TestCMAESPending checks that a generation waits for its pending trials:
// the next generation is drawn from the same distribution until they
// finish, and then from the updated one.
func TestCMAESPending(t *testing.T) {
	fn := sphere5
	lambda := newCMA(5).lambda
	history := runSequential(t, spec.Random, 2, fn, modelStartup+lambda)
	// The first generation is drawn from the initial distribution.
	s := newSampler(t, spec.CMAES, 2, fn.params)
	for n := modelStartup; n < modelStartup+lambda; n++ {
		p, err := s.Sample(t.Context(), n, history[:n])
		if err != nil {
			t.Fatal(err)
		}
		v := fn.f(t, p)
		history[n] = hptype.Trial{Number: n, Params: p, State: hptype.TrialCompleted, Value: &v}
	}
	next := modelStartup + lambda
	told, err := s.Sample(t.Context(), next, history)
	if err != nil {
		t.Fatal(err)
	}
	waiting := append([]hptype.Trial(nil), history...)
	waiting[next-1].State, waiting[next-1].Value = hptype.TrialRunning, nil
	untold, err := s.Sample(t.Context(), next, waiting)
	if err != nil {
		t.Fatal(err)
	}
	// The initial distribution for trial next is what the sampler draws
	// with no generation told: the same as with the generation missing.
	initial, err := s.Sample(t.Context(), next, history[:modelStartup])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(untold, initial) {
		t.Errorf("with a pending trial in generation 0, trial %d is %v, want %v from the initial distribution", next, untold, initial)
	}
	if reflect.DeepEqual(told, untold) {
		t.Errorf("trial %d is %v whether generation 0 is told or not", next, told)
	}
	// A failed trial finishes its generation: it ranks last.
	failed := append([]hptype.Trial(nil), history...)
	failed[next-1].State, failed[next-1].Value = hptype.TrialFailed, nil
	if p, err := s.Sample(t.Context(), next, failed); err != nil || reflect.DeepEqual(p, untold) {
		t.Errorf("with a failed trial in generation 0, trial %d is %v (err %v), want a told generation", next, p, err)
	}
}
