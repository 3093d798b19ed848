package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"

	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/executor/local"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// DefaultOrchestratedEvals are the evaluation counts at which the
// orchestrated runs report regret.
var DefaultOrchestratedEvals = []int{25, 50}

// OrchestratorConfig configures RunOrchestrated.
type OrchestratorConfig struct {
	// ExamplesDir holds each problem's space file, <problem>.yaml, and
	// what its trainer runs (examples/bench in the repository). Required.
	ExamplesDir string
	// StateDir is the state directory the studies run in; it must not
	// hold studies of the benchmark's names. Required.
	StateDir string
	// Problems defaults to Problems().
	Problems []*Problem
	// Samplers defaults to SamplerTypes.
	Samplers []spec.SamplerType
	// Seeds is how many seeds each sampler runs with: 1, 2, ..., Seeds.
	// Defaults to 2.
	Seeds int
	// Evals are the evaluation counts at which regret is reported,
	// ascending; each study runs as many trials as the largest. Defaults
	// to DefaultOrchestratedEvals.
	Evals []int
	// Executor runs the trainers. Defaults to the local executor, which
	// runs this executable's hidden trainer command.
	Executor executor.Executor
	// Logger gets the coordinator's logs and a line per study. Defaults
	// to discarding them.
	Logger *slog.Logger
}

// maxAttempts is the coordinator's and the queue's retry limit, as the CLI
// sets them.
const maxAttempts = 3

