package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// SamplerTypes are the samplers the benchmark runs: all but grid, which
// needs explicit points and does not adapt.
var SamplerTypes = []spec.SamplerType{spec.Random, spec.Sobol, spec.TPE, spec.TPEMultivariate, spec.GP, spec.CMAES}

// DefaultEvals are the evaluation counts at which regret is reported.
var DefaultEvals = []int{25, 50, 100, 200}

// RunSampler runs sampler typ with seed on p for evals evaluations, one at
// a time, each proposal made with every earlier trial completed in the
// history, and returns the values in trial order.
func RunSampler(ctx context.Context, p *Problem, typ spec.SamplerType, seed int64, evals int) ([]float64, error) {
	history, err := runSampler(ctx, p, typ, seed, evals)
	if err != nil {
		return nil, err
	}
	values := make([]float64, len(history))
	for i, t := range history {
		values[i] = *t.Value
	}
	return values, nil
}

// runSampler is RunSampler returning the trials.
func runSampler(ctx context.Context, p *Problem, typ spec.SamplerType, seed int64, evals int) ([]hptype.Trial, error) {
	s, err := search.New(p.Spec(typ, seed, evals))
	if err != nil {
		return nil, fmt.Errorf("%s sampler on %s: %w", typ, p.Name, err)
	}
	history := make([]hptype.Trial, 0, evals)
	for n := range evals {
		params, err := s.Sample(ctx, n, history)
		if err != nil {
			return nil, fmt.Errorf("%s sampler on %s, seed %d: trial %d: %w", typ, p.Name, seed, n, err)
		}
		v, err := p.Eval(params)
		if err != nil {
			return nil, err
		}
		history = append(history, hptype.Trial{Number: n, Params: params, State: hptype.TrialCompleted, Value: &v})
	}
	return history, nil
}

// SamplerConfig configures RunSamplers.
type SamplerConfig struct {
	// Problems defaults to Problems().
	Problems []*Problem
	// Samplers defaults to SamplerTypes.
	Samplers []spec.SamplerType
	// Seeds is how many seeds each sampler runs with: 1, 2, ..., Seeds.
	// Defaults to 20.
	Seeds int
	// Evals are the evaluation counts at which regret is reported,
	// ascending. Defaults to DefaultEvals. Each run makes as many
	// evaluations as the largest.
	Evals []int
	// Limits caps the evaluations of some samplers below the largest of
	// Evals (GP-BO's proposals grow cubically with the history); their
	// regret past the cap is not reported.
	Limits map[spec.SamplerType]int
	// Parallel is how many runs go at once. Defaults to GOMAXPROCS.
	Parallel int
	// Logger, if set, gets a line as each problem and sampler finishes.
	Logger *slog.Logger
}

func (c SamplerConfig) withDefaults() (SamplerConfig, error) {
	if len(c.Problems) == 0 {
		c.Problems = Problems()
	}
	if len(c.Samplers) == 0 {
		c.Samplers = SamplerTypes
	}
	if c.Seeds <= 0 {
		c.Seeds = 20
	}
	if len(c.Evals) == 0 {
		c.Evals = DefaultEvals
	}
	if err := CheckEvals(c.Evals); err != nil {
		return c, err
	}
	if c.Parallel <= 0 {
		c.Parallel = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// CheckEvals checks evaluation counts at which to report regret: positive
// and strictly ascending.
func CheckEvals(evals []int) error {
	if len(evals) == 0 {
		return errors.New("no evaluation counts")
	}
	for i, n := range evals {
		if n <= 0 || i > 0 && n <= evals[i-1] {
			return fmt.Errorf("evaluation counts %v: want positive counts in ascending order", evals)
		}
	}
	return nil
}

// evals is how many evaluations sampler typ makes per run.
func (c SamplerConfig) evals(typ spec.SamplerType) int {
	n := c.Evals[len(c.Evals)-1]
	if limit, ok := c.Limits[typ]; ok && limit > 0 {
		n = min(n, limit)
	}
	return n
}

// SamplerResult is the regret of one sampler on one problem over seeds.
type SamplerResult struct {
	Problem string           `json:"problem"`
	Optimum float64          `json:"optimum"`
	Sampler spec.SamplerType `json:"sampler"`
	Seeds   int              `json:"seeds"`
	// Evals is how many evaluations each run made.
	Evals int `json:"evals"`
	// At are the evaluation counts Regret is reported at.
	At []int `json:"at"`
	// Regret summarises the simple regret over seeds at each count of At;
	// N is 0 where the runs stopped before.
	Regret []Summary `json:"regret"`
	// SecondsPerRun is the mean wall time of one run (a seed).
	SecondsPerRun float64 `json:"seconds_per_run"`
}

// RunSamplers runs every sampler of cfg on every problem with every seed
// and summarises the regret over seeds. The figures depend only on cfg, not
// on Parallel or the machine; the timings do.
func RunSamplers(ctx context.Context, cfg SamplerConfig) ([]SamplerResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	type job struct {
		p            *Problem
		result, seed int
	}
	results := make([]SamplerResult, 0, len(cfg.Problems)*len(cfg.Samplers))
	regrets := make([][][]float64, 0, cap(results)) // result, seed, count
	var jobs []job
	for _, p := range cfg.Problems {
		for _, typ := range cfg.Samplers {
			results = append(results, SamplerResult{
				Problem: p.Name, Optimum: p.Optimum, Sampler: typ, Seeds: cfg.Seeds,
				Evals: cfg.evals(typ), At: cfg.Evals,
			})
			regrets = append(regrets, make([][]float64, cfg.Seeds))
			for seed := range cfg.Seeds {
				jobs = append(jobs, job{p, len(results) - 1, seed})
			}
		}
	}
	seconds := make([]float64, len(results))
	left := make([]int, len(results))
	for i := range left {
		left[i] = cfg.Seeds
	}
	var mu sync.Mutex
	err = forEach(ctx, len(jobs), cfg.Parallel, func(ctx context.Context, i int) error {
		j := jobs[i]
		r := &results[j.result]
		start := time.Now()
		values, err := RunSampler(ctx, j.p, r.Sampler, int64(j.seed+1), r.Evals)
		if err != nil {
			return err
		}
		elapsed := time.Since(start).Seconds()
		mu.Lock()
		defer mu.Unlock()
		regrets[j.result][j.seed] = SimpleRegret(values, j.p.Optimum, cfg.Evals)
		seconds[j.result] += elapsed
		if left[j.result]--; left[j.result] == 0 {
			cfg.Logger.Info("sampler benchmark", "problem", r.Problem, "sampler", r.Sampler, "seeds", cfg.Seeds, "seconds_per_run", seconds[j.result]/float64(cfg.Seeds))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range results {
		r := &results[i]
		r.SecondsPerRun = seconds[i] / float64(cfg.Seeds)
		r.Regret = make([]Summary, len(cfg.Evals))
		for k := range cfg.Evals {
			col := make([]float64, cfg.Seeds)
			for s := range col {
				col[s] = regrets[i][s][k]
			}
			r.Regret[k] = Summarize(col)
		}
	}
	return results, nil
}

// forEach calls f for 0, 1, ..., n-1 with at most parallel calls at once,
// in order of i as workers free up. It returns the first error, after
// which no more calls start, or the cause of ctx's end.
func forEach(ctx context.Context, n, parallel int, f func(ctx context.Context, i int) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(fctx, i); err != nil {
					once.Do(func() { first = err })
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-fctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}
