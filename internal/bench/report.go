package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hpsearch/hpsearch/internal/spec"
)

// Report is the outcome of a benchmark run.
type Report struct {
	// Command is the command line that made the report.
	Command string `json:"command"`
	// Seconds is the wall time of the run; Machine describes where it ran.
	Seconds float64 `json:"seconds"`
	Machine string  `json:"machine"`
	// Samplers, Schedulers and Orchestrated are the parts that ran, with
	// their setups.
	Samplers          []SamplerResult      `json:"samplers,omitempty"`
	SamplerSetup      *SamplerSetup        `json:"sampler_setup,omitempty"`
	Schedulers        []SchedulerResult    `json:"schedulers,omitempty"`
	SchedulerSetup    *SchedulerSetup      `json:"scheduler_setup,omitempty"`
	Orchestrated      []OrchestratorResult `json:"orchestrated,omitempty"`
	OrchestratedSetup *OrchestratedSetup   `json:"orchestrated_setup,omitempty"`
	Checks            []Check              `json:"checks,omitempty"`
}

// SamplerSetup is how the sampler benchmark ran.
type SamplerSetup struct {
	Seeds  int                      `json:"seeds"`
	Evals  []int                    `json:"evals"`
	Limits map[spec.SamplerType]int `json:"limits,omitempty"`
}

// SchedulerSetup is how the scheduler benchmark ran.
type SchedulerSetup struct {
	Seeds   int     `json:"seeds"`
	Configs int     `json:"configs"`
	Workers int     `json:"workers"`
	Max     float64 `json:"max"`
	Min     float64 `json:"min"`
	Noise   float64 `json:"noise"`
}

// OrchestratedSetup is how the orchestrated benchmark ran.
type OrchestratedSetup struct {
	Seeds       int    `json:"seeds"`
	Evals       []int  `json:"evals"`
	ExamplesDir string `json:"examples_dir"`
}

// Check is one of the criteria the benchmark is meant to show, evaluated on
// the figures.
type Check struct {
	Criterion string `json:"criterion"`
	Pass      bool   `json:"pass"`
	Detail    string `json:"detail"`
}

// checkEvals is the evaluation count at which the sampler criteria are
// judged.
const checkEvals = 100

