package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// SchedulerTypes are the schedulers the benchmark runs.
var SchedulerTypes = []spec.SchedulerType{spec.ASHA, spec.Hyperband, spec.Median, spec.PBT}

// FullTraining names the baseline in scheduler results: every trial
// trained to the end.
const FullTraining = "none"

// WithinFraction is how close, relative to full training's best final
// value, a scheduler's best final value must be to count as found.
const WithinFraction = 0.05

// SchedulerConfig configures RunSchedulers.
type SchedulerConfig struct {
	Curve LearningCurve
	// Schedulers defaults to SchedulerTypes.
	Schedulers []spec.SchedulerType
	// New returns the scheduler of a space (schedule.New). Required.
	New func(*spec.Spec) (schedule.Scheduler, error)
	// Configs is how many configurations each study trains. Defaults to
	// 81.
	Configs int
	// Workers is how many trials train at once. Defaults to 8.
	Workers int
	// Min is the schedulers' first rung (see CurveStudy). Defaults to
	// Curve.Max/9.
	Min float64
	// Seeds is how many seeds each scheduler runs with: 1, 2, ..., Seeds.
	// A seed draws the configurations and keys the curves' noise.
	// Defaults to 20.
	Seeds int
	// Parallel is how many seeds run at once. Defaults to GOMAXPROCS.
	Parallel int
	// Logger, if set, gets a line as each seed finishes.
	Logger *slog.Logger
}

func (c SchedulerConfig) withDefaults() (SchedulerConfig, error) {
	if c.New == nil {
		return c, errors.New("scheduler benchmark: New is required")
	}
	c.Curve = c.Curve.withDefaults()
	if len(c.Schedulers) == 0 {
		c.Schedulers = SchedulerTypes
	}
	if c.Configs <= 0 {
		c.Configs = 81
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Min <= 0 {
		c.Min = c.Curve.Max / 9
	}
	if c.Seeds <= 0 {
		c.Seeds = 20
	}
	if c.Parallel <= 0 {
		c.Parallel = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// SchedulerResult summarises a scheduler on the learning-curve problem
// over seeds, each seed's study compared with full training of the same
// configurations.
type SchedulerResult struct {
	// Scheduler is the scheduler's type, or FullTraining.
	Scheduler string `json:"scheduler"`
	Seeds     int    `json:"seeds"`
	// Regret is the best completed trial's final value minus the
	// problem's optimum.
	Regret Summary `json:"regret"`
	// Gap is the best completed trial's final value over full training's
	// best, minus 1: how much worse than full training it ended. A study
	// in which no trial completed has regret and gap +Inf.
	Gap Summary `json:"gap"`
	// Within counts the seeds whose Gap is at most WithinFraction.
	Within int `json:"within"`
	// Resource is the resource trained over Configs x Max, the resource
	// of full training.
	Resource Summary `json:"resource"`
	// Makespan is the simulated wall time over full training's.
	Makespan Summary `json:"makespan"`
	// Completed and Pruned count the trials that ended so.
	Completed Summary `json:"completed"`
	Pruned    Summary `json:"pruned"`
}

// RunSchedulers simulates every scheduler of cfg, and full training, on
// the learning-curve problem with every seed, and summarises the results.
// They depend only on cfg, not on Parallel.
func RunSchedulers(ctx context.Context, cfg SchedulerConfig) ([]SchedulerResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	names := []string{FullTraining}
	for _, typ := range cfg.Schedulers {
		names = append(names, string(typ))
	}
	// runs[seed][k] is scheduler k's study with the seed; k = 0 is full
	// training.
	runs := make([][]*SimResult, cfg.Seeds)
	err = forEach(ctx, cfg.Seeds, cfg.Parallel, func(ctx context.Context, i int) error {
		seed := int64(i + 1)
		curve := cfg.Curve
		curve.Seed = seed
		out := make([]*SimResult, len(names))
		for k := range names {
			typ := spec.NoScheduler
			if k > 0 {
				typ = cfg.Schedulers[k-1]
			}
			sp := curve.Spec(CurveStudy{Scheduler: typ, Seed: seed, Configs: cfg.Configs, Workers: cfg.Workers, Min: cfg.Min})
			var sched schedule.Scheduler
			if typ != spec.NoScheduler {
				s, err := cfg.New(sp)
				if err != nil {
					return fmt.Errorf("scheduler %s: %w", typ, err)
				}
				if s == nil {
					return fmt.Errorf("scheduler %s: not implemented (no scheduler for its spec)", typ)
				}
				sched = s
			}
			res, err := Simulate(ctx, curve, sp, sched)
			if err != nil {
				return fmt.Errorf("%s, seed %d: %w", names[k], seed, err)
			}
			out[k] = res
		}
		runs[i] = out
		cfg.Logger.Info("scheduler benchmark", "seed", seed)
		return nil
	})
	if err != nil {
		return nil, err
	}
	full := float64(cfg.Configs) * cfg.Curve.Max
	results := make([]SchedulerResult, len(names))
	for k, name := range names {
		var regret, gap, resource, makespan, completed, pruned []float64
		within := 0
		for _, out := range runs {
			r, base := out[k], out[0]
			g := r.Best/base.Best - 1
			regret = append(regret, r.Best-CurveOptimum)
			gap = append(gap, g)
			if g <= WithinFraction {
				within++
			}
			resource = append(resource, r.Resource/full)
			makespan = append(makespan, r.Makespan/base.Makespan)
			completed = append(completed, float64(r.Completed))
			pruned = append(pruned, float64(r.Pruned))
		}
		results[k] = SchedulerResult{
			Scheduler: name, Seeds: cfg.Seeds,
			Regret: Summarize(regret), Gap: Summarize(gap), Within: within,
			Resource: Summarize(resource), Makespan: Summarize(makespan),
			Completed: Summarize(completed), Pruned: Summarize(pruned),
		}
	}
	return results, nil
}
