package spec

import (
	"math"
	"slices"
)

// SchedulerType names an early-stopping scheduler.
type SchedulerType string

const (
	// NoScheduler runs every trial to the end.
	NoScheduler SchedulerType = ""
	// ASHA is asynchronous successive halving.
	ASHA SchedulerType = "asha"
	// Hyperband runs several ASHA brackets with different minimum resources.
	Hyperband SchedulerType = "hyperband"
	// Median is the median stopping rule.
	Median SchedulerType = "median"
	// PBT is population-based training.
	PBT SchedulerType = "pbt"
)

// Scheduler says when trials are judged (rungs: milestones of the training
// resource) and which continue.
type Scheduler struct {
	Type SchedulerType
	// Resource names the unit of training the rungs count in (the step of
	// reported metrics): "epoch" for the built-in workloads.
	Resource string
	// Min is the resource of the first rung (asha, hyperband), the grace
	// period before any stop (median), or of the first exploit (pbt).
	Min float64
	// Max is the resource of full training: no trial trains past it.
	Max float64
	// ReductionFactor (eta) keeps the best 1/eta of trials at each rung and
	// spaces rungs by a factor eta (asha, hyperband). Defaults to 3.
	ReductionFactor float64
	// Brackets is how many ASHA brackets Hyperband runs; bracket s has its
	// first rung at Min * eta^s. Defaults to as many as fit below Max.
	Brackets int
	// Interval spaces the rungs of median and pbt: Min, Min+Interval, ...
	Interval float64
	// MinTrials is how many trials must have reported at a rung before the
	// median rule stops any there. Defaults to 5.
	MinTrials int
	// Quantile is the fraction of trials at a rung that PBT counts as the
	// bottom (which exploit) and as the top (which are copied). Defaults
	// to 0.25.
	Quantile float64
	// PerturbationFactors are what PBT multiplies a copied float or int
	// parameter by, one chosen per parameter. Defaults to [0.8, 1.2].
	PerturbationFactors []float64
	// Explore names the parameters PBT perturbs. Defaults to every float
	// parameter (an int one often shapes the model, which a copied
	// checkpoint must fit).
	Explore []string
}

// Defaults of the scheduler section.
const (
	DefaultReductionFactor = 3
	DefaultMinTrials       = 5
	DefaultQuantile        = 0.25
)

// DefaultPerturbationFactors are PBT's perturbation factors by default.
var DefaultPerturbationFactors = []float64{0.8, 1.2}

// schedulerKeys are the keys of the scheduler section, by type; the first
// four are common to every type.
var schedulerKeys = map[SchedulerType][]string{
	ASHA:      {"type", "resource", "min", "max", "reduction_factor"},
	Hyperband: {"type", "resource", "min", "max", "reduction_factor", "brackets"},
	Median:    {"type", "resource", "min", "max", "interval", "min_trials"},
	PBT:       {"type", "resource", "min", "max", "interval", "quantile", "perturbation_factors", "explore"},
}

// scheduler decodes the optional scheduler section.
func (d *decoder) scheduler(root *object, s *Spec) Scheduler {
	f, ok := root.get("scheduler")
	if !ok {
		return Scheduler{}
	}
	o, ok := d.object(f, "scheduler", "scheduler.")
	if !ok {
		return Scheduler{}
	}
	c := Scheduler{Resource: "epoch", ReductionFactor: DefaultReductionFactor, MinTrials: DefaultMinTrials, Quantile: DefaultQuantile}
	if len(s.Trainer.Command) > 0 {
		c.Resource = "step"
	}
	before := len(d.errs)
	tf, ok := d.require(o, "type", "add type: asha, hyperband, median or pbt")
	if !ok {
		return Scheduler{}
	}
	typ, ok := d.enum(tf, string(ASHA), string(Hyperband), string(Median), string(PBT))
	if !ok {
		return Scheduler{}
	}
	c.Type = SchedulerType(typ)
	d.checkKeys(o, schedulerKeys[c.Type])
	if f, ok := o.get("resource"); ok {
		c.Resource, _ = d.name(f)
	}
	minF, okMin := d.require(o, "min", "add the resource of the first rung, e.g. min: 1")
	maxF, okMax := d.require(o, "max", "add the resource of full training, e.g. max: 27")
	if okMin {
		c.Min, okMin = d.positive(minF)
	}
	if okMax {
		c.Max, okMax = d.positive(maxF)
	}
	if okMin && okMax && c.Min >= c.Max {
		d.errorf(maxF.pos(), "%s (%s) must be greater than scheduler.min (%s), or no trial is ever judged", maxF.label, num(c.Max), num(c.Min))
		okMax = false
	}
	if f, ok := o.get("reduction_factor"); ok {
		if eta, ok := d.number(f); ok && eta <= 1 {
			d.errorf(f.pos(), "%s must be greater than 1, got %s; 3 keeps the best third at each rung", f.label, num(eta))
		} else if ok {
			c.ReductionFactor = eta
		}
	}
	okRange := okMin && okMax
	if c.Type == Hyperband {
		most := 0
		if okRange {
			most = int(math.Floor(math.Log(c.Max/c.Min)/math.Log(c.ReductionFactor)+1e-9)) + 1
		}
		c.Brackets = most
		if f, ok := o.get("brackets"); ok {
			n, ok := d.intIn(f, 1, maxInt)
			if ok && okRange && n > most {
				d.errorf(f.pos(), "%s is %d, but only %d fit: bracket s starts at min x reduction_factor^s, which must not pass max (%s)", f.label, n, most, num(c.Max))
			} else if ok {
				c.Brackets = n
			}
		}
	}
	if c.Type == Median || c.Type == PBT {
		c.Interval = c.Min
		if f, ok := o.get("interval"); ok {
			c.Interval, _ = d.positive(f)
		}
	}
	if f, ok := o.get("min_trials"); ok {
		c.MinTrials, _ = d.intIn(f, 1, maxInt)
	}
	if c.Type == PBT {
		d.pbt(o, s, &c)
	}
	if len(d.errs) > before {
		return c
	}
	if n := c.rungCount(); n > maxRungs {
		d.errorf(o.pos, "scheduler: %d rungs between min (%s) and max (%s) are too many (at most %d); raise min, the reduction_factor or the interval", n, num(c.Min), num(c.Max), maxRungs)
		return c
	}
	if s.Trainer.Builtin != "" {
		if r, ok := c.fractionalRung(); ok {
			d.errorf(o.pos, "scheduler: the built-in workload trains whole epochs, and rung %s is not one; use a whole min and max, and a whole reduction_factor or interval", num(r))
		}
	}
	return c
}