// Evaluate returns the checks the report's figures allow:
//
//   - TPE's median regret after 100 evaluations beats random search's on
//     every problem;
//   - multivariate TPE or GP-BO is at least as good as TPE there on
//     Hartmann6 and Branin;
//   - ASHA's best final value is within 5% of full training's (median
//     over seeds), with under 40% of its resource (median).
//
// A check is left out when a figure it needs was not measured.
func (r *Report) Evaluate() []Check {
	var checks []Check
	at := func(problem string, typ spec.SamplerType) (float64, bool) {
		for _, s := range r.Samplers {
			if s.Problem == problem && s.Sampler == typ {
				if k := slices.Index(s.At, checkEvals); k >= 0 && s.Regret[k].N > 0 {
					return s.Regret[k].Median, true
				}
			}
		}
		return 0, false
	}
	var problems []string
	for _, s := range r.Samplers {
		if !slices.Contains(problems, s.Problem) {
			problems = append(problems, s.Problem)
		}
	}
	for _, p := range problems {
		tpe, ok1 := at(p, spec.TPE)
		rnd, ok2 := at(p, spec.Random)
		if ok1 && ok2 {
			checks = append(checks, Check{
				Criterion: fmt.Sprintf("tpe beats random on %s after %d evaluations", p, checkEvals),
				Pass:      tpe < rnd,
				Detail:    fmt.Sprintf("median regret %s vs %s", num(tpe), num(rnd)),
			})
		}
	}
	for _, p := range []string{"hartmann6", "branin"} {
		tpe, ok := at(p, spec.TPE)
		if !ok {
			continue
		}
		var best []string
		pass, measured := false, false
		for _, typ := range []spec.SamplerType{spec.TPEMultivariate, spec.GP} {
			if v, ok := at(p, typ); ok {
				measured = true
				pass = pass || v <= tpe
				best = append(best, fmt.Sprintf("%s %s", typ, num(v)))
			}
		}
		if measured {
			checks = append(checks, Check{
				Criterion: fmt.Sprintf("tpe-multivariate or gp at least as good as tpe on %s after %d evaluations", p, checkEvals),
				Pass:      pass,
				Detail:    fmt.Sprintf("median regret %s vs tpe %s", strings.Join(best, ", "), num(tpe)),
			})
		}
	}
	for _, s := range r.Schedulers {
		if s.Scheduler != string(spec.ASHA) {
			continue
		}
		checks = append(checks, Check{
			Criterion: fmt.Sprintf("asha's best final value within %s of full training's, with under 40%% of its resource", pct(WithinFraction)),
			Pass:      s.Gap.Median <= WithinFraction && s.Resource.Median < 0.4,
			Detail:    fmt.Sprintf("median gap %s (%d of %d seeds within), median resource %s", pct(s.Gap.Median), s.Within, s.Seeds, pct(s.Resource.Median)),
		})
	}
	return checks
}

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Command: `%s`; it took %s on %s.\n", r.Command, duration(r.Seconds), r.Machine)
	if len(r.Samplers) > 0 {
		r.samplerTable(b)
	}
	if len(r.Schedulers) > 0 {
		r.schedulerTable(b)
	}
	if len(r.Orchestrated) > 0 {
		r.orchestratedTable(b)
	}
	if len(r.Checks) > 0 {
		b.WriteString("\n### Criteria\n\n")
		for _, c := range r.Checks {
			mark := "no"
			if c.Pass {
				mark = "yes"
			}
			fmt.Fprintf(b, "- %s: **%s** (%s)\n", c.Criterion, mark, c.Detail)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) samplerTable(b *strings.Builder) {
	s := r.SamplerSetup
	fmt.Fprintf(b, "\n### Samplers: simple regret\n\n")
	fmt.Fprintf(b, "Simple regret (the best value found minus the known minimum) after %s evaluations, one trial at a time (each proposal sees every earlier result): median [first quartile, third quartile] over %s.", counts(s.Evals), seeds(s.Seeds))
	var limits []string
	for _, typ := range SamplerTypes {
		if n, ok := s.Limits[typ]; ok && n < s.Evals[len(s.Evals)-1] {
			limits = append(limits, fmt.Sprintf("the %s sampler ran %d evaluations only (its proposals refit a model whose cost grows as the cube of the history)", typ, n))
		}
	}
	if len(limits) > 0 {
		fmt.Fprintf(b, " %s; — marks counts it did not reach.", capitalize(strings.Join(limits, "; ")))
	}
	b.WriteString(" s/run is the mean wall time of one seed's run.\n\n")
	b.WriteString("| problem (minimum) | sampler |")
	for _, n := range s.Evals {
		fmt.Fprintf(b, " %d |", n)
	}
	b.WriteString(" s/run |\n|---|---|")
	for range s.Evals {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	last := ""
	for _, res := range r.Samplers {
		name := ""
		if res.Problem != last {
			name = fmt.Sprintf("%s (%s)", res.Problem, strconv.FormatFloat(res.Optimum, 'g', -1, 64))
			last = res.Problem
		}
		fmt.Fprintf(b, "| %s | %s |", name, res.Sampler)
		for _, sum := range res.Regret {
			fmt.Fprintf(b, " %s |", cell(sum))
		}
		fmt.Fprintf(b, " %.2f |\n", res.SecondsPerRun)
	}
}

func (r *Report) schedulerTable(b *strings.Builder) {
	s := r.SchedulerSetup
	fmt.Fprintf(b, "\n### Schedulers: learning-curve problem\n\n")
	fmt.Fprintf(b, "The synthetic learning-curve problem (internal/bench/curve.go; final loss known exactly, optimum %g): %d configurations from the random sampler, %d trials training at once over simulated time, full training %g epochs, noise %g.",
		CurveOptimum, s.Configs, s.Workers, s.Max, s.Noise)
	for _, res := range r.Schedulers {
		switch spec.SchedulerType(res.Scheduler) {
		case spec.ASHA:
			fmt.Fprintf(b, " asha: rungs at epochs %g, %g, ..., reduction factor 3.", s.Min, 3*s.Min)
		case spec.Hyperband:
			fmt.Fprintf(b, " hyperband: the same rungs in every bracket that fits below %g.", s.Max)
		case spec.Median:
			fmt.Fprintf(b, " median: grace period to epoch %g, then a rung every %g epochs.", s.Min, s.Max/9)
		case spec.PBT:
			fmt.Fprintf(b, " pbt: first exploit at epoch %g, then every %g epochs, bottom and top quartiles, factors 0.8 and 1.2.", s.Min, s.Max/9)
		}
	}
	fmt.Fprintf(b, " Median [first quartile, third quartile] over %s; a seed draws the configurations and the noise. *%s* trains every configuration to the end. The regret is that of the best completed trial's final loss; the gap compares it with the best final loss of full training of the same configurations; resource and wall time are relative to full training's.\n\n", seeds(s.Seeds), FullTraining)
	b.WriteString("| scheduler | regret of best final loss | gap to full training's best | seeds within 5% | resource / full training | wall time / full training | completed trials | pruned trials |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range r.Schedulers {
		fmt.Fprintf(b, "| %s | %s | %s | %d/%d | %s | %s | %s | %s |\n", res.Scheduler, cell(res.Regret), pctCell(res.Gap), res.Within, res.Seeds,
			pctCell(res.Resource), pctCell(res.Makespan), cell(res.Completed), cell(res.Pruned))
	}
}

func (r *Report) orchestratedTable(b *strings.Builder) {
	s := r.OrchestratedSetup
	fmt.Fprintf(b, "\n### Samplers through the orchestrator\n\n")
	fmt.Fprintf(b, "Each problem as a command workload (%s/<problem>.yaml: `python3 objective.py <problem>`), run by the coordinator with the local executor and bbolt state, one trial at a time: simple regret after %s evaluations, median [first quartile, third quartile] over %s. Per trial (medians over seeds): the wall time (the study's over its trials); the trainer's, as it bills a segment (running the command, with the interpreter's start, and storing the checkpoint directory and the result); and the rest, the coordinator's overhead (sampling, store and queue updates, starting the trainer process). *same* counts the studies whose trials had exactly the parameters of the in-process run with the same seed.\n\n",
		s.ExamplesDir, counts(s.Evals), seeds(s.Seeds))
	b.WriteString("| problem | sampler |")
	for _, n := range s.Evals {
		fmt.Fprintf(b, " %d |", n)
	}
	b.WriteString(" s/trial | trainer s/trial | overhead s/trial | same |\n|---|---|")
	for range s.Evals {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|---:|\n")
	last := ""
	for _, res := range r.Orchestrated {
		name := ""
		if res.Problem != last {
			name, last = res.Problem, res.Problem
		}
		fmt.Fprintf(b, "| %s | %s |", name, res.Sampler)
		for _, sum := range res.Regret {
			fmt.Fprintf(b, " %s |", cell(sum))
		}
		fmt.Fprintf(b, " %.3f | %.3f | %.3f | %d/%d |\n", res.SecondsPerTrial.Median, res.TrainerSecondsPerTrial.Median, res.OverheadSecondsPerTrial.Median, res.SameAsInProcess, res.Seeds)
	}
}

// cell formats a summary as "median [Q1, Q3]", or — when it is empty.
func cell(s Summary) string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%s [%s, %s]", num(s.Median), num(s.Q1), num(s.Q3))
}

// pctCell formats a summary of fractions as percentages.
func pctCell(s Summary) string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%s [%s, %s]", pct(s.Median), pct(s.Q1), pct(s.Q3))
}

// num formats x with three significant digits.
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case math.IsInf(x, 1):
		return "∞"
	case x == 0:
		return "0"
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return num(x)
	}
	return strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
}

// counts writes 25, 50, 100 and 200.
func counts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// seeds writes "1 seed" or "20 seeds (1 to 20)".
func seeds(n int) string {
	if n == 1 {
		return "1 seed"
	}
	return fmt.Sprintf("%d seeds (1 to %d)", n, n)
}

func duration(seconds float64) string {
	if seconds < 60 {
		return fmt.Sprintf("%.1f s", seconds)
	}
	return fmt.Sprintf("%d min %02d s", int(seconds)/60, int(seconds)%60)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
