package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// benchProblem is a test function over a space of float parameters x0,
// x1, ..., to be minimised.
type benchProblem struct {
	name   string
	params []spec.Param
	f      func(t testing.TB, p hptype.Params) float64
	min    float64
}

// problemParams returns float parameters x0, x1, ... with the given bounds.
func problemParams(bounds ...[2]float64) []spec.Param {
	ps := make([]spec.Param, len(bounds))
	for i, b := range bounds {
		ps[i] = spec.Param{Name: fmt.Sprintf("x%d", i), Type: spec.Float, Min: b[0], Max: b[1]}
	}
	return ps
}

// problemPoint reads the parameters x0, x1, ... of p into x.
func problemPoint(t testing.TB, p hptype.Params, x []float64) {
	t.Helper()
	for i := range x {
		v, err := p.Float(fmt.Sprintf("x%d", i))
		if err != nil {
			t.Fatal(err)
		}
		x[i] = v
	}
}

var (
	braninProblem = benchProblem{
		name:   "branin",
		params: problemParams([2]float64{-5, 10}, [2]float64{0, 15}),
		f: func(t testing.TB, p hptype.Params) float64 {
			var x [2]float64
			problemPoint(t, p, x[:])
			return branin(x[0], x[1])
		},
		min: braninMin,
	}
	hartmann6Problem = benchProblem{
		name:   "hartmann6",
		params: problemParams([2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1}),
		f: func(t testing.TB, p hptype.Params) float64 {
			var x [6]float64
			problemPoint(t, p, x[:])
			return hartmann6(x)
		},
		min: hartmann6Min,
	}
)

// runSequential drives sampler typ over fn for evals trials, one at a
// time, and returns the history.
func runSequential(t testing.TB, typ spec.SamplerType, seed int64, fn benchProblem, evals int) []hptype.Trial {
	t.Helper()
	s := newSampler(t, typ, seed, fn.params)
	history := make([]hptype.Trial, 0, evals)
	for n := range evals {
		p, err := s.Sample(t.Context(), n, history)
		if err != nil {
			t.Fatalf("%s: Sample(%d): %v", typ, n, err)
		}
		v := fn.f(t, p)
		history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialCompleted, Value: &v})
	}
	return history
}

// bestValue is the smallest value in history.
func bestValue(history []hptype.Trial) float64 {
	best := math.Inf(1)
	for _, tr := range history {
		if tr.Value != nil {
			best = min(best, *tr.Value)
		}
	}
	return best
}

// medianBest runs typ over fn with each seed and returns the median of the
// best values found.
func medianBest(t *testing.T, typ spec.SamplerType, fn benchProblem, evals int, seeds []int64) float64 {
	t.Helper()
	bests := make([]float64, len(seeds))
	for i, seed := range seeds {
		bests[i] = bestValue(runSequential(t, typ, seed, fn, evals))
	}
	slices.Sort(bests)
	return bests[len(bests)/2]
}

// compareWithRandom checks that typ's median best over seeds beats the
// random sampler's on fn.
func compareWithRandom(t *testing.T, typ spec.SamplerType, fn benchProblem, evals int, seeds []int64) {
	t.Helper()
	got := medianBest(t, typ, fn, evals, seeds)
	rnd := medianBest(t, spec.Random, fn, evals, seeds)
	t.Logf("%s on %s, %d evaluations, %d seeds: median best %.5g, random %.5g, optimum %.5g", typ, fn.name, evals, len(seeds), got, rnd, fn.min)
	if got >= rnd {
		t.Errorf("%s median best %g does not beat random's %g", typ, got, rnd)
	}
}

func TestGPBeatsRandom(t *testing.T) {
	seeds := []int64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, tc := range []struct {
		fn    benchProblem
		evals int
	}{{braninProblem, 40}, {hartmann6Problem, 60}} {
		t.Run(tc.fn.name, func(t *testing.T) {
			t.Parallel()
			compareWithRandom(t, spec.GP, tc.fn, tc.evals, seeds)
		})
	}
}

func TestGPStartupIsRandom(t *testing.T) {
	gp := newSampler(t, spec.GP, 5, braninProblem.params)
	rnd := newSampler(t, spec.Random, 5, braninProblem.params)
	for n := range modelStartup {
		got, err := gp.Sample(t.Context(), n, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := rnd.Sample(t.Context(), n, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("trial %d: gp %v, random %v", n, got, want)
		}
	}
}

func TestGPDeterministic(t *testing.T) {
	history := runSequential(t, spec.Random, 9, hartmann6Problem, 30)
	// A failed and a running trial, and one numbered after n that must
	// not matter.
	history[3].State, history[3].Value = hptype.TrialFailed, nil
	history[7].State, history[7].Value = hptype.TrialRunning, nil
	const n = 25
	a, err := newSampler(t, spec.GP, 4, hartmann6Problem.params).Sample(t.Context(), n, history)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(history[:n])
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, err := newSampler(t, spec.GP, 4, hartmann6Problem.params).Sample(t.Context(), n, shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed and history, different order: %v then %v", a, b)
	}
	c, err := newSampler(t, spec.GP, 5, hartmann6Problem.params).Sample(t.Context(), n, history)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Errorf("seeds 4 and 5 both proposed %v", a)
	}
}