// maxRungs bounds how many rungs a scheduler may have.
const maxRungs = 1000

// rungCount is how many rungs the first bracket (or the ladder) has below
// max, computed without listing them.
func (c Scheduler) rungCount() int {
	var n float64
	switch c.Type {
	case ASHA, Hyperband:
		n = math.Ceil(math.Log(c.Max/c.Min)/math.Log(c.ReductionFactor) - 1e-9)
	case Median, PBT:
		n = math.Ceil((c.Max-c.Min)/c.Interval - 1e-9)
	}
	return int(min(n, math.MaxInt32))
}

// fractionalRung returns a rung or the max that is not a whole number, if
// any.
func (c Scheduler) fractionalRung() (float64, bool) {
	whole := func(r float64) bool { return math.Abs(r-math.Round(r)) <= 1e-9*math.Max(1, r) }
	if !whole(c.Max) {
		return c.Max, true
	}
	switch c.Type {
	case ASHA, Hyperband:
		for s := range max(c.Brackets, 1) {
			for r := c.Min * math.Pow(c.ReductionFactor, float64(s)); r < c.Max*(1-1e-9); r *= c.ReductionFactor {
				if !whole(r) {
					return r, true
				}
			}
		}
	case Median, PBT:
		for r := c.Min; r < c.Max*(1-1e-9); r += c.Interval {
			if !whole(r) {
				return r, true
			}
		}
	}
	return 0, false
}

// pbt decodes PBT's quantile, perturbation factors and explored parameters.
func (d *decoder) pbt(o *object, s *Spec, c *Scheduler) {
	if f, ok := o.get("quantile"); ok {
		if q, ok := d.number(f); ok && (q <= 0 || q > 0.5) {
			d.errorf(f.pos(), "%s must be above 0 and at most 0.5, got %s; 0.25 copies the top quarter into the bottom quarter", f.label, num(q))
		} else if ok {
			c.Quantile = q
		}
	}
	c.PerturbationFactors = DefaultPerturbationFactors
	if f, ok := o.get("perturbation_factors"); ok {
		items, _ := d.nonEmptyList(f, "e.g. [0.8, 1.2]")
		c.PerturbationFactors = nil
		for _, it := range items {
			if v, ok := d.positive(it); ok {
				c.PerturbationFactors = append(c.PerturbationFactors, v)
			}
		}
	}
	f, ok := o.get("explore")
	if !ok {
		for _, p := range s.Params {
			if p.Type == Float {
				c.Explore = append(c.Explore, p.Name)
			}
		}
		if len(c.Explore) == 0 {
			d.errorf(o.pos, "scheduler: pbt has no parameter to perturb: the space has no float parameter; list the ones to explore in scheduler.explore")
		}
		return
	}
	items, _ := d.nonEmptyList(f, "list the parameters PBT may perturb, e.g. [learning_rate]")
	for _, it := range items {
		name, ok := d.name(it)
		if !ok {
			continue
		}
		i := slices.IndexFunc(s.Params, func(p Param) bool { return p.Name == name })
		switch {
		case i < 0:
			d.errorf(it.pos(), "%s: no parameter %q%s", it.label, name, didYouMean(name, paramNames(s.Params)))
		case s.Params[i].Type == Constant:
			d.errorf(it.pos(), "%s: %s is a constant; PBT perturbs float, int and categorical parameters", it.label, name)
		default:
			c.Explore = append(c.Explore, name)
		}
	}
}

// positive is a finite number > 0.
func (d *decoder) positive(f field) (float64, bool) {
	n, ok := d.number(f)
	if ok && n <= 0 {
		d.errorf(f.pos(), "%s must be positive, got %s", f.label, num(n))
		return 0, false
	}
	return n, ok
}

func paramNames(ps []Param) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}
