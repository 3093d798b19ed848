package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

var samplerTypes = []spec.SamplerType{spec.Random, spec.Sobol, spec.Grid}

// newSampler returns the sampler typ over params, seeded with seed.
func newSampler(t testing.TB, typ spec.SamplerType, seed int64, params []spec.Param) Sampler {
	t.Helper()
	s, err := New(&spec.Spec{Params: params, Sampler: spec.Sampler{Type: typ, Seed: seed}})
	if err != nil {
		t.Fatalf("New(%s): %v", typ, err)
	}
	return s
}

// sampleAll returns trials 0 .. n-1 of s, in order.
func sampleAll(t testing.TB, s Sampler, n int) []hptype.Params {
	t.Helper()
	out := make([]hptype.Params, n)
	for i := range n {
		p, err := s.Sample(t.Context(), i, nil)
		if err != nil {
			t.Fatalf("Sample(%d): %v", i, err)
		}
		out[i] = p
	}
	return out
}

// mixedSpace has a parameter of every kind and scale. Its floats have
// points so that the grid sampler accepts it.
func mixedSpace() []spec.Param {
	return []spec.Param{
		{Name: "lr", Type: spec.Float, Min: 1e-4, Max: 1, Log: true, Points: []float64{1e-4, 1e-3, 1e-2}},
		{Name: "dropout", Type: spec.Float, Min: 0, Max: 0.5, Points: []float64{0, 0.25, 0.5}},
		{Name: "units", Type: spec.Int, Min: 16, Max: 250, Step: 16},
		{Name: "batch", Type: spec.Int, Min: 1, Max: 1024, Log: true, Step: 1},
		{Name: "optimizer", Type: spec.Categorical, Values: []any{"adam", "sgd", "rmsprop"}},
		{Name: "width", Type: spec.Categorical, Values: []any{int64(1), 2.5, true}},
		{Name: "epochs", Type: spec.Constant, Value: int64(10)},
	}
}

// conditionalSpace has conditional parameters of every kind, a chain of
// conditions, and a condition that compares an int with a float.
func conditionalSpace() []spec.Param {
	return []spec.Param{
		{Name: "optimizer", Type: spec.Categorical, Values: []any{"adam", "sgd"}},
		{Name: "momentum", Type: spec.Float, Min: 0.5, Max: 0.99, Points: []float64{0.9, 0.99},
			When: []spec.Condition{{Param: "optimizer", Values: []any{"sgd"}}}},
		{Name: "mode", Type: spec.Constant, Value: "fast",
			When: []spec.Condition{{Param: "optimizer", Values: []any{"adam"}}}},
		{Name: "layers", Type: spec.Int, Min: 1, Max: 3},
		{Name: "units3", Type: spec.Int, Min: 32, Max: 64, Step: 32,
			When: []spec.Condition{{Param: "layers", Values: []any{3.0}}}},
		{Name: "dropout3", Type: spec.Categorical, Values: []any{0.1, 0.2},
			When: []spec.Condition{{Param: "units3", Values: []any{int64(64)}}, {Param: "mode", Values: []any{"fast"}}}},
	}
}