// unitDist is the Euclidean distance between the points of a and b in the
// box of params.
func unitDist(t *testing.T, b *box, p, q hptype.Params) float64 {
	t.Helper()
	x, ok1 := b.encode(p)
	y, ok2 := b.encode(q)
	if !ok1 || !ok2 {
		t.Fatalf("cannot encode %v or %v", p, q)
	}
	var s float64
	for i := range x {
		s += (x[i] - y[i]) * (x[i] - y[i])
	}
	return math.Sqrt(s)
}

func TestGPPendingSpread(t *testing.T) {
	const done, parallel = 20, 20
	history := runSequential(t, spec.Random, 3, braninProblem, done)
	s := newSampler(t, spec.GP, 3, braninProblem.params)
	bx := s.(*gpSampler).box
	var proposed []hptype.Params
	for n := done; n < done+parallel; n++ {
		p, err := s.Sample(t.Context(), n, history)
		if err != nil {
			t.Fatal(err)
		}
		proposed = append(proposed, p)
		history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialRunning})
	}
	closest := math.Inf(1)
	for i := range proposed {
		for j := range i {
			closest = min(closest, unitDist(t, bx, proposed[i], proposed[j]))
		}
	}
	t.Logf("%d proposals with up to %d pending: closest pair %.3g apart in the unit square", parallel, parallel-1, closest)
	if closest < 0.02 {
		t.Errorf("two of %d concurrent proposals are %.3g apart in the unit square, want them spread out", parallel, closest)
	}
}

func TestGPMaximize(t *testing.T) {
	negated := benchProblem{name: "-braninProblem", params: braninProblem.params, f: func(t testing.TB, p hptype.Params) float64 { return -braninProblem.f(t, p) }}
	s, err := New(&spec.Spec{Params: negated.params, Sampler: spec.Sampler{Type: spec.GP, Seed: 1}, Objective: spec.Objective{Goal: spec.Maximize}})
	if err != nil {
		t.Fatal(err)
	}
	var history []hptype.Trial
	best := math.Inf(-1)
	for n := range 30 {
		p, err := s.Sample(t.Context(), n, history)
		if err != nil {
			t.Fatal(err)
		}
		v := negated.f(t, p)
		best = max(best, v)
		history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialCompleted, Value: &v})
	}
	if best < -2 {
		t.Errorf("maximising -braninProblem for 30 trials reached %g, want at least -2 (optimum %g)", best, -braninProblem.min)
	}
}

func TestModelSamplersSpaces(t *testing.T) {
	mixed := []spec.Param{
		{Name: "lr", Type: spec.Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "units", Type: spec.Int, Min: 16, Max: 250, Step: 16},
		{Name: "batch", Type: spec.Int, Min: 1, Max: 1024, Log: true},
		{Name: "momentum", Type: spec.Float, Min: 0.5, Max: 0.5},
		{Name: "epochs", Type: spec.Constant, Value: int64(10)},
	}
	for _, typ := range []spec.SamplerType{spec.GP, spec.CMAES} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			_, err := New(&spec.Spec{Params: mixedSpace(), Sampler: spec.Sampler{Type: typ}})
			if err == nil || !strings.Contains(err.Error(), `parameter "optimizer" is categorical`) {
				t.Errorf("New with a categorical parameter: err = %v", err)
			}
			s := newSampler(t, typ, 2, mixed)
			var history []hptype.Trial
			for n := range 30 {
				p, err := s.Sample(t.Context(), n, history)
				if err != nil {
					t.Fatal(err)
				}
				lr, _ := p.Float("lr")
				units, _ := p.Int("units")
				batch, _ := p.Int("batch")
				if lr < 1e-4 || lr > 1 || units < 16 || units > 250 || (units-16)%16 != 0 || batch < 1 || batch > 1024 || p["momentum"] != 0.5 || p["epochs"] != int64(10) {
					t.Fatalf("trial %d: %v out of the space", n, p)
				}
				v := math.Abs(math.Log10(lr)+2) + math.Abs(float64(units)-100)/100
				history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialCompleted, Value: &v})
			}
			if _, err := s.Sample(t.Context(), -1, nil); err == nil {
				t.Error("Sample(-1): no error")
			}
			canceled, cancel := context.WithCancelCause(t.Context())
			cancel(fmt.Errorf("study stopped"))
			if _, err := s.Sample(canceled, 20, history); err == nil || err.Error() != "study stopped" {
				t.Errorf("Sample with a canceled context: err = %v, want its cause", err)
			}
		})
	}
}

