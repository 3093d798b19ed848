package search

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

var tpeTypes = []spec.SamplerType{spec.TPE, spec.TPEMultivariate}

// newTPESampler returns a TPE sampler of type typ over params, minimising.
func newTPESampler(t testing.TB, typ spec.SamplerType, seed int64, params []spec.Param, opts ...tpeOption) Sampler {
	t.Helper()
	s, err := newTPE(&spec.Spec{
		Params:    params,
		Objective: spec.Objective{Metric: "loss", Goal: spec.Minimize},
		Sampler:   spec.Sampler{Type: typ, Seed: seed},
	}, opts...)
	if err != nil {
		t.Fatalf("newTPE(%s): %v", typ, err)
	}
	return s
}

// completed returns a completed trial.
func completed(n int, p hptype.Params, v float64) hptype.Trial {
	return hptype.Trial{Number: n, Params: p, State: hptype.TrialCompleted, Value: &v}
}

// optimize drives s sequentially for trials evaluations of f and returns
// the history.
func optimize(t testing.TB, s Sampler, trials int, f func(hptype.Params) float64) []hptype.Trial {
	t.Helper()
	var history []hptype.Trial
	for n := range trials {
		p, err := s.Sample(t.Context(), n, history)
		if err != nil {
			t.Fatalf("Sample(%d): %v", n, err)
		}
		history = append(history, completed(n, p, f(p)))
	}
	return history
}

// best returns the smallest value in history.
func best(history []hptype.Trial) float64 {
	b := math.Inf(1)
	for _, tr := range history {
		b = math.Min(b, *tr.Value)
	}
	return b
}

// mixedLoss is an objective over mixedSpace with its optimum inside.
func mixedLoss(p hptype.Params) float64 {
	lr, _ := p.Float("lr")
	d, _ := p.Float("dropout")
	u, _ := p.Float("units")
	b, _ := p.Float("batch")
	v := math.Pow(math.Log10(lr)+2.5, 2) + math.Pow(d-0.1, 2) + math.Pow((u-100)/100, 2) + math.Pow(math.Log2(b)-5, 2)/10
	if p["optimizer"] != "adam" {
		v += 0.5
	}
	return v
}

// conditionalLoss is an objective over conditionalSpace.
func conditionalLoss(p hptype.Params) float64 {
	m, err := p.Float("momentum")
	if err != nil {
		m = 0.7
	}
	l, _ := p.Float("layers")
	return math.Abs(m-0.9) + l/10
}

func TestTPEStartupIsRandom(t *testing.T) {
	random := newSampler(t, spec.Random, 5, mixedSpace())
	for _, typ := range tpeTypes {
		s := newTPESampler(t, typ, 5, mixedSpace())
		var history []hptype.Trial
		for n := range 20 {
			p, err := s.Sample(t.Context(), n, history)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := random.Sample(t.Context(), n, nil)
			if isRandom := reflect.DeepEqual(p, want); isRandom != (n < tpeStartup) {
				t.Errorf("%s: trial %d (after %d completed) equal to the random sampler's: %v", typ, n, n, isRandom)
			}
			// Failed and running trials do not count towards the startup.
			history = append(history, completed(n, p, mixedLoss(p)),
				hptype.Trial{Number: 1000 + n, Params: p, State: hptype.TrialFailed},
				hptype.Trial{Number: 2000 + n, Params: p, State: hptype.TrialRunning})
		}
	}
}

func TestTPEDeterministic(t *testing.T) {
	for _, typ := range tpeTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			for i, params := range [][]spec.Param{mixedSpace(), conditionalSpace()} {
				loss := []func(hptype.Params) float64{mixedLoss, conditionalLoss}[i]
				history := optimize(t, newTPESampler(t, typ, 11, params), 40, loss)
				history = append(history, hptype.Trial{Number: 40, Params: history[39].Params, State: hptype.TrialRunning})
				a, b := newTPESampler(t, typ, 11, params), newTPESampler(t, typ, 11, params)
				other := newTPESampler(t, typ, 12, params)
				shuffled := slices.Clone(history)
				rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				differs := 0
				for n := 41; n < 61; n++ {
					pa, err := a.Sample(t.Context(), n, history)
					if err != nil {
						t.Fatal(err)
					}
					pb, _ := b.Sample(t.Context(), n, shuffled)
					if !reflect.DeepEqual(pa, pb) {
						t.Errorf("trial %d: %v, then %v with the same seed and history in another order", n, pa, pb)
					}
					if po, _ := other.Sample(t.Context(), n, history); !reflect.DeepEqual(pa, po) {
						differs++
					}
				}
				if i == 0 && differs < 15 {
					t.Errorf("another seed changed %d of 20 proposals, want most", differs)
				}
			}
		})
	}
}