func (c OrchestratorConfig) withDefaults() (OrchestratorConfig, error) {
	if c.ExamplesDir == "" || c.StateDir == "" {
		return c, errors.New("orchestrated benchmark: ExamplesDir and StateDir are required")
	}
	dir, err := filepath.Abs(c.ExamplesDir)
	if err != nil {
		return c, err
	}
	c.ExamplesDir = dir
	if len(c.Problems) == 0 {
		c.Problems = Problems()
	}
	if len(c.Samplers) == 0 {
		c.Samplers = SamplerTypes
	}
	if c.Seeds <= 0 {
		c.Seeds = 2
	}
	if len(c.Evals) == 0 {
		c.Evals = DefaultOrchestratedEvals
	}
	if err := CheckEvals(c.Evals); err != nil {
		return c, err
	}
	if c.Executor == nil {
		e, err := local.New(local.Config{})
		if err != nil {
			return c, err
		}
		c.Executor = e
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// OrchestratorResult is the regret of one sampler on one problem run as a
// command workload through the coordinator, and the time that took.
type OrchestratorResult struct {
	Problem string           `json:"problem"`
	Sampler spec.SamplerType `json:"sampler"`
	Seeds   int              `json:"seeds"`
	// Evals is how many trials each study ran.
	Evals int `json:"evals"`
	// At are the evaluation counts Regret is reported at.
	At     []int     `json:"at"`
	Regret []Summary `json:"regret"`
	// SecondsPerTrial is a study's wall time over its trials.
	SecondsPerTrial Summary `json:"seconds_per_trial"`
	// TrainerSecondsPerTrial is the time the trainer measured for a
	// trial's segment (billed time): running the command (the objective
	// script, with its interpreter's start), restoring and saving its
	// checkpoint directory, and storing the segment's result.
	TrainerSecondsPerTrial Summary `json:"trainer_seconds_per_trial"`
	// OverheadSecondsPerTrial is SecondsPerTrial minus
	// TrainerSecondsPerTrial: what the coordinator adds to each trial
	// (sampling, the store and queue updates, starting the trainer process
	// and reading its result).
	OverheadSecondsPerTrial Summary `json:"overhead_seconds_per_trial"`
	// SameAsInProcess counts the studies whose trials had exactly the
	// parameters RunSampler proposes with the same seed.
	SameAsInProcess int `json:"same_as_in_process"`
}

// RunOrchestrated runs every sampler of cfg on every problem with every
// seed as a study of the problem's command workload, through the
// coordinator, one trial at a time (max_concurrency 1, as RunSampler), and
// summarises the regret and the time per trial over seeds. The studies run
// one after another, so that the timings are not disturbed by each other.
func RunOrchestrated(ctx context.Context, cfg OrchestratorConfig) ([]OrchestratorResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := localstate.Open(cfg.StateDir, queue.Config{MaxAttempts: maxAttempts})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	dir, err := filepath.Abs(filepath.Join(cfg.StateDir, "checkpoints"))
	if err != nil {
		return nil, err
	}
	blobs, err := bloburl.Open(ctx, "file://"+dir)
	if err != nil {
		return nil, err
	}
	o := &orchestrated{cfg: cfg, st: st, ckpts: checkpoint.New(blobs)}
	var results []OrchestratorResult
	for _, p := range cfg.Problems {
		base, err := LoadSpace(cfg.ExamplesDir, p)
		if err != nil {
			return nil, err
		}
		for _, typ := range cfg.Samplers {
			r, err := o.run(ctx, p, base, typ)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// LoadSpace loads the space file of problem p from dir, <p.Name>.yaml, and
// checks that its parameters are the problem's.
func LoadSpace(dir string, p *Problem) (*spec.Spec, error) {
	path := filepath.Join(dir, p.Name+".yaml")
	sp, err := spec.Load(path)
	if err != nil {
		return nil, err
	}
	want := p.Spec(spec.Random, 0, 1).Params
	got := make([]spec.Param, len(sp.Params))
	for i, q := range sp.Params {
		got[i] = spec.Param{Name: q.Name, Type: q.Type, Min: q.Min, Max: q.Max, Log: q.Log}
	}
	if !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("%s: the parameters are not those of the problem %s: %d float parameters x0, x1, ... with bounds %v", path, p.Name, p.Dim(), p.Bounds)
	}
	if sp.Objective.Metric != ObjectiveMetric || sp.Objective.Goal != spec.Minimize {
		return nil, fmt.Errorf("%s: the objective must be to minimize %q", path, ObjectiveMetric)
	}
	return sp, nil
}

type orchestrated struct {
	cfg   OrchestratorConfig
	st    *localstate.State
	ckpts *checkpoint.Store
}

// run runs sampler typ on problem p with every seed.
func (o *orchestrated) run(ctx context.Context, p *Problem, base *spec.Spec, typ spec.SamplerType) (OrchestratorResult, error) {
	cfg := o.cfg
	evals := cfg.Evals[len(cfg.Evals)-1]
	r := OrchestratorResult{Problem: p.Name, Sampler: typ, Seeds: cfg.Seeds, Evals: evals, At: cfg.Evals}
	regrets := make([][]float64, len(cfg.Evals))
	var wall, trainer, overhead []float64
	for i := range cfg.Seeds {
		seed := int64(i + 1)
		sp := *base
		sp.Name = fmt.Sprintf("bench-%s-%s-%d", p.Name, typ, seed)
		sp.Sampler = spec.Sampler{Type: typ, Seed: seed}
		sp.MaxTrials, sp.MaxConcurrency = evals, 1
		trials, elapsed, err := o.study(ctx, &sp)
		if err != nil {
			return r, err
		}
		values := make([]float64, len(trials))
		var trainerSeconds float64
		for n, t := range trials {
			values[n] = *t.Value
			trainerSeconds += t.WallSeconds()
		}
		for k, v := range SimpleRegret(values, p.Optimum, cfg.Evals) {
			regrets[k] = append(regrets[k], v)
		}
		perTrial, perTrainer := elapsed/float64(evals), trainerSeconds/float64(evals)
		wall, trainer, overhead = append(wall, perTrial), append(trainer, perTrainer), append(overhead, perTrial-perTrainer)
		same, err := sameAsInProcess(ctx, p, &sp, trials)
		if err != nil {
			return r, err
		}
		if same {
			r.SameAsInProcess++
		}
		cfg.Logger.Info("orchestrated benchmark", "study", sp.Name, "seconds_per_trial", perTrial, "same_as_in_process", same)
	}
	for _, col := range regrets {
		r.Regret = append(r.Regret, Summarize(col))
	}
	r.SecondsPerTrial, r.TrainerSecondsPerTrial, r.OverheadSecondsPerTrial = Summarize(wall), Summarize(trainer), Summarize(overhead)
	return r, nil
}

// study runs the study sp in a fresh name and returns its trials by number,
// every one completed with a value, and its wall time in seconds.
func (o *orchestrated) study(ctx context.Context, sp *spec.Spec) ([]*hptype.Trial, float64, error) {
	_, err := o.st.Store.GetStudy(ctx, sp.Name)
	switch {
	case err == nil:
		return nil, 0, fmt.Errorf("study %q exists in %s already; use an empty state directory", sp.Name, o.st.Dir)
	case !errors.Is(err, hptype.ErrNotFound):
		return nil, 0, err
	}
	q, err := o.st.Queue(sp.Name)
	if err != nil {
		return nil, 0, err
	}
	defer q.Close()
	res, err := coordinator.Run(ctx, coordinator.Config{
		Spec:        sp,
		SpecDir:     o.cfg.ExamplesDir,
		Store:       o.st.Store,
		Queue:       q,
		Executor:    o.cfg.Executor,
		Checkpoints: o.ckpts,
		LogDir:      o.st.LogDir,
		Logger:      o.cfg.Logger,
		MaxAttempts: maxAttempts,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("study %s: %w", sp.Name, err)
	}
	if res.Study.State != hptype.StudyCompleted {
		return nil, 0, fmt.Errorf("study %s ended %s: %s", sp.Name, res.Study.State, res.Reason)
	}
	for _, t := range res.Trials {
		if t.State != hptype.TrialCompleted || t.Value == nil {
			return nil, 0, fmt.Errorf("study %s: trial %d ended %s without a value: %s; see its log in %s", sp.Name, t.Number, t.State, t.Error, filepath.Join(o.st.LogDir, sp.Name))
		}
	}
	return res.Trials, res.Study.ElapsedSeconds, nil
}

// sameAsInProcess reports whether the study's trials had the parameters
// RunSampler's trials have with the same sampler and seed.
func sameAsInProcess(ctx context.Context, p *Problem, sp *spec.Spec, trials []*hptype.Trial) (bool, error) {
	want, err := runSampler(ctx, p, sp.Sampler.Type, sp.Sampler.Seed, len(trials))
	if err != nil {
		return false, err
	}
	for n, t := range trials {
		if !reflect.DeepEqual(t.Params, want[n].Params) {
			return false, nil
		}
	}
	return true, nil
}