func TestBoxRoundTrip(t *testing.T) {
	params := []spec.Param{
		{Name: "lr", Type: spec.Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "units", Type: spec.Int, Min: 16, Max: 250, Step: 16},
		{Name: "batch", Type: spec.Int, Min: 1, Max: 1024, Log: true},
		{Name: "x", Type: spec.Float, Min: -3, Max: 7},
	}
	s := newSampler(t, spec.GP, 0, params)
	b := s.(*gpSampler).box
	rnd := newSampler(t, spec.Random, 0, params)
	for n := range 200 {
		p, _ := rnd.Sample(t.Context(), n, nil)
		u, ok := b.encode(p)
		if !ok {
			t.Fatalf("encode(%v) failed", p)
		}
		q, err := b.decode(t.Context(), n, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"units", "batch"} {
			if p[name] != q[name] {
				t.Errorf("%s: %v encodes to %v and decodes to %v", name, p[name], u, q[name])
			}
		}
		for _, name := range []string{"lr", "x"} {
			x, _ := p.Float(name)
			y, _ := q.Float(name)
			if math.Abs(x-y) > 1e-9*math.Max(1, math.Abs(x)) {
				t.Errorf("%s: %v encodes to %v and decodes to %v", name, x, u, y)
			}
		}
	}
}

func TestLogEI(t *testing.T) {
	direct := func(mu, sd, best float64) float64 {
		z := (best - mu) / sd
		return sd * (z*0.5*math.Erfc(-z/math.Sqrt2) + math.Exp(-z*z/2)/math.Sqrt(2*math.Pi))
	}
	for _, z := range []float64{3, 1, 0, -1, -3, -5, -5.99, -6.01, -7, -10} {
		got := math.Exp(logEI(-z, 1, 0))
		want := direct(-z, 1, 0)
		if math.Abs(got-want) > 1e-3*want {
			t.Errorf("EI at z = %g: exp(logEI) = %g, want %g", z, got, want)
		}
	}
	if v := logEI(40, 1, 0); math.IsInf(v, 0) || math.IsNaN(v) || v > -800 {
		t.Errorf("logEI at z = -40 is %g, want a finite value near -800", v)
	}
	// Monotone in z across the switch to the series.
	prev := math.Inf(-1)
	for z := -12.0; z < 2; z += 0.01 {
		v := logH(z)
		if v <= prev {
			t.Fatalf("logH(%g) = %g is not above logH(%g) = %g", z, v, z-0.01, prev)
		}
		prev = v
	}
}

func TestLinalg(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const n = 7
	m := make([]float64, n*n)
	for i := range m {
		m[i] = r.NormFloat64()
	}
	// a = m mᵀ + I is symmetric positive definite.
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			a[i*n+j] = vecDot(m[i*n:i*n+n], m[j*n:j*n+n])
		}
		a[i*n+i]++
	}
	l := slices.Clone(a)
	if !cholesky(l, n) {
		t.Fatal("cholesky failed on a positive-definite matrix")
	}
	inv := cholInverse(l, n)
	b := make([]float64, n)
	for i := range b {
		b[i] = r.NormFloat64()
	}
	x := slices.Clone(b)
	solveLower(l, n, x)
	solveUpperT(l, n, x)
	for i := range n {
		if got := vecDot(a[i*n:i*n+n], x); math.Abs(got-b[i]) > 1e-9 {
			t.Errorf("(a x)[%d] = %g, want %g", i, got, b[i])
		}
		for j := range n {
			var s float64
			for k := range n {
				s += a[i*n+k] * inv[k*n+j]
			}
			if want := float64(boolInt(i == j)); math.Abs(s-want) > 1e-9 {
				t.Errorf("(a a⁻¹)[%d][%d] = %g, want %g", i, j, s, want)
			}
		}
	}
	vals, vecs := jacobiEigen(a, n)
	for i := range n {
		for j := range n {
			var s float64
			for k := range n {
				s += vecs[i*n+k] * vals[k] * vecs[j*n+k]
			}
			if math.Abs(s-a[i*n+j]) > 1e-9 {
				t.Errorf("(V Λ Vᵀ)[%d][%d] = %g, want %g", i, j, s, a[i*n+j])
			}
		}
	}
	notPD := []float64{1, 2, 2, 1}
	if cholesky(notPD, 2) {
		t.Error("cholesky succeeded on an indefinite matrix")
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func BenchmarkGPSample(b *testing.B) {
	for _, obs := range []int{100, 300} {
		b.Run(fmt.Sprintf("obs=%d", obs), func(b *testing.B) {
			history := runSequential(b, spec.Random, 1, hartmann6Problem, obs)
			s := newSampler(b, spec.GP, 1, hartmann6Problem.params)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sample(ctx, obs, history); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
