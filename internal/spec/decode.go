package spec

import (
	"math"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// BuiltinWorkloads are the names trainer.builtin accepts.
var BuiltinWorkloads = []string{"digits-mlp"}

var studyName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

var (
	topKeys     = []string{"name", "objective", "parameters", "trainer", "sampler", "max_trials", "max_concurrency", "budget", "backend", "checkpoint", "scheduler", "resources", "pool"}
	objKeys     = []string{"metric", "goal"}
	trainerKeys = []string{"builtin", "command", "env", "dir", "timeout"}
	samplerKeys = []string{"type", "seed"}
	budgetKeys  = []string{"max_wall", "max_cost_usd"}
)

const maxInt = math.MaxInt

// Load reads and decodes the space file at path.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, data)
}

// Decode parses and validates a space file and fills in defaults. filename
// only names the file in errors. When anything is wrong it returns Errors
// holding every problem found.
func Decode(filename string, data []byte) (*Spec, error) {
	d := &decoder{collector: collector{file: filename}}
	root, ok := d.parse(data)
	if !ok {
		return nil, d.err()
	}
	s := d.spec(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	return s, nil
}

func (d *decoder) spec(root *ast.MappingNode) *Spec {
	o, _ := d.object(field{label: "the space file", node: root}, "the space file", "")
	d.checkKeys(o, topKeys)
	name, objective := d.studyName(o), d.objective(o)
	params, srcs := d.params(o)
	d.checkConditions(params, srcs)
	s := &Spec{
		Name:           name,
		Objective:      objective,
		Params:         params,
		Trainer:        d.trainer(o),
		Sampler:        d.sampler(o),
		MaxTrials:      d.maxTrials(o),
		MaxConcurrency: d.maxConcurrency(o),
		Budget:         d.budget(o),
		Backend:        d.backend(o),
	}
	s.Checkpoint = d.checkpoint(o, s.Backend.MaxRuntime)
	s.Scheduler = d.scheduler(o, s)
	s.Resources = d.resources(o, s.Params)
	s.Pool = d.pool(o)
	if s.Pool == nil {
		d.checkFits(o, s)
	}
	d.checkRemoteStore(o, s)
	if s.Sampler.Type == Grid {
		d.checkGrid(o, s, srcs)
	}
	return s
}

func (d *decoder) studyName(o *object) string {
	f, ok := d.require(o, "name", "add e.g. name: my-study")
	if !ok {
		return ""
	}
	s, ok := d.str(f)
	if ok && !studyName.MatchString(s) {
		d.errorf(f.pos(), "name %q is not a valid study name: use 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", s)
	}
	return s
}

func (d *decoder) objective(root *object) Objective {
	var obj Objective
	f, ok := d.require(root, "objective", "add objective: {metric: val_accuracy, goal: maximize}")
	if !ok {
		return obj
	}
	o, ok := d.object(f, "objective", "objective.")
	if !ok {
		return obj
	}
	d.checkKeys(o, objKeys)
	if f, ok := d.require(o, "metric", "add the name of a metric your trainer reports, e.g. metric: val_accuracy"); ok {
		obj.Metric, _ = d.name(f)
	}
	if f, ok := d.require(o, "goal", "add goal: minimize or goal: maximize"); ok {
		goal, _ := d.enum(f, string(Minimize), string(Maximize))
		obj.Goal = Goal(goal)
	}
	return obj
}

func (d *decoder) trainer(root *object) Trainer {
	t := Trainer{Timeout: DefaultTimeout}
	f, ok := d.require(root, "trainer", "add trainer: {builtin: digits-mlp} or trainer: {command: [python3, train.py]}")
	if !ok {
		return t
	}
	o, ok := d.object(f, "trainer", "trainer.")
	if !ok {
		return t
	}
	d.checkKeys(o, trainerKeys)
	builtin, hasBuiltin := o.get("builtin")
	command, hasCommand := o.get("command")
	switch {
	case hasBuiltin && hasCommand:
		d.errorf(command.key, "trainer has both builtin and command; keep one of them")
	case hasBuiltin:
		t.Builtin = d.builtin(builtin)
		d.commandOnly(o, "env", "dir")
	case hasCommand:
		t.Command = d.command(command)
		t.Env = d.env(o)
		t.Dir = d.dir(o)
	default:
		d.errorf(o.pos, "trainer needs builtin (one of %s) or command (e.g. command: [python3, train.py])", orList(BuiltinWorkloads))
	}
	if f, ok := o.get("timeout"); ok {
		t.Timeout = d.positiveDuration(f)
	}
	return t
}

func (d *decoder) builtin(f field) string {
	s, ok := d.str(f)
	if ok && !slices.Contains(BuiltinWorkloads, s) {
		d.errorf(f.pos(), "unknown builtin workload %q%s; known: %s", s, didYouMean(s, BuiltinWorkloads), orList(BuiltinWorkloads))
	}
	return s
}

// commandOnly reports the keys of a builtin trainer that only apply to a
// command.
func (d *decoder) commandOnly(o *object, keys ...string) {
	for _, k := range keys {
		if f, ok := o.get(k); ok {
			d.errorf(f.key, "trainer.%s applies only to a command trainer; remove it or replace builtin with command", k)
		}
	}
}

func (d *decoder) command(f field) []string {
	items, ok := d.nonEmptyList(f, "give the program and its arguments, e.g. [python3, train.py]")
	if !ok {
		return nil
	}
	cmd := make([]string, len(items))
	for i, it := range items {
		cmd[i], _ = d.str(it)
	}
	if cmd[0] == "" {
		d.errorf(items[0].pos(), "trainer.command[0] must name a program, got an empty string")
	}
	return cmd
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env decodes trainer.env; an empty mapping is nil.
func (d *decoder) env(o *object) map[string]string {
	f, ok := o.get("env")
	if !ok {
		return nil
	}
	e, ok := d.object(f, "trainer.env", "trainer.env.")
	if !ok || len(e.fields) == 0 {
		return nil
	}
	env := make(map[string]string, len(e.fields))
	for _, v := range e.fields {
		if !envName.MatchString(v.name) {
			d.errorf(v.key, "trainer.env: %q is not a valid environment variable name; use letters, digits and '_', not starting with a digit", v.name)
		}
		env[v.name], _ = d.str(v)
	}
	return env
}

// dir decodes trainer.dir, defaulting to ".", the space file's directory.
func (d *decoder) dir(o *object) string {
	f, ok := o.get("dir")
	if !ok {
		return "."
	}
	s, _ := d.name(f)
	return s
}

func (d *decoder) positiveDuration(f field) time.Duration {
	t, ok := d.duration(f)
	if ok && t <= 0 {
		d.errorf(f.pos(), "%s must be positive, got %s", f.label, t)
	}
	return t
}

func (d *decoder) sampler(root *object) Sampler {
	s := Sampler{Type: Random}
	o, ok := d.section(root, "sampler", samplerKeys)
	if !ok {
		return s
	}
	if f, ok := o.get("type"); ok {
		typ, _ := d.enum(f, string(Random), string(Grid), string(Sobol), string(TPE), string(TPEMultivariate), string(GP), string(CMAES))
		s.Type = SamplerType(typ)
	}
	if f, ok := o.get("seed"); ok {
		s.Seed, _ = d.integer(f)
	}
	return s
}

// section decodes an optional mapping of root; ok is false when it is
// absent or not a mapping.
func (d *decoder) section(root *object, name string, keys []string) (*object, bool) {
	f, ok := root.get(name)
	if !ok {
		return nil, false
	}
	o, ok := d.object(f, name, name+".")
	if ok {
		d.checkKeys(o, keys)
	}
	return o, ok
}

func (d *decoder) maxTrials(root *object) int {
	f, ok := d.require(root, "max_trials", "add how many trials to run, e.g. max_trials: 20")
	if !ok {
		return 0
	}
	n, _ := d.intIn(f, 1, maxInt)
	return n
}

func (d *decoder) maxConcurrency(root *object) int {
	f, ok := root.get("max_concurrency")
	if !ok {
		return DefaultMaxConcurrency
	}
	n, _ := d.intIn(f, 1, maxInt)
	return n
}

func (d *decoder) budget(root *object) Budget {
	var b Budget
	o, ok := d.section(root, "budget", budgetKeys)
	if !ok {
		return b
	}
	if f, ok := o.get("max_wall"); ok {
		b.MaxWall = d.nonNegativeDuration(f)
	}
	if f, ok := o.get("max_cost_usd"); ok {
		b.MaxCostUSD, _ = d.nonNegative(f)
	}
	return b
}

func (d *decoder) nonNegativeDuration(f field) time.Duration {
	t, ok := d.duration(f)
	if ok && t < 0 {
		d.errorf(f.pos(), "%s must not be negative, got %s; use 0 for no limit", f.label, t)
	}
	return t
}

// checkGrid reports what makes a grid search impossible: float parameters
// without points, or a grid too large to enumerate.
func (d *decoder) checkGrid(root *object, s *Spec, srcs []paramSrc) {
	missing := false
	for i, p := range s.Params {
		if p.Type == Float && len(p.Points) == 0 && srcs[i].ok {
			missing = true
			d.errorf(srcs[i].pos, "grid sampler needs explicit points for float parameter %s: add points: [...] with the values to try", p.Name)
		}
	}
	if missing || slices.ContainsFunc(srcs, func(p paramSrc) bool { return !p.ok }) {
		return
	}
	if _, err := s.GridSize(); err != nil {
		f, _ := root.get("sampler")
		d.errorf(f.pos(), "%v; use fewer values or another sampler type", err)
	}
}