// checkConditional fails unless p has exactly the parameters of
// conditionalSpace whose conditions hold.
func checkConditional(t *testing.T, n int, p hptype.Params) {
	t.Helper()
	want := map[string]bool{
		"optimizer": true,
		"momentum":  p["optimizer"] == "sgd",
		"mode":      p["optimizer"] == "adam",
		"layers":    true,
		"units3":    p["layers"] == int64(3),
		"dropout3":  p["units3"] == int64(64) && p["mode"] == "fast",
	}
	for name, present := range want {
		if _, ok := p[name]; ok != present {
			t.Errorf("trial %d %v: %s present = %v, want %v", n, p, name, ok, present)
		}
	}
	if len(p) > len(want) {
		t.Errorf("trial %d %v: unexpected parameters", n, p)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		typ     spec.SamplerType
		params  []spec.Param
		wantErr string
	}{
		{name: "default is random", typ: "", params: mixedSpace()},
		{name: "random", typ: spec.Random, params: mixedSpace()},
		{name: "sobol", typ: spec.Sobol, params: mixedSpace()},
		{name: "grid", typ: spec.Grid, params: mixedSpace()},
		{name: "empty space", typ: spec.Sobol},
		{name: "unknown sampler", typ: "bayes", params: mixedSpace(), wantErr: `unknown sampler "bayes"`},
		{name: "grid float without points", typ: spec.Grid,
			params:  []spec.Param{{Name: "lr", Type: spec.Float, Min: 0, Max: 1}},
			wantErr: `float parameter "lr" has no points`},
		{name: "sobol too many dimensions", typ: spec.Sobol, params: floats(65),
			wantErr: "65 non-constant parameters and the sampler supports at most 64"},
		{name: "sobol constants have no dimension", typ: spec.Sobol,
			params: append(floats(64), spec.Param{Name: "c", Type: spec.Constant, Value: "x"})},
		{name: "duplicate", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Constant, Value: 1.0}, {Name: "a", Type: spec.Constant, Value: 2.0}},
			wantErr: `parameter "a" is declared twice`},
		{name: "unknown type", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: "complex"}},
			wantErr: `parameter "a": unknown type "complex"`},
		{name: "float bounds", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Float, Min: 2, Max: 1}},
			wantErr: `parameter "a": bounds [2, 1]`},
		{name: "float log needs positive min", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Float, Min: 0, Max: 1, Log: true}},
			wantErr: `parameter "a": log scale needs min > 0`},
		{name: "int bounds", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Int, Min: 0.5, Max: 3}},
			wantErr: `parameter "a": bounds [0.5, 3]`},
		{name: "int log step", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Int, Min: 1, Max: 64, Log: true, Step: 2}},
			wantErr: `parameter "a": log scale needs step 1`},
		{name: "int negative step", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Int, Min: 1, Max: 64, Step: -1}},
			wantErr: `parameter "a": step -1 is negative`},
		{name: "categorical without values", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Categorical}},
			wantErr: `parameter "a": categorical parameter has no values`},
		{name: "constant without value", typ: spec.Random,
			params:  []spec.Param{{Name: "a", Type: spec.Constant}},
			wantErr: `parameter "a": value <nil> is <nil>`},
		{name: "condition on a later parameter", typ: spec.Random,
			params: []spec.Param{
				{Name: "a", Type: spec.Constant, Value: 1.0, When: []spec.Condition{{Param: "b", Values: []any{"x"}}}},
				{Name: "b", Type: spec.Constant, Value: "x"},
			},
			wantErr: `parameter "a": condition on "b", which is not a parameter declared before it`},
		{name: "grid too large", typ: spec.Grid,
			params: []spec.Param{
				{Name: "a", Type: spec.Int, Min: 0, Max: 1 << 40},
				{Name: "b", Type: spec.Int, Min: 0, Max: 1 << 40},
			},
			wantErr: "the grid has more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(&spec.Spec{Params: tt.params, Sampler: spec.Sampler{Type: tt.typ, Seed: 1}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if _, err := s.Sample(t.Context(), 0, nil); err != nil {
				t.Fatalf("Sample(0): %v", err)
			}
		})
	}
}

// floats returns n float parameters.
func floats(n int) []spec.Param {
	ps := make([]spec.Param, n)
	for i := range ps {
		ps[i] = spec.Param{Name: fmt.Sprintf("x%d", i), Type: spec.Float, Min: 0, Max: 1}
	}
	return ps
}