func TestTPEBoundsAndConditional(t *testing.T) {
	for _, typ := range tpeTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			history := optimize(t, newTPESampler(t, typ, 3, mixedSpace()), 200, mixedLoss)
			seen := map[string]map[any]bool{}
			for n, tr := range history[tpeStartup:] {
				p := tr.Params
				checkMixedParams(t, n, p)
				for _, name := range []string{"optimizer", "width"} {
					if seen[name] == nil {
						seen[name] = map[any]bool{}
					}
					seen[name][p[name]] = true
				}
			}
			// The prior keeps every choice possible, but the model
			// prefers the good one.
			if len(seen["width"]) != 3 {
				t.Errorf("width took values %v, want all 3", seen["width"])
			}
			adam := 0
			for _, tr := range history[100:] {
				if tr.Params["optimizer"] == "adam" {
					adam++
				}
			}
			if adam < 60 {
				t.Errorf("optimizer = adam in %d of the last 100 trials, want most", adam)
			}
			if b := best(history); b > 0.15 {
				t.Errorf("best value %v after 200 trials, want < 0.15", b)
			}

			// Conditional parameters: present exactly when active.
			cond := optimize(t, newTPESampler(t, typ, 3, conditionalSpace()), 60, conditionalLoss)
			present := map[string]int{}
			for n, tr := range cond {
				checkConditional(t, n, tr.Params)
				for name := range tr.Params {
					present[name]++
				}
			}
			for _, name := range []string{"momentum", "mode", "units3", "dropout3"} {
				if present[name] == 0 || present[name] == len(cond) {
					t.Errorf("%s present in %d of %d trials, want some but not all", name, present[name], len(cond))
				}
			}
		})
	}
}

func TestTPEMaximize(t *testing.T) {
	params := floats(1)
	for _, goal := range []spec.Goal{spec.Minimize, spec.Maximize} {
		s, err := New(&spec.Spec{Params: params, Objective: spec.Objective{Goal: goal}, Sampler: spec.Sampler{Type: spec.TPE}})
		if err != nil {
			t.Fatal(err)
		}
		h := optimize(t, s, 60, func(p hptype.Params) float64 { return p["x0"].(float64) })
		var xs []float64
		for _, tr := range h[30:] {
			xs = append(xs, *tr.Value)
		}
		slices.Sort(xs)
		if m := xs[len(xs)/2]; goal == spec.Minimize && m > 0.2 || goal == spec.Maximize && m < 0.8 {
			t.Errorf("%s x: median of trials 30-59 is %v", goal, m)
		}
	}
}

