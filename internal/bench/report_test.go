package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/spec"
)

func sum(median float64) Summary {
	return Summary{Median: median, Q1: median / 2, Q3: median * 2, N: 5}
}

func testReport() *Report {
	regret := func(at100 float64) []Summary {
		return []Summary{sum(4), sum(2), sum(at100), Summarize([]float64{math.NaN()})}
	}
	at := []int{25, 50, 100, 200}
	return &Report{
		Command: "hpsearch bench --seeds=5",
		Seconds: 75,
		Machine: "2 CPUs",
		Samplers: []SamplerResult{
			{Problem: "branin", Optimum: 0.397887, Sampler: spec.Random, Seeds: 5, At: at, Regret: regret(1)},
			{Problem: "branin", Optimum: 0.397887, Sampler: spec.TPE, Seeds: 5, At: at, Regret: regret(0.1)},
			{Problem: "branin", Optimum: 0.397887, Sampler: spec.GP, Seeds: 5, At: at, Regret: regret(0.01)},
			{Problem: "hartmann6", Optimum: -3.32237, Sampler: spec.Random, Seeds: 5, At: at, Regret: regret(1)},
			{Problem: "hartmann6", Optimum: -3.32237, Sampler: spec.TPE, Seeds: 5, At: at, Regret: regret(2)},
			{Problem: "hartmann6", Optimum: -3.32237, Sampler: spec.TPEMultivariate, Seeds: 5, At: at, Regret: regret(3)},
		},
		SamplerSetup: &SamplerSetup{Seeds: 5, Evals: at, Limits: map[spec.SamplerType]int{spec.GP: 100}},
		Schedulers: []SchedulerResult{
			{Scheduler: FullTraining, Seeds: 5, Regret: sum(0.01), Gap: sum(0), Within: 5, Resource: sum(1), Makespan: sum(1)},
			{Scheduler: "asha", Seeds: 5, Regret: sum(0.012), Gap: sum(0.02), Within: 4, Resource: sum(0.3), Makespan: sum(0.35)},
		},
		SchedulerSetup: &SchedulerSetup{Seeds: 5, Configs: 81, Workers: 8, Max: 81, Min: 9, Noise: 0.02},
	}
}

func TestEvaluate(t *testing.T) {
	checks := testReport().Evaluate()
	want := []struct {
		criterion string
		pass      bool
	}{
		{"tpe beats random on branin after 100 evaluations", true},
		{"tpe beats random on hartmann6 after 100 evaluations", false},
		{"tpe-multivariate or gp at least as good as tpe on hartmann6 after 100 evaluations", false},
		{"tpe-multivariate or gp at least as good as tpe on branin after 100 evaluations", true},
		{"asha's best final value within 5.0% of full training's, with under 40% of its resource", true},
	}
	if len(checks) != len(want) {
		t.Fatalf("checks %+v, want %d", checks, len(want))
	}
	for i, w := range want {
		if checks[i].Criterion != w.criterion || checks[i].Pass != w.pass {
			t.Errorf("check %d: %q pass %v, want %q pass %v", i, checks[i].Criterion, checks[i].Pass, w.criterion, w.pass)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	r := testReport()
	r.Checks = r.Evaluate()
	var b strings.Builder
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Command: `hpsearch bench --seeds=5`; it took 1 min 15 s on 2 CPUs.\n",
		"The gp sampler ran 100 evaluations only",
		"| problem (minimum) | sampler | 25 | 50 | 100 | 200 | s/run |\n|---|---|---:|---:|---:|---:|---:|\n",
		"| branin (0.397887) | random | 4 [2, 8] | 2 [1, 4] | 1 [0.5, 2] | — | 0.00 |\n",
		"|  | tpe | 4 [2, 8] | 2 [1, 4] | 0.1 [0.05, 0.2] | — | 0.00 |\n",
		"| hartmann6 (-3.32237) | random |",
		"asha: rungs at epochs 9, 27, ..., reduction factor 3.",
		"| asha | 0.012 [0.006, 0.024] | 2.0% [1.0%, 4.0%] | 4/5 | 30.0% [15.0%, 60.0%] | 35.0% [17.5%, 70.0%] |",
		"- tpe beats random on hartmann6 after 100 evaluations: **no** (median regret 2 vs 1)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "through the orchestrator") {
		t.Errorf("the report has an orchestrator table without orchestrated runs:\n%s", out)
	}
	// Every table row has as many cells as its header.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| problem") || strings.HasPrefix(line, "| scheduler") {
			continue
		}
		if strings.HasPrefix(line, "| branin") || strings.HasPrefix(line, "|  |") {
			if n := strings.Count(line, "|"); n != 8 {
				t.Errorf("row %q has %d cells, want 7", line, n-1)
			}
		}
	}
}