func TestSampleDeterministic(t *testing.T) {
	const trials = 100
	for _, typ := range samplerTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			for _, params := range [][]spec.Param{mixedSpace(), conditionalSpace()} {
				trials := trials
				if typ == spec.Grid {
					size, err := GridSize(&spec.Spec{Params: params})
					if err != nil {
						t.Fatal(err)
					}
					trials = min(trials, size)
				}
				want := sampleAll(t, newSampler(t, typ, 42, params), trials)

				// A fresh sampler, trials in shuffled order, concurrently.
				s := newSampler(t, typ, 42, params)
				order := rand.New(rand.NewPCG(1, 2)).Perm(trials)
				got := make([]hptype.Params, trials)
				var wg sync.WaitGroup
				for w := range 4 {
					wg.Go(func() {
						for _, n := range order[w*trials/4 : (w+1)*trials/4] {
							p, err := s.Sample(t.Context(), n, nil)
							if err != nil {
								t.Errorf("Sample(%d): %v", n, err)
							}
							got[n] = p
						}
					})
				}
				wg.Wait()
				for n := range trials {
					if !reflect.DeepEqual(got[n], want[n]) {
						t.Errorf("trial %d: shuffled %v, in order %v", n, got[n], want[n])
					}
				}
			}
		})
	}
}

func TestSampleSeed(t *testing.T) {
	const trials = 100
	for _, typ := range []spec.SamplerType{spec.Random, spec.Sobol} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			a := sampleAll(t, newSampler(t, typ, 1, mixedSpace()), trials)
			b := sampleAll(t, newSampler(t, typ, 2, mixedSpace()), trials)
			for n := range trials {
				if a[n]["lr"] == b[n]["lr"] {
					t.Errorf("trial %d: lr %v with seeds 1 and 2", n, a[n]["lr"])
				}
			}
		})
	}
}

func TestSampleBoundsAndTypes(t *testing.T) {
	const trials = 2048
	for _, typ := range samplerTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			got := sampleAll(t, newSampler(t, typ, 7, mixedSpace()), trials)
			for n, p := range got {
				checkMixedParams(t, n, p)
			}
			if typ == spec.Grid {
				return
			}
			// Distribution: every value reached, roughly evenly, and
			// log scales centred on the geometric mean.
			for name, values := range map[string][]any{
				"optimizer": {"adam", "sgd", "rmsprop"},
				"width":     {int64(1), 2.5, true},
				"units":     {int64(16), int64(128), int64(240)},
				"batch":     {int64(1), int64(2), int64(3)},
			} {
				seen := map[any]int{}
				for _, p := range got {
					seen[p[name]]++
				}
				for _, v := range values {
					if seen[v] == 0 {
						t.Errorf("%s = %v never sampled", name, v)
					}
				}
				if name == "optimizer" || name == "width" {
					for _, v := range values {
						if f := float64(seen[v]) / trials; math.Abs(f-1.0/3) > 0.05 {
							t.Errorf("%s = %v in %.3f of trials, want about 1/3", name, v, f)
						}
					}
				}
			}
			if top := slices.MaxFunc(got, func(p, q hptype.Params) int {
				return cmp.Compare(p["batch"].(int64), q["batch"].(int64))
			})["batch"].(int64); top <= 512 {
				t.Errorf("largest batch = %d, want some in (512, 1024]", top)
			}
			if med := median(got, "lr"); med < 10e-3/1.5 || med > 10e-3*1.5 {
				t.Errorf("median lr = %v, want about 1e-2 (log-uniform on [1e-4, 1])", med)
			}
			if med := median(got, "dropout"); math.Abs(med-0.25) > 0.02 {
				t.Errorf("median dropout = %v, want about 0.25 (uniform on [0, 0.5])", med)
			}
			// Log-uniform on [0.5, 1024.5] has its median at sqrt(0.5 * 1024.5).
			if med := median(got, "batch"); med < 16 || med > 32 {
				t.Errorf("median batch = %v, want about 22.6", med)
			}
		})
	}
}