func TestTPEErrors(t *testing.T) {
	s := newTPESampler(t, spec.TPE, 0, floats(2))
	if _, err := s.Sample(t.Context(), -1, nil); err == nil {
		t.Error("Sample(-1) succeeded")
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := s.Sample(ctx, 0, nil); !errors.Is(err, cause) {
		t.Errorf("Sample with a cancelled context = %v, want %v", err, cause)
	}
	if _, err := newTPE(&spec.Spec{Params: []spec.Param{{Name: "x", Type: spec.Float, Min: 1, Max: 0}}}); err == nil {
		t.Error("newTPE accepted min > max")
	}
}

// meanNearest is the mean distance from each point to its nearest other
// point.
func meanNearest(pts [][2]float64) float64 {
	var sum float64
	for i, p := range pts {
		d := math.Inf(1)
		for j, q := range pts {
			if i != j {
				d = math.Min(d, math.Hypot(p[0]-q[0], p[1]-q[1]))
			}
		}
		sum += d
	}
	return sum / float64(len(pts))
}

// TestTPEConstantLiar proposes 100 trials at once, after 20 completed
// ones: each proposal sees the earlier ones as running. With the liar they
// spread about as well as 100 sequential proposals; without it they pile
// up where the completed trials were good.
func TestTPEConstantLiar(t *testing.T) {
	params := floats(2)
	f := func(p hptype.Params) float64 {
		x, y := p["x0"].(float64), p["x1"].(float64)
		return branin(15*x-5, 15*y)
	}
	point := func(p hptype.Params) [2]float64 { return [2]float64{p["x0"].(float64), p["x1"].(float64)} }
	for _, typ := range tpeTypes {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			start := optimize(t, newTPESampler(t, typ, 1, params), 20, f)
			batch := func(s Sampler) float64 {
				history := slices.Clone(start)
				var pts [][2]float64
				for n := 20; n < 120; n++ {
					p, err := s.Sample(t.Context(), n, history)
					if err != nil {
						t.Fatal(err)
					}
					history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialRunning})
					pts = append(pts, point(p))
				}
				return meanNearest(pts)
			}
			liar := batch(newTPESampler(t, typ, 1, params))
			noLiar := batch(newTPESampler(t, typ, 1, params, tpeNoLiar()))
			var seq [][2]float64
			for _, tr := range optimize(t, newTPESampler(t, typ, 1, params), 120, f)[20:] {
				seq = append(seq, point(tr.Params))
			}
			sequential := meanNearest(seq)
			t.Logf("mean nearest-neighbour distance of 100 proposals: sequential %.4f, constant liar %.4f, no liar %.4f", sequential, liar, noLiar)
			if liar < 0.5*sequential {
				t.Errorf("constant liar spread %.4f < half the sequential %.4f", liar, sequential)
			}
			if noLiar >= liar {
				t.Errorf("without the liar spread %.4f >= with it %.4f", noLiar, liar)
			}
		})
	}
}

// TestTPEBeatsRandom compares the median over seeds of the best value
// after 100 sequential evaluations.
func TestTPEBeatsRandom(t *testing.T) {
	seeds := 10
	if testing.Short() {
		seeds = 4
	}
	problems := []struct {
		name   string
		params []spec.Param
		f      func(hptype.Params) float64
	}{
		{"branin", []spec.Param{
			{Name: "x1", Type: spec.Float, Min: -5, Max: 10},
			{Name: "x2", Type: spec.Float, Min: 0, Max: 15},
		}, func(p hptype.Params) float64 { return branin(p["x1"].(float64), p["x2"].(float64)) }},
		{"hartmann6", floats(6), func(p hptype.Params) float64 {
			var x [6]float64
			for i := range x {
				x[i] = p[floats(6)[i].Name].(float64)
			}
			return hartmann6(x)
		}},
	}
	for _, pr := range problems {
		for _, typ := range tpeTypes {
			t.Run(pr.name+"/"+string(typ), func(t *testing.T) {
				t.Parallel()
				var tpe, random []float64
				for seed := range int64(seeds) {
					tpe = append(tpe, best(optimize(t, newTPESampler(t, typ, seed, pr.params), 100, pr.f)))
					random = append(random, best(optimize(t, newSampler(t, spec.Random, seed, pr.params), 100, pr.f)))
				}
				mt, mr := medianOf(tpe), medianOf(random)
				t.Logf("median best of 100 over %d seeds: %s %.5f, random %.5f", seeds, typ, mt, mr)
				if mt >= mr {
					t.Errorf("%s median best %.5f, not better than random's %.5f", typ, mt, mr)
				}
			})
		}
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkTPESample1000 proposes a trial after 1000 completed ones (and
// 20 running) over mixedSpace.
func BenchmarkTPESample1000(b *testing.B) {
	for _, typ := range tpeTypes {
		b.Run(string(typ), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			random := newSampler(b, spec.Random, 1, mixedSpace())
			var history []hptype.Trial
			for n := range 1020 {
				p, _ := random.Sample(b.Context(), n, nil)
				if n < 1000 {
					history = append(history, completed(n, p, mixedLoss(p)+r.Float64()))
				} else {
					history = append(history, hptype.Trial{Number: n, Params: p, State: hptype.TrialRunning})
				}
			}
			s := newTPESampler(b, typ, 1, mixedSpace())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sample(b.Context(), 1020, history); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
