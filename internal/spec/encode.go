package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Encode writes s as a canonical space file: every field, defaults
// included, keys in a fixed order and parameters in declaration order.
// For a valid spec in the form Decode returns (defaults filled in, an empty
// Env nil), decoding the result gives back s. Encode writes every field
// that is set, even where it does not belong, and fails if the result does
// not decode, so it fails for a spec that is not valid.
func Encode(s *Spec) ([]byte, error) {
	var w writer
	w.search(s)
	w.run(s)
	if w.err != nil {
		return nil, fmt.Errorf("spec: cannot encode: %w", w.err)
	}
	out := []byte(w.b.String())
	if _, err := Decode("encoded spec", out); err != nil {
		return nil, fmt.Errorf("spec: cannot encode an invalid spec:\n%w", err)
	}
	return out, nil
}

// SearchFingerprint is the hex SHA-256 of the canonical form of the parts
// of s that decide which trials exist and what they mean: name, objective,
// parameters, trainer, sampler and scheduler. It leaves out what may change when a
// study is resumed: max_trials, max_concurrency, budget, backend and
// checkpoint.
func (s *Spec) SearchFingerprint() string {
	var w writer
	w.b.WriteString("# hpsearch search fingerprint v1\n")
	w.search(s)
	sum := sha256.Sum256([]byte(w.b.String()))
	return hex.EncodeToString(sum[:])
}

// writer builds canonical YAML. It keeps the first value it cannot write.
type writer struct {
	b   strings.Builder
	err error
}

// line writes "key: value" at an indentation level, or "key:" to open a
// nested mapping when value is empty.
func (w *writer) line(indent int, key, value string) {
	w.b.WriteString(strings.Repeat("  ", indent))
	w.b.WriteString(key)
	w.b.WriteString(":")
	if value != "" {
		w.b.WriteString(" ")
		w.b.WriteString(value)
	}
	w.b.WriteString("\n")
}

