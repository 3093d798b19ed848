package bench

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hpsearch/hpsearch/internal/spec"
)

func TestRunSamplersDeterministic(t *testing.T) {
	cfg := SamplerConfig{
		Problems: []*Problem{Branin(), Hartmann6()},
		Samplers: []spec.SamplerType{spec.Random, spec.Sobol, spec.TPE, spec.CMAES},
		Seeds:    3,
		Evals:    []int{10, 20, 30},
		Limits:   map[spec.SamplerType]int{spec.CMAES: 20},
		Parallel: 1,
	}
	a, err := RunSamplers(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Parallel = 3
	b, err := RunSamplers(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 8 || a[0].Problem != "branin" || a[0].Sampler != spec.Random || a[7].Problem != "hartmann6" || a[7].Sampler != spec.CMAES {
		t.Fatalf("results %+v, want problem by sampler in order", a)
	}
	for i := range a {
		a[i].SecondsPerRun, b[i].SecondsPerRun = 0, 0
	}
	// JSON, because NaN (no figure) is not equal to itself.
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("one run at a time gave\n%s\nthree at a time\n%s", ja, jb)
	}
	for _, r := range a {
		if r.Regret[0].N != 3 {
			t.Errorf("%s on %s: %d seeds at 10 evaluations, want 3", r.Sampler, r.Problem, r.Regret[0].N)
		}
		for k := 1; k < len(r.Regret); k++ {
			if r.Regret[k].N > 0 && r.Regret[k].Median > r.Regret[k-1].Median {
				t.Errorf("%s on %s: median regret rose from %g to %g", r.Sampler, r.Problem, r.Regret[k-1].Median, r.Regret[k].Median)
			}
		}
		if r.Regret[0].Q1 < 0 {
			t.Errorf("%s on %s: negative regret %+v", r.Sampler, r.Problem, r.Regret[0])
		}
	}
	// The capped sampler ran 20 evaluations and reports nothing at 30.
	if c := a[7]; c.Evals != 20 || c.Regret[2].N != 0 || c.Regret[1].N != 3 {
		t.Errorf("cmaes capped at 20: %+v", c)
	}
}

func TestRunSamplerSameSeedSameValues(t *testing.T) {
	a, err := RunSampler(t.Context(), Ackley(5), spec.TPEMultivariate, 4, 30)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunSampler(t.Context(), Ackley(5), spec.TPEMultivariate, 4, 30)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs with seed 4 differ:\n%v\n%v", a, b)
	}
	c, err := RunSampler(t.Context(), Ackley(5), spec.TPEMultivariate, 5, 30)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 4 and 5 gave the same values")
	}
}

func TestTPEBeatsRandomOnBranin(t *testing.T) {
	res, err := RunSamplers(t.Context(), SamplerConfig{
		Problems: []*Problem{Branin()},
		Samplers: []spec.SamplerType{spec.Random, spec.TPE},
		Seeds:    5,
		Evals:    []int{100},
	})
	if err != nil {
		t.Fatal(err)
	}
	rnd, tpe := res[0].Regret[0], res[1].Regret[0]
	t.Logf("median regret after 100 evaluations over 5 seeds: random %.4g, tpe %.4g", rnd.Median, tpe.Median)
	if tpe.Median >= rnd.Median {
		t.Errorf("tpe's median regret %g does not beat random's %g", tpe.Median, rnd.Median)
	}
}

func TestSamplerConfigRejectsUnsortedEvals(t *testing.T) {
	for _, evals := range [][]int{{50, 25}, {0, 10}, {10, 10}} {
		if _, err := RunSamplers(t.Context(), SamplerConfig{Evals: evals}); err == nil {
			t.Errorf("evals %v accepted", evals)
		}
	}
}
