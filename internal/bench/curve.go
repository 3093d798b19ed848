package bench

import (
	"fmt"
	"math"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// CurveMetric is the metric the learning-curve problem reports: a
// validation loss, minimised.
const CurveMetric = "loss"

// CurveOptimum is the smallest final loss of the learning-curve problem,
// reached at lr = 0.01, weight_decay = 1e-4, width = 0.6, depth = 5.
const CurveOptimum = 0.1

// LearningCurve is a synthetic training problem with known final values,
// for the schedulers. A configuration of four parameters
//
//	lr            float, log, [1e-4, 1]
//	weight_decay  float, log, [1e-6, 0.1]
//	width         float, [0, 1]
//	depth         int, [1, 8]
//
// trains for a resource r in [0, Max] (epochs), and its validation loss
// falls from final + 1 at r = 0 to exactly its final value at r = Max:
//
//	loss(r) = final + (exp(-r/T) - exp(-Max/T)) / (1 - exp(-Max/T)) + noise
//	final   = 0.1 + 0.06 (log10 lr + 2)^2 + 0.02 (log10 weight_decay + 4)^2
//	              + 0.15 (width - 0.6)^2 + 0.005 (depth - 5)^2
//	T       = 0.05 Max (0.01/lr)^0.3 (0.75 + 0.5 width) (depth/5)^0.25
//
// A large learning rate learns fast and ends worse, a small one learns
// slowly, and wide or deep models learn more slowly, so curves cross: the
// best configuration at an early rung is often not the best at the end,
// and stopping early is not trivially right. Over random configurations
// (Max 81), the rank correlation of the loss at epoch r with the final
// loss is about 0.2 at r = 1 and 3, 0.6 at 9 and 0.95 at 27: the first
// few epochs say little, a ninth of training a fair amount, a third
// almost everything.
//
// The noise is uniform in [-Noise, Noise] x (1 - r/Max), a hash of Seed,
// the parameters and r: it is deterministic, and zero at Max, so final
// values are exact.
type LearningCurve struct {
	// Max is the resource of full training. Defaults to 81.
	Max float64
	// Noise is the noise's amplitude at r = 0. Defaults to 0.02.
	Noise float64
	// Seed keys the noise.
	Seed int64
}

func (c LearningCurve) withDefaults() LearningCurve {
	if c.Max <= 0 {
		c.Max = 81
	}
	if c.Noise == 0 {
		c.Noise = 0.02
	}
	return c
}

// curveParams are the learning-curve problem's parameters.
var curveParams = []spec.Param{
	{Name: "lr", Type: spec.Float, Min: 1e-4, Max: 1, Log: true},
	{Name: "weight_decay", Type: spec.Float, Min: 1e-6, Max: 0.1, Log: true},
	{Name: "width", Type: spec.Float, Min: 0, Max: 1},
	{Name: "depth", Type: spec.Int, Min: 1, Max: 8},
}

// config is a configuration of the learning-curve problem.
type config struct {
	lr, weightDecay, width, depth float64
}

func readConfig(p hptype.Params) (config, error) {
	var c config
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"lr", &c.lr}, {"weight_decay", &c.weightDecay}, {"width", &c.width}, {"depth", &c.depth}} {
		v, err := p.Float(f.name)
		if err != nil {
			return c, fmt.Errorf("learning curve: %w", err)
		}
		*f.dst = v
	}
	if c.lr <= 0 || c.weightDecay <= 0 || c.depth <= 0 {
		return c, fmt.Errorf("learning curve: lr %v, weight_decay %v and depth %v must be positive", c.lr, c.weightDecay, c.depth)
	}
	return c, nil
}

// final is the configuration's loss at Max.
func (c config) final() float64 {
	l, w := math.Log10(c.lr)+2, math.Log10(c.weightDecay)+4
	return CurveOptimum + 0.06*l*l + 0.02*w*w + 0.15*(c.width-0.6)*(c.width-0.6) + 0.005*(c.depth-5)*(c.depth-5)
}

// Final returns the loss of the configuration p after full training.
func (c LearningCurve) Final(p hptype.Params) (float64, error) {
	cfg, err := readConfig(p)
	if err != nil {
		return 0, err
	}
	return cfg.final(), nil
}