func (w *writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

// search writes the sections that SearchFingerprint covers.
func (w *writer) search(s *Spec) {
	w.line(0, "name", w.str(s.Name))
	w.line(0, "objective", "")
	w.line(1, "metric", w.str(s.Objective.Metric))
	w.line(1, "goal", w.str(string(s.Objective.Goal)))
	if len(s.Params) == 0 {
		w.line(0, "parameters", "{}")
	} else {
		w.line(0, "parameters", "")
	}
	for i := range s.Params {
		w.param(&s.Params[i])
	}
	w.trainer(&s.Trainer)
	w.line(0, "sampler", "")
	w.line(1, "type", w.str(string(s.Sampler.Type)))
	w.line(1, "seed", strconv.FormatInt(s.Sampler.Seed, 10))
	if s.Scheduler.Type != NoScheduler {
		w.scheduler(&s.Scheduler)
	}
}

// scheduler writes the keys of the scheduler's type.
func (w *writer) scheduler(c *Scheduler) {
	w.line(0, "scheduler", "")
	w.line(1, "type", w.str(string(c.Type)))
	w.line(1, "resource", w.str(c.Resource))
	w.line(1, "min", w.float(c.Min))
	w.line(1, "max", w.float(c.Max))
	switch c.Type {
	case ASHA, Hyperband:
		w.line(1, "reduction_factor", w.float(c.ReductionFactor))
		if c.Type == Hyperband {
			w.line(1, "brackets", strconv.Itoa(c.Brackets))
		}
	case Median:
		w.line(1, "interval", w.float(c.Interval))
		w.line(1, "min_trials", strconv.Itoa(c.MinTrials))
	case PBT:
		w.line(1, "interval", w.float(c.Interval))
		w.line(1, "quantile", w.float(c.Quantile))
		w.line(1, "perturbation_factors", flowList(c.PerturbationFactors, w.float))
		w.line(1, "explore", flowList(c.Explore, w.str))
	}
}

// run writes the sections that may change when a study is resumed.
func (w *writer) run(s *Spec) {
	w.line(0, "max_trials", strconv.Itoa(s.MaxTrials))
	w.line(0, "max_concurrency", strconv.Itoa(s.MaxConcurrency))
	w.line(0, "budget", "")
	w.line(1, "max_wall", s.Budget.MaxWall.String())
	w.line(1, "max_cost_usd", w.float(s.Budget.MaxCostUSD))
	w.backend(&s.Backend)
	w.checkpoint(&s.Checkpoint)
	w.resources(&s.Resources)
	if s.Pool != nil {
		w.pool(s.Pool)
	}
}

func (w *writer) resources(r *Resources) {
	if r.ModelParams == nil && r.GPU == 0 && r.MemoryMB == 0 && r.SegmentTime == 0 {
		return
	}
	w.line(0, "resources", "")
	if q := r.ModelParams; q != nil && q.Table != nil {
		w.line(1, "model_params", "")
		w.line(2, "param", w.str(q.Table.Param))
		w.line(2, "values", "")
		for _, k := range slices.Sorted(maps.Keys(q.Table.Values)) {
			w.line(3, w.str(k), w.float(q.Table.Values[k]))
		}
	} else if q != nil {
		w.line(1, "model_params", w.str(q.Expr))
	}
	w.line(1, "gpu", strconv.Itoa(r.GPU))
	w.line(1, "memory_mb", strconv.Itoa(r.MemoryMB))
	w.line(1, "segment_time", r.SegmentTime.String())
}

func (w *writer) pool(p *Pool) {
	w.line(0, "pool", "")
	w.line(1, "name", w.str(p.Name))
	w.line(1, "queue", w.str(p.Queue))
	w.line(1, "listen", w.str(p.Listen))
	if p.InstanceType != "" {
		w.line(1, "instance_type", w.str(p.InstanceType))
	}
	w.line(1, "price_per_hour", w.float(p.PricePerHour))
	w.line(1, "threshold", w.float(p.Threshold))
}

func (w *writer) backend(b *Backend) {
	w.line(0, "backend", "")
	w.line(1, "type", w.str(string(b.Type)))
	switch b.Type {
	case Lambda:
		w.line(1, "function", w.str(b.Function))
		if b.Region != "" {
			w.line(1, "region", w.str(b.Region))
		}
		w.line(1, "architecture", w.str(b.Architecture))
		w.line(1, "concurrency", strconv.Itoa(b.Concurrency))
	case CloudRun:
		w.line(1, "project", w.str(b.Project))
		w.line(1, "region", w.str(b.Region))
		w.line(1, "job", w.str(b.Job))
		w.line(1, "vcpu", w.float(b.VCPU))
		w.line(1, "gpus", strconv.Itoa(b.GPUs))
		w.line(1, "price_per_vcpu_second", w.float(b.PricePerVCPUSecond))
		w.line(1, "price_per_gpu_second", w.float(b.PricePerGPUSecond))
	}
	w.line(1, "memory_mb", strconv.Itoa(b.MemoryMB))
	w.line(1, "price_per_gb_second", w.float(b.PricePerGBSecond))
	w.line(1, "price_per_request", w.float(b.PricePerRequest))
	w.line(1, "max_runtime", b.MaxRuntime.String())
}

func (w *writer) checkpoint(c *Checkpoint) {
	w.line(0, "checkpoint", "")
	if c.Store != "" {
		w.line(1, "store", w.str(c.Store))
	}
	w.line(1, "every", c.Every.String())
	w.line(1, "grace", c.Grace.String())
	w.line(1, "keep_last", strconv.Itoa(c.KeepLast))
	w.line(1, "keep_checkpoints", w.str(string(c.Keep)))
}

func (w *writer) param(p *Param) {
	w.line(1, w.str(p.Name), "")
	w.line(2, "type", w.str(string(p.Type)))
	bounded := p.Type == Float || p.Type == Int
	bound := w.float
	if p.Type == Int {
		bound = formatInt
	}
	if bounded || p.Min != 0 || p.Max != 0 {
		w.line(2, "min", bound(p.Min))
		w.line(2, "max", bound(p.Max))
	}
	if bounded || p.Log {
		w.line(2, "log", strconv.FormatBool(p.Log))
	}
	if p.Type == Int || p.Step != 0 {
		w.line(2, "step", strconv.FormatInt(p.Step, 10))
	}
	if len(p.Points) > 0 {
		w.line(2, "points", flowList(p.Points, w.float))
	}
	if p.Type == Categorical || len(p.Values) > 0 {
		w.line(2, "values", flowList(p.Values, w.scalar))
	}
	if p.Type == Constant || p.Value != nil {
		w.line(2, "value", w.scalar(p.Value))
	}
	if len(p.When) > 0 {
		w.line(2, "when", "")
		for _, c := range p.When {
			w.line(3, w.str(c.Param), flowList(c.Values, w.scalar))
		}
	}
}

func (w *writer) trainer(t *Trainer) {
	w.line(0, "trainer", "")
	command := len(t.Command) > 0
	if t.Builtin != "" {
		w.line(1, "builtin", w.str(t.Builtin))
	}
	if command {
		w.line(1, "command", flowList(t.Command, w.str))
	}
	if command || len(t.Env) > 0 {
		w.env(t.Env)
	}
	if command || t.Dir != "" {
		w.line(1, "dir", w.str(t.Dir))
	}
	w.line(1, "timeout", t.Timeout.String())
}

func (w *writer) env(env map[string]string) {
	if len(env) == 0 {
		w.line(1, "env", "{}")
		return
	}
	w.line(1, "env", "")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.line(2, w.str(k), w.str(env[k]))
	}
}

// scalar writes a parameter value so that it decodes to the same type.
func (w *writer) scalar(v any) string {
	switch x := v.(type) {
	case string:
		return w.str(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return w.float(x)
	case bool:
		return strconv.FormatBool(x)
	}
	w.fail("parameter value %v has type %T; use string, int64, float64 or bool", v, v)
	return fmt.Sprintf("%T(%v)", v, v)
}

func (w *writer) float(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		w.fail("number %v is not finite", f)
	}
	return formatFloat(f)
}

// safePlain matches strings that YAML reads back as the same string
// without quotes, unless they are numbers or reserved words.
var safePlain = regexp.MustCompile(`^[A-Za-z_./][A-Za-z0-9_./-]*$`)

var reservedWords = []string{"true", "false", "null", "yes", "no", "on", "off", "y", "n", ".inf", ".nan"}

// str writes a string plain when that is safe and double-quoted otherwise.
func (w *writer) str(s string) string {
	if !utf8.ValidString(s) {
		w.fail("string %q is not valid UTF-8", s)
	}
	if safePlain.MatchString(s) && !plainFloat.MatchString(s) && !slices.Contains(reservedWords, strings.ToLower(s)) {
		return s
	}
	return strconv.Quote(s)
}

// formatFloat writes f exactly and so that it reads back as a float: 1 is
// written 1.0.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.ContainsAny(s, ".eEnN") {
		return s
	}
	return s + ".0"
}

// formatInt writes a whole float64 as an integer.
func formatInt(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// flowList writes items as a YAML flow sequence: [a, b, c].
func flowList[T any](items []T, format func(T) string) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = format(it)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