// median returns the median of parameter name over ps.
func median(ps []hptype.Params, name string) float64 {
	xs := make([]float64, 0, len(ps))
	for _, p := range ps {
		x, err := p.Float(name)
		if err == nil {
			xs = append(xs, x)
		}
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func TestSampleConditional(t *testing.T) {
	for _, typ := range samplerTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			trials := 64
			if typ == spec.Grid {
				trials = 13 // every point; TestGridConditional counts them
			}
			got := sampleAll(t, newSampler(t, typ, 3, conditionalSpace()), trials)
			seen := map[string]int{}
			for n, p := range got {
				checkConditional(t, n, p)
				for name := range p {
					seen[name]++
				}
			}
			for _, name := range []string{"momentum", "mode", "units3", "dropout3"} {
				if seen[name] == 0 || seen[name] == len(got) {
					t.Errorf("%s present in %d of %d trials, want some but not all", name, seen[name], len(got))
				}
			}
		})
	}
}

func TestSampleErrors(t *testing.T) {
	canceled, cancel := context.WithCancelCause(t.Context())
	cancel(fmt.Errorf("study stopped"))
	for _, typ := range samplerTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			s := newSampler(t, typ, 0, mixedSpace())
			if _, err := s.Sample(t.Context(), -1, nil); err == nil {
				t.Error("Sample(-1): no error")
			}
			if _, err := s.Sample(canceled, 0, nil); err == nil || err.Error() != "study stopped" {
				t.Errorf("Sample with a canceled context: err = %v, want its cause", err)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int64(3), 3.0, true},
		{3.0, int64(3), true},
		{int64(3), 3, true},
		{int64(3), 3.5, false},
		{int64(1<<53 + 1), int64(1 << 53), false},
		{"3", int64(3), false},
		{"adam", "adam", true},
		{"adam", "sgd", false},
		{true, true, true},
		{true, int64(1), false},
		{false, "false", false},
	}
	for _, tt := range tests {
		if got := spec.SameValue(tt.a, tt.b); got != tt.want {
			t.Errorf("SameValue(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	// conditionalSpace's conditions refer to mixedSpace's optimizer.
	params := append(mixedSpace(), conditionalSpace()[1:]...)
	for _, typ := range samplerTypes {
		b.Run(string(typ), func(b *testing.B) {
			s := newSampler(b, typ, 1, params)
			ctx := context.Background()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sample(ctx, n, nil); err != nil {
					b.Fatal(err)
				}
				n = (n + 1) % 1_000_000
			}
		})
	}
}

// checkMixedParams checks the types and bounds of a trial of mixedSpace.
func checkMixedParams(t *testing.T, n int, p hptype.Params) {
	t.Helper()
	if len(p) != len(mixedSpace()) {
		t.Fatalf("trial %d: %v: want %d parameters", n, p, len(mixedSpace()))
	}
	if lr, ok := p["lr"].(float64); !ok || lr < 1e-4 || lr > 1 {
		t.Errorf("trial %d: lr = %#v, want a float64 in [1e-4, 1]", n, p["lr"])
	}
	if d, ok := p["dropout"].(float64); !ok || d < 0 || d > 0.5 {
		t.Errorf("trial %d: dropout = %#v, want a float64 in [0, 0.5]", n, p["dropout"])
	}
	if u, ok := p["units"].(int64); !ok || u < 16 || u > 240 || u%16 != 0 {
		t.Errorf("trial %d: units = %#v, want an int64 multiple of 16 in [16, 240]", n, p["units"])
	}
	if b, ok := p["batch"].(int64); !ok || b < 1 || b > 1024 {
		t.Errorf("trial %d: batch = %#v, want an int64 in [1, 1024]", n, p["batch"])
	}
	if o := p["optimizer"]; !slices.Contains([]any{"adam", "sgd", "rmsprop"}, o) {
		t.Errorf("trial %d: optimizer = %#v", n, o)
	}
	if w := p["width"]; !slices.Contains([]any{int64(1), 2.5, true}, w) {
		t.Errorf("trial %d: width = %#v", n, w)
	}
	if e := p["epochs"]; e != int64(10) {
		t.Errorf("trial %d: epochs = %#v, want int64(10)", n, e)
	}
}