// Value returns the loss of the configuration p after training for
// resource r, in [0, Max]; at Max it equals Final.
func (c LearningCurve) Value(p hptype.Params, r float64) (float64, error) {
	c = c.withDefaults()
	cfg, err := readConfig(p)
	if err != nil {
		return 0, err
	}
	if r < 0 || r > c.Max {
		return 0, fmt.Errorf("learning curve: resource %v is outside [0, %v]", r, c.Max)
	}
	final := cfg.final()
	if r == c.Max {
		return final, nil
	}
	t := 0.05 * c.Max * math.Pow(0.01/cfg.lr, 0.3) * (0.75 + 0.5*cfg.width) * math.Pow(cfg.depth/5, 0.25)
	end := math.Exp(-c.Max / t)
	progress := (math.Exp(-r/t) - end) / (1 - end)
	noise := c.Noise * (1 - r/c.Max) * (2*c.unit(p, r) - 1)
	return final + progress + noise, nil
}

// unit returns a number in [0, 1) that is a hash of the seed, the
// parameters and r.
func (c LearningCurve) unit(p hptype.Params, r float64) float64 {
	h := mix(uint64(c.Seed) ^ 0x6375727665) // "curve"
	names := make([]string, 0, len(p))
	for name := range p {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v, _ := p.Float(name)
		h = mix(h ^ math.Float64bits(v))
	}
	h = mix(h ^ math.Float64bits(r))
	return float64(h>>11) * 0x1p-53
}

// mix is the splitmix64 finaliser: a bijective hash of 64 bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// CurveStudy is a study of the learning-curve problem.
type CurveStudy struct {
	Scheduler spec.SchedulerType
	// Seed seeds the random sampler that proposes the configurations.
	Seed int64
	// Configs is how many configurations the study trains, Workers how
	// many at once.
	Configs, Workers int
	// Min is the first rung of asha and hyperband (then every factor 3
	// up), and the grace period of median and first exploit of pbt (then
	// every Max/9). Defaults to Max/9.
	Min float64
}

// Spec returns the space of the study st: its configurations from the
// random sampler, the objective CurveMetric minimised, and the scheduler
// section of st.Scheduler (none for spec.NoScheduler) with the resource in
// epochs up to Max:
//
//	asha       rungs at Min, 3 Min, 9 Min, ... below Max (reduction factor 3)
//	hyperband  the same, in as many brackets as fit below Max
//	median     grace period Min, a rung every Max/9, at least 5 trials per rung
//	pbt        first exploit at Min, then every Max/9, quantile 0.25,
//	           factors 0.8 and 1.2 on every parameter
func (c LearningCurve) Spec(st CurveStudy) *spec.Spec {
	c = c.withDefaults()
	s := &spec.Spec{
		Name:           "bench-learning-curve",
		Objective:      spec.Objective{Metric: CurveMetric, Goal: spec.Minimize},
		Params:         slices.Clone(curveParams),
		Sampler:        spec.Sampler{Type: spec.Random, Seed: st.Seed},
		MaxTrials:      st.Configs,
		MaxConcurrency: st.Workers,
	}
	if st.Scheduler == spec.NoScheduler {
		return s
	}
	if st.Min <= 0 {
		st.Min = c.Max / 9
	}
	sched := spec.Scheduler{Type: st.Scheduler, Resource: "epoch", Min: st.Min, Max: c.Max}
	switch st.Scheduler {
	case spec.ASHA, spec.Hyperband:
		sched.ReductionFactor = 3
		if st.Scheduler == spec.Hyperband {
			for r := sched.Min; r < sched.Max; r *= sched.ReductionFactor {
				sched.Brackets++
			}
		}
	case spec.Median:
		sched.Interval, sched.MinTrials = c.Max/9, 5
	case spec.PBT:
		sched.Interval, sched.Quantile = c.Max/9, 0.25
		sched.PerturbationFactors = []float64{0.8, 1.2}
		for _, p := range curveParams {
			sched.Explore = append(sched.Explore, p.Name)
		}
	}
	s.Scheduler = sched
	return s
}
