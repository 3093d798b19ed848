package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hpsearch/hpsearch/internal/bench"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// benchOptions are the flags of hpsearch bench.
type benchOptions struct {
	problems, samplers, schedulers []string
	seeds                          int
	evals                          []int
	gpEvals                        int
	configs, workers               int
	minResource                    float64
	orchestrator                   bool
	orchestratorSeeds              int
	orchestratorEvals              []int
	examples                       string
	parallel                       int
	asJSON                         bool
	verbose                        bool
}

// none turns off a part of the benchmark in --samplers and --schedulers.
const none = "none"

func newBenchCmd(g *globals) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the samplers and schedulers on problems with known optima",
		Long: `Benchmark the samplers and schedulers on problems whose optimum is known, and
print the figures as Markdown tables (or JSON with --json).

Samplers: each sampler searches Branin (2-D), Hartmann6 (6-D), Rosenbrock
(10-D) and Ackley (5-D) one trial at a time, with each seed; the table gives
the median and inter-quartile range over seeds of the simple regret (the best
value found minus the minimum) after each count of --evals. GP-BO runs to
--gp-evals evaluations only: its proposals slow down with the cube of the
history.

Schedulers: each scheduler runs a study of --configs configurations of a
synthetic learning-curve problem whose final values are known exactly, with
--workers trials training at once over simulated time, and is compared with
training every configuration to the end: the regret of the best final value,
its gap to full training's best, and the resource and wall time used. The
schedulers judge trials from --min-resource epochs on (the first rung of asha
and hyperband, the grace period of median, the first exploit of pbt): a rung
too early, where the curves still cross, stops the trials that would have
ended best.

With --orchestrator the samplers also run each problem as a command workload
(examples/bench/<problem>.yaml) through the coordinator and the local
executor, in a temporary state directory, reporting the same regret and the
time the orchestrator adds per trial.

The figures depend only on the flags, not on the machine; the timings do.
'make bench-search' runs the full benchmark.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.bench(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.problems, "problems", problemNames(), "problems for the samplers")
	f.StringSliceVar(&o.samplers, "samplers", samplerNames(), "samplers to run, or none")
	f.StringSliceVar(&o.schedulers, "schedulers", schedulerNames(), "schedulers to run, or none")
	f.IntVar(&o.seeds, "seeds", 20, "seeds per sampler and per scheduler (1 to N)")
	f.IntSliceVar(&o.evals, "evals", bench.DefaultEvals, "evaluation counts at which to report regret")
	f.IntVar(&o.gpEvals, "gp-evals", 100, "evaluations of the gp sampler per run (0: as many as --evals)")
	f.IntVar(&o.configs, "configs", 81, "configurations per scheduler study")
	f.IntVar(&o.workers, "workers", 8, "trials training at once in a scheduler study")
	f.Float64Var(&o.minResource, "min-resource", 9, "the schedulers' first rung, in epochs of the 81 of full training")
	f.BoolVar(&o.orchestrator, "orchestrator", false, "also run the samplers on command workloads through the coordinator")
	f.IntVar(&o.orchestratorSeeds, "orchestrator-seeds", 2, "seeds per sampler through the coordinator")
	f.IntSliceVar(&o.orchestratorEvals, "orchestrator-evals", bench.DefaultOrchestratedEvals, "evaluation counts through the coordinator")
	f.StringVar(&o.examples, "examples", "examples/bench", "directory of the problems' space files, for --orchestrator")
	f.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "runs at once (the figures do not depend on it)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log progress to stderr")
	return cmd
}

func problemNames() []string {
	var names []string
	for _, p := range bench.Problems() {
		names = append(names, p.Name)
	}
	return names
}

func samplerNames() []string {
	var names []string
	for _, t := range bench.SamplerTypes {
		names = append(names, string(t))
	}
	return names
}

func schedulerNames() []string {
	var names []string
	for _, t := range bench.SchedulerTypes {
		names = append(names, string(t))
	}
	return names
}

// selected checks the names given to a flag against the known ones; none
// alone selects nothing.
func selected[T ~string](flag string, given, known []string) ([]T, error) {
	if len(given) == 1 && given[0] == none {
		return nil, nil
	}
	out := make([]T, 0, len(given))
	for _, name := range given {
		if !slices.Contains(known, name) {
			return nil, usageError(fmt.Errorf("--%s: unknown %q; want some of %s, or %s", flag, name, strings.Join(known, ","), none))
		}
		out = append(out, T(name))
	}
	return out, nil
}

func (g *globals) bench(cmd *cobra.Command, o benchOptions) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var problems []*bench.Problem
	for _, name := range o.problems {
		p, err := bench.ProblemByName(name)
		if err != nil {
			return usageError(fmt.Errorf("--problems: %w", err))
		}
		problems = append(problems, p)
	}
	samplers, err := selected[spec.SamplerType]("samplers", o.samplers, samplerNames())
	if err != nil {
		return err
	}
	schedulers, err := selected[spec.SchedulerType]("schedulers", o.schedulers, schedulerNames())
	if err != nil {
		return err
	}
	if o.seeds <= 0 || o.orchestratorSeeds <= 0 {
		return usageError(errors.New("--seeds and --orchestrator-seeds must be positive"))
	}
	if err := bench.CheckEvals(o.evals); err != nil {
		return usageError(fmt.Errorf("--evals: %w", err))
	}
	if err := bench.CheckEvals(o.orchestratorEvals); err != nil {
		return usageError(fmt.Errorf("--orchestrator-evals: %w", err))
	}
	if o.configs <= 0 || o.workers <= 0 || !(o.minResource > 0 && o.minResource < 81) {
		return usageError(errors.New("--configs and --workers must be positive, --min-resource between 0 and 81 epochs"))
	}
	if o.orchestrator {
		if fi, err := os.Stat(o.examples); err != nil || !fi.IsDir() {
			return usageError(fmt.Errorf("--examples %s: not a directory; run from the repository's root or name its examples/bench directory", o.examples))
		}
	}
	logger := newLogger(g.stderr)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(g.stderr, nil))
	}

	start := time.Now()
	r := &bench.Report{Command: benchCommand(cmd), Machine: fmt.Sprintf("%d CPUs, %s %s/%s", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)}
	if len(samplers) > 0 && len(problems) > 0 {
		limits := map[spec.SamplerType]int{}
		if o.gpEvals > 0 {
			limits[spec.GP] = o.gpEvals
		}
		r.Samplers, err = bench.RunSamplers(ctx, bench.SamplerConfig{
			Problems: problems, Samplers: samplers, Seeds: o.seeds, Evals: o.evals,
			Limits: limits, Parallel: o.parallel, Logger: logger,
		})
		if err != nil {
			return benchError(err)
		}
		r.SamplerSetup = &bench.SamplerSetup{Seeds: o.seeds, Evals: o.evals, Limits: limits}
	}
	if len(schedulers) > 0 {
		curve := bench.LearningCurve{Max: 81, Noise: 0.02}
		r.Schedulers, err = bench.RunSchedulers(ctx, bench.SchedulerConfig{
			Curve: curve, Schedulers: schedulers, New: schedule.New,
			Configs: o.configs, Workers: o.workers, Min: o.minResource, Seeds: o.seeds, Parallel: o.parallel, Logger: logger,
		})
		if err != nil {
			return benchError(err)
		}
		r.SchedulerSetup = &bench.SchedulerSetup{Seeds: o.seeds, Configs: o.configs, Workers: o.workers, Max: curve.Max, Min: o.minResource, Noise: curve.Noise}
	}
	if o.orchestrator && len(samplers) > 0 && len(problems) > 0 {
		dir, err := os.MkdirTemp("", "hpsearch-bench-")
		if err != nil {
			return &exitError{code: ExitFailed, err: err}
		}
		defer os.RemoveAll(dir)
		r.Orchestrated, err = bench.RunOrchestrated(ctx, bench.OrchestratorConfig{
			ExamplesDir: o.examples, StateDir: dir, Problems: problems, Samplers: samplers,
			Seeds: o.orchestratorSeeds, Evals: o.orchestratorEvals, Logger: logger,
		})
		if err != nil {
			return benchError(err)
		}
		r.OrchestratedSetup = &bench.OrchestratedSetup{Seeds: o.orchestratorSeeds, Evals: o.orchestratorEvals, ExamplesDir: o.examples}
	}
	r.Seconds = time.Since(start).Seconds()
	r.Checks = r.Evaluate()
	if o.asJSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteMarkdown(g.stdout)
}

// benchError maps a benchmark's failure to an exit code: interrupted, or
// failed.
func benchError(err error) error {
	if errors.Is(err, context.Canceled) {
		return &exitError{code: ExitInterrupted, err: errors.New("benchmark stopped")}
	}
	return &exitError{code: ExitFailed, err: err}
}

// benchCommand is the command line of cmd, with the flags that were set.
func benchCommand(cmd *cobra.Command) string {
	parts := []string{"hpsearch bench"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		if f.Value.Type() == "bool" && v == "true" {
			parts = append(parts, "--"+f.Name)
			return
		}
		parts = append(parts, "--"+f.Name+"="+v)
	})
	return strings.Join(parts, " ")
}
