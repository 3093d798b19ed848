package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// lines joins YAML lines into a file.
func lines(ls ...string) string {
	return strings.Join(ls, "\n") + "\n"
}

// defaults is the minimal valid spec decoded, for tests to adjust.
func defaults(params ...Param) *Spec {
	return &Spec{
		Name:           "test",
		Objective:      Objective{Metric: "loss", Goal: Minimize},
		Params:         params,
		Trainer:        Trainer{Builtin: "digits-mlp", Timeout: DefaultTimeout},
		Sampler:        Sampler{Type: Random},
		MaxTrials:      5,
		MaxConcurrency: DefaultMaxConcurrency,
		Backend: Backend{
			Type:             Local,
			MemoryMB:         DefaultMemoryMB,
			PricePerGBSecond: DefaultPricePerGBSecond,
			PricePerRequest:  DefaultPricePerRequest,
		},
		Checkpoint: defaultCheckpoint,
	}
}

var defaultCheckpoint = Checkpoint{Every: time.Minute, Grace: 10 * time.Second, KeepLast: 2, Keep: KeepBest}

// minimal is a valid space file around the given parameters lines.
func minimal(params ...string) string {
	head := []string{"name: test", "objective: {metric: loss, goal: minimize}", "parameters:"}
	tail := []string{"trainer: {builtin: digits-mlp}", "max_trials: 5"}
	return lines(append(append(head, params...), tail...)...)
}

var floatX = Param{Name: "x", Type: Float, Min: 0, Max: 1}

type validCase struct {
	name string
	yaml string
	want *Spec
}

var validCases = []validCase{
	{
		name: "minimal with defaults",
		yaml: minimal("  x: {type: float, min: 0, max: 1}"),
		want: defaults(floatX),
	},
	{
		name: "full example",
		yaml: lines(
			"name: digits-quickstart",
			"objective:",
			"  metric: val_accuracy",
			"  goal: maximize",
			"parameters:",
			"  learning_rate: {type: float, min: 0.001, max: 0.5, log: true}",
			"  hidden_units: {type: int, min: 16, max: 128, step: 16}",
			"  batch_size: {type: categorical, values: [16, 32, 64]}",
			"  optimizer: {type: categorical, values: [sgd, momentum]}",
			"  momentum: {type: float, min: 0.5, max: 0.99, points: [0.5, 0.9, 0.99], when: {optimizer: [momentum]}}",
			"  epochs: {type: constant, value: 20}",
			"trainer:",
			"  command: [python3, train.py]",
			"  env: {KEY: value}",
			"  dir: .",
			"  timeout: 10m",
			"sampler:",
			"  type: random",
			"  seed: 42",
			"max_trials: 20",
			"max_concurrency: 2",
			"budget:",
			"  max_wall: 30m",
			"  max_cost_usd: 1.5",
			"backend:",
			"  type: local",
			"  memory_mb: 1024",
			"  price_per_gb_second: 0.0000133334",
			"  price_per_request: 0.0000002",
		),
		want: &Spec{
			Name:      "digits-quickstart",
			Objective: Objective{Metric: "val_accuracy", Goal: Maximize},
			Params: []Param{
				{Name: "learning_rate", Type: Float, Min: 0.001, Max: 0.5, Log: true},
				{Name: "hidden_units", Type: Int, Min: 16, Max: 128, Step: 16},
				{Name: "batch_size", Type: Categorical, Values: []any{int64(16), int64(32), int64(64)}},
				{Name: "optimizer", Type: Categorical, Values: []any{"sgd", "momentum"}},
				{Name: "momentum", Type: Float, Min: 0.5, Max: 0.99, Points: []float64{0.5, 0.9, 0.99},
					When: []Condition{{Param: "optimizer", Values: []any{"momentum"}}}},
				{Name: "epochs", Type: Constant, Value: int64(20)},
			},
			Trainer: Trainer{
				Command: []string{"python3", "train.py"},
				Env:     map[string]string{"KEY": "value"},
				Dir:     ".",
				Timeout: 10 * time.Minute,
			},
			Sampler:        Sampler{Type: Random, Seed: 42},
			MaxTrials:      20,
			MaxConcurrency: 2,
			Budget:         Budget{MaxWall: 30 * time.Minute, MaxCostUSD: 1.5},
			Backend:        Backend{Type: Local, MemoryMB: 1024, PricePerGBSecond: 0.0000133334, PricePerRequest: 0.0000002},
			Checkpoint:     defaultCheckpoint,
		},
	},
	{
		name: "block style, exponent floats and int bounds as floats",
		yaml: minimal(
			"  lr:",
			"    type: float",
			"    min: 1e-5",
			"    max: 1E+0",
			"    log: true",
			"  layers:",
			"    type: int",
			"    min: 1.0",
			"    max: 4",
			"    log: true",
		),
		want: defaults(
			Param{Name: "lr", Type: Float, Min: 1e-5, Max: 1, Log: true},
			Param{Name: "layers", Type: Int, Min: 1, Max: 4, Log: true, Step: 1},
		),
	},
	{
		name: "scalar kinds in categorical values and constants",
		yaml: minimal(
			`  c: {type: categorical, values: [a, "1", 2, 2.5, 3.0, true, 'no', 1e3]}`,
			"  k: {type: constant, value: false}",
			`  s: {type: constant, value: "007"}`,
			"  f: {type: constant, value: 1.0}",
		),
		want: defaults(
			Param{Name: "c", Type: Categorical, Values: []any{"a", "1", int64(2), 2.5, 3.0, true, "no", 1000.0}},
			Param{Name: "k", Type: Constant, Value: false},
			Param{Name: "s", Type: Constant, Value: "007"},
			Param{Name: "f", Type: Constant, Value: 1.0},
		),
	},
	{
		name: "conditions on categorical, int and constant parameters",
		yaml: minimal(
			"  opt: {type: categorical, values: [sgd, adam, 3]}",
			"  n: {type: int, min: 0, max: 10, step: 5}",
			"  k: {type: constant, value: on}",
			"  beta: {type: float, min: 0, max: 1, when: {opt: [adam, 3.0], n: [5, 10], k: [on]}}",
		),
		want: defaults(
			Param{Name: "opt", Type: Categorical, Values: []any{"sgd", "adam", int64(3)}},
			Param{Name: "n", Type: Int, Min: 0, Max: 10, Step: 5},
			Param{Name: "k", Type: Constant, Value: "on"},
			Param{Name: "beta", Type: Float, Min: 0, Max: 1, When: []Condition{
				{Param: "opt", Values: []any{"adam", 3.0}},
				{Param: "n", Values: []any{int64(5), int64(10)}},
				{Param: "k", Values: []any{"on"}},
			}},
		),
	},
	{
		name: "grid sampler with points, zero limits and command defaults",
		yaml: lines(
			"name: grid.1",
			"objective: {metric: loss, goal: minimize}",
			"parameters:",
			"  x: {type: float, min: -1, max: 1, points: [-1, 0, 0.5]}",
			"  n: {type: int, min: -3, max: 3, step: 2}",
			"trainer:",
			"  command: [./train, --fast, '']",
			"  env: {}",
			"sampler: {type: grid, seed: -7}",
			"max_trials: 1000",
			"budget: {max_wall: 0, max_cost_usd: 0}",
			"backend: {memory_mb: 128, price_per_gb_second: 0, price_per_request: 1}",
		),
		want: &Spec{
			Name:      "grid.1",
			Objective: Objective{Metric: "loss", Goal: Minimize},
			Params: []Param{
				{Name: "x", Type: Float, Min: -1, Max: 1, Points: []float64{-1, 0, 0.5}},
				{Name: "n", Type: Int, Min: -3, Max: 3, Step: 2},
			},
			Trainer:        Trainer{Command: []string{"./train", "--fast", ""}, Dir: ".", Timeout: time.Hour},
			Sampler:        Sampler{Type: Grid, Seed: -7},
			MaxTrials:      1000,
			MaxConcurrency: 1,
			Backend:        Backend{Type: Local, MemoryMB: 128, PricePerRequest: 1},
			Checkpoint:     defaultCheckpoint,
		},
	},
	{
		name: "checkpoints and a bounded runtime",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + lines(
			"backend: {max_runtime: 15m}",
			"checkpoint:",
			"  store: s3://bucket/studies",
			"  every: 30s",
			"  keep_last: 1",
			"  keep_checkpoints: all",
		),
		want: func() *Spec {
			s := defaults(floatX)
			s.Backend.MaxRuntime = 15 * time.Minute
			s.Checkpoint = Checkpoint{Store: "s3://bucket/studies", Every: 30 * time.Second, Grace: 10 * time.Second, KeepLast: 1, Keep: KeepAll}
			return s
		}(),
	},
	{
		name: "default grace from a short runtime",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + lines(
			"backend: {max_runtime: 30s}",
			"checkpoint: {store: /var/ckpt, grace: 5s, keep_checkpoints: none}",
		),
		want: func() *Spec {
			s := defaults(floatX)
			s.Backend.MaxRuntime = 30 * time.Second
			s.Checkpoint = Checkpoint{Store: "/var/ckpt", Every: time.Minute, Grace: 5 * time.Second, KeepLast: 2, Keep: KeepNone}
			return s
		}(),
	},
	{
		name: "grace a tenth of the runtime",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + "backend: {max_runtime: 20s}\n",
		want: func() *Spec {
			s := defaults(floatX)
			s.Backend.MaxRuntime = 20 * time.Second
			s.Checkpoint.Grace = 2 * time.Second
			return s
		}(),
	},
	{
		name: "tpe sampler",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + "sampler: {type: tpe-multivariate, seed: 7}\n",
		want: func() *Spec {
			s := defaults(floatX)
			s.Sampler = Sampler{Type: TPEMultivariate, Seed: 7}
			return s
		}(),
	},
	{
		name: "asha scheduler",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 1, max: 27}\n",
		want: func() *Spec {
			s := defaults(floatX)
			s.Scheduler = Scheduler{Type: ASHA, Resource: "epoch", Min: 1, Max: 27, ReductionFactor: 3, MinTrials: 5, Quantile: 0.25}
			return s
		}(),
	},
	{
		name: "hyperband with default brackets",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: hyperband, min: 1, max: 81, reduction_factor: 3, resource: step}\n",
		want: func() *Spec {
			s := defaults(floatX)
			s.Scheduler = Scheduler{Type: Hyperband, Resource: "step", Min: 1, Max: 81, ReductionFactor: 3, Brackets: 5, MinTrials: 5, Quantile: 0.25}
			return s
		}(),
	},
	{
		name: "median stopping",
		yaml: minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: median, min: 2, max: 20, interval: 3, min_trials: 4}\n",
		want: func() *Spec {
			s := defaults(floatX)
			s.Scheduler = Scheduler{Type: Median, Resource: "epoch", Min: 2, Max: 20, Interval: 3, ReductionFactor: 3, MinTrials: 4, Quantile: 0.25}
			return s
		}(),
	},
	{
		name: "pbt explores floats by default",
		yaml: minimal("  x: {type: float, min: 0, max: 1}", "  n: {type: int, min: 1, max: 4}") + "scheduler: {type: pbt, min: 2, max: 20, quantile: 0.2}\n",
		want: func() *Spec {
			s := defaults(floatX, Param{Name: "n", Type: Int, Min: 1, Max: 4, Step: 1})
			s.Scheduler = Scheduler{Type: PBT, Resource: "epoch", Min: 2, Max: 20, Interval: 2, ReductionFactor: 3, MinTrials: 5, Quantile: 0.2,
				PerturbationFactors: []float64{0.8, 1.2}, Explore: []string{"x"}}
			return s
		}(),
	},
	{
		name: "pbt with explicit factors and parameters",
		yaml: minimal("  x: {type: float, min: 0, max: 1}", "  n: {type: int, min: 1, max: 4}") + "scheduler: {type: pbt, min: 2, max: 20, interval: 4, perturbation_factors: [0.5, 2], explore: [n, x]}\n",
		want: func() *Spec {
			s := defaults(floatX, Param{Name: "n", Type: Int, Min: 1, Max: 4, Step: 1})
			s.Scheduler = Scheduler{Type: PBT, Resource: "epoch", Min: 2, Max: 20, Interval: 4, ReductionFactor: 3, MinTrials: 5, Quantile: 0.25,
				PerturbationFactors: []float64{0.5, 2}, Explore: []string{"n", "x"}}
			return s
		}(),
	},
	{
		name: "resources and a pool",
		yaml: minimal("  x: {type: float, min: 0, max: 1}", "  layers: {type: int, min: 2, max: 48}", "  size: {type: categorical, values: [small, xl]}") + lines(
			"resources:",
			"  model_params: 12 * layers * pow(4096, 2)",
			"  gpu: 1",
			"  segment_time: 20m",
			"pool: {name: gpu, instance_type: g5.xlarge}",
		),
		want: func() *Spec {
			s := defaults(floatX, Param{Name: "layers", Type: Int, Min: 2, Max: 48, Step: 1}, Param{Name: "size", Type: Categorical, Values: []any{"small", "xl"}})
			s.Resources = Resources{ModelParams: &Quantity{Expr: "12 * layers * pow(4096, 2)"}, GPU: 1, SegmentTime: 20 * time.Minute}
			s.Pool = &Pool{Name: "gpu", Queue: "http", Listen: DefaultPoolListen, InstanceType: "g5.xlarge", PricePerHour: 1.006, Threshold: 1e9}
			return s
		}(),
	},
	{
		name: "model size from a table, pool over sqs",
		yaml: minimal("  size: {type: categorical, values: [small, xl]}") + lines(
			"resources: {model_params: {param: size, values: {small: 1.2e8, xl: 3e9}}}",
			"pool: {name: big, queue: 'sqs://hp-big?records=bucket&region=eu-west-1', price_per_hour: 2.5, threshold: 5e8}",
		),
		want: func() *Spec {
			s := defaults(Param{Name: "size", Type: Categorical, Values: []any{"small", "xl"}})
			s.Resources = Resources{ModelParams: &Quantity{Table: &QuantityTable{Param: "size", Values: map[string]float64{"small": 1.2e8, "xl": 3e9}}}}
			s.Pool = &Pool{Name: "big", Queue: "sqs://hp-big?records=bucket&region=eu-west-1", Listen: DefaultPoolListen, PricePerHour: 2.5, Threshold: 5e8}
			return s
		}(),
	},
	{
		name: "document marker, comments and quoted keys",
		yaml: lines(
			"# a study",
			"---",
			`"name": test`,
			"objective: {metric: loss, goal: minimize}",
			"parameters:",
			"  'x': {type: float, min: 0, max: 1}  # the only one",
			"trainer: {builtin: digits-mlp, timeout: 1h30m}",
			"max_trials: 5",
			"sampler: {type: sobol}",
		),
		want: func() *Spec {
			s := defaults(floatX)
			s.Trainer.Timeout = 90 * time.Minute
			s.Sampler.Type = Sobol
			return s
		}(),
	},
}

func TestDecodeValid(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode("space.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

// TestValidFiles decodes the example files.
func TestValidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no files in testdata/valid")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			if _, err := Load(file); err != nil {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}

type invalidCase struct {
	name string
	yaml string
	at   string // file:line:col of the one error
	msg  string // a fragment of its message
}

var invalidCases = []invalidCase{
	// The file as a whole.
	{"empty file", "", "space.yaml:1:1", "the space file is empty"},
	{"comments only", "# nothing\n", "space.yaml:1:1", "the space file is empty"},
	{"list root", "- a\n- b\n", "space.yaml:1:1", "must be a mapping with keys like name:, objective: and parameters:, got a list"},
	{"scalar root", "\n\nhello\n", "space.yaml:1:1", `got string "hello"`},
	{"syntax error", "name: [test\n", "space.yaml:1:7", "YAML syntax error"},
	{"bad indentation", lines("name: test", "objective:", "  metric: loss", " goal: x"), "space.yaml:4:2", "YAML syntax error"},
	{"not UTF-8", "name: t\xffst\n", "space.yaml:1:8", "not valid UTF-8"},
	{"too large", strings.Repeat("#", maxFileSize+1), "space.yaml:1:1", "more than the limit of 65536 bytes"},
	{"too deep", "name: " + strings.Repeat("[", maxDepth+1), "space.yaml:1:106", "nests more than 100 levels deep"},
	{"two documents", minimal("  x: {type: float, min: 0, max: 1}") + "---\nname: other\n", "space.yaml:7:1", "one YAML document"},

	// Top-level keys.
	{"missing name", lines("objective: {metric: loss, goal: minimize}", "parameters: {x: {type: float, min: 0, max: 1}}", "trainer: {builtin: digits-mlp}", "max_trials: 5"),
		"space.yaml:1:1", `the space file is missing required key "name"; add e.g. name: my-study`},
	{"bad name", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "name: test", "name: My Study", 1),
		"space.yaml:1:7", `name "My Study" is not a valid study name`},
	{"unknown top-level key", minimal("  x: {type: float, min: 0, max: 1}") + "max_trail: 3\n",
		"space.yaml:7:1", `unknown key "max_trail" in the space file (did you mean "max_trials"?); allowed: name, objective,`},
	{"duplicate key", minimal("  x: {type: float, min: 0, max: 1}") + "max_trials: 6\n",
		"space.yaml:7:1", `duplicate key "max_trials" in the space file (first at line 6)`},
	{"max_trials not an integer", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "max_trials: 5", "max_trials: ten", 1),
		"space.yaml:6:13", `max_trials must be an integer, got string "ten"`},
	{"max_trials zero", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "max_trials: 5", "max_trials: 0", 1),
		"space.yaml:6:13", "max_trials must be at least 1, got 0"},
	{"max_trials out of range", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "max_trials: 5", "max_trials: 99999999999999999999", 1),
		"space.yaml:6:13", "max_trials: integer 99999999999999999999 is out of range"},
	{"max_concurrency float", minimal("  x: {type: float, min: 0, max: 1}") + "max_concurrency: 1.5\n",
		"space.yaml:7:18", "max_concurrency must be an integer, got number 1.5"},
	{"alias", lines("name: &n test", "objective: {metric: loss, goal: minimize}", "parameters: {x: {type: float, min: 0, max: 1}}", "trainer: {builtin: digits-mlp}", "max_trials: 5"),
		"space.yaml:1:7", "name: anchors (&name) are not supported"},
	{"tag", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "max_trials: 5", "max_trials: !!int 5", 1),
		"space.yaml:6:13", "max_trials: YAML tags (!!int) are not supported"},
	{"non-string key", minimal("  x: {type: float, min: 0, max: 1}") + "1: one\n",
		"space.yaml:7:1", "the space file: keys must be names, got integer 1"},

	// Objective.
	{"objective missing goal", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{metric: loss, goal: minimize}", "\n  metric: loss", 1),
		"space.yaml:3:3", `objective is missing required key "goal"; add goal: minimize or goal: maximize`},
	{"misspelt required key", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "metric:", "metrc:", 1),
		"space.yaml:2:13", `unknown key "metrc" in objective (did you mean "metric"?); allowed: metric, goal`},
	{"objective bad goal", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "goal: minimize", "goal: minimise", 1),
		"space.yaml:2:33", `objective.goal must be minimize or maximize, got "minimise" (did you mean "minimize"?)`},
	{"objective not a mapping", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{metric: loss, goal: minimize}", "loss", 1),
		"space.yaml:2:12", "objective must be a mapping, got string"},
	{"objective empty value", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{metric: loss, goal: minimize}", "", 1),
		"space.yaml:2:1", "objective must be a mapping, got null"},
	{"empty metric", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "metric: loss", `metric: ""`, 1),
		"space.yaml:2:21", "objective.metric must not be empty"},

	// Parameters.
	{"no parameters", lines("name: test", "objective: {metric: loss, goal: minimize}", "parameters: {}", "trainer: {builtin: digits-mlp}", "max_trials: 5"),
		"space.yaml:3:13", "parameters must declare at least one parameter"},
	{"bad parameter name", minimal("  learning-rate: {type: float, min: 0, max: 1}"),
		"space.yaml:4:3", `parameter name "learning-rate" is invalid`},
	{"missing type", minimal("  x: {min: 0, max: 1}"),
		"space.yaml:4:6", `parameter "x" is missing required key "type"; add type: float, int, categorical or constant`},
	{"unknown type", minimal("  x: {type: double, min: 0, max: 1}"),
		"space.yaml:4:13", `parameter "x": type must be float, int, categorical or constant, got "double"`},
	{"misspelt key", minimal("  x: {type: int, min: 0, max: 10, stpe: 2}"),
		"space.yaml:4:35", `unknown key "stpe" in parameter "x" (did you mean "step"?); allowed: type, min, max, log, step, when`},
	{"key of another type", minimal("  x: {type: float, min: 0, max: 1, values: [1]}"),
		"space.yaml:4:36", `key "values" does not apply to a float parameter; allowed in parameter "x": type, min, max, log, points, when`},
	{"step on float", minimal("  x: {type: float, min: 0, max: 1, step: 1}"),
		"space.yaml:4:36", "list its values in points"},
	{"float missing max", minimal("  x: {type: float, min: 0}"),
		"space.yaml:4:6", `parameter "x" is missing required key "max"`},
	{"float min not a number", minimal("  x: {type: float, min: low, max: 1}"),
		"space.yaml:4:25", `parameter "x": min must be a number, got string "low"`},
	{"float infinite", minimal("  x: {type: float, min: 0, max: .inf}"),
		"space.yaml:4:33", `parameter "x": max must be a finite number`},
	{"float min equals max", minimal("  x: {type: float, min: 1, max: 1}"),
		"space.yaml:4:25", `parameter "x": min must be less than max`},
	{"float log from zero", minimal("  x: {type: float, min: 0, max: 1, log: true}"),
		"space.yaml:4:41", `parameter "x": log: true needs min > 0, got min 0`},
	{"log not a boolean", minimal("  x: {type: float, min: 1, max: 2, log: yes}"),
		"space.yaml:4:41", `parameter "x": log must be true or false, got string "yes"`},
	{"point outside bounds", minimal("  x: {type: float, min: 0, max: 1, points: [0, 2]}"),
		"space.yaml:4:48", `parameter "x": points[1] (2) is outside [min, max] = [0, 1]`},
	{"duplicate point", minimal("  x: {type: float, min: 0, max: 1, points: [0.5, 0.5]}"),
		"space.yaml:4:50", "duplicate point 0.5"},
	{"empty points", minimal("  x: {type: float, min: 0, max: 1, points: []}"),
		"space.yaml:4:44", `parameter "x": points must not be empty`},
	{"int min not whole", minimal("  n: {type: int, min: 0.5, max: 4}"),
		"space.yaml:4:23", `parameter "n": min must be a whole number`},
	{"int min above max", minimal("  n: {type: int, min: 5, max: 4}"),
		"space.yaml:4:23", `parameter "n": min must not be greater than max, got min 5 and max 4`},
	{"int step zero", minimal("  n: {type: int, min: 0, max: 4, step: 0}"),
		"space.yaml:4:40", `parameter "n": step must be at least 1, got 0`},
	{"int log with step", minimal("  n: {type: int, min: 1, max: 64, log: true, step: 2}"),
		"space.yaml:4:52", `parameter "n": step above 1 cannot be combined with log: true`},
	{"int log from zero", minimal("  n: {type: int, min: 0, max: 64, log: true}"),
		"space.yaml:4:40", "log: true needs min > 0"},
	{"categorical without values", minimal("  c: {type: categorical}"),
		"space.yaml:4:6", `parameter "c" is missing required key "values"`},
	{"categorical with value", minimal("  c: {type: categorical, value: [a]}"),
		"space.yaml:4:26", `key "value" does not apply to a categorical parameter; allowed in parameter "c": type, values, when`},
	{"categorical empty", minimal("  c: {type: categorical, values: []}"),
		"space.yaml:4:34", `parameter "c": values must not be empty`},
	{"categorical not a list", minimal("  c: {type: categorical, values: a}"),
		"space.yaml:4:34", `parameter "c": values must be a list, got string "a"`},
	{"categorical duplicate", minimal("  c: {type: categorical, values: [1, 2, 1.0]}"),
		"space.yaml:4:41", `parameter "c": values[2]: duplicate value 1`},
	{"categorical non-scalar", minimal("  c: {type: categorical, values: [a, [b]]}"),
		"space.yaml:4:38", `parameter "c": values[1] must be a string, number or boolean, got a list`},
	{"categorical null", minimal("  c: {type: categorical, values: [a, null]}"),
		"space.yaml:4:38", "got null"},
	{"constant without value", minimal("  k: {type: constant}"),
		"space.yaml:4:6", `parameter "k" is missing required key "value"`},
	{"parameter not a mapping", minimal("  x: float"),
		"space.yaml:4:6", `parameters.x must be a mapping, got string "float"`},

	// Conditions.
	{"condition on unknown parameter", minimal("  opt: {type: categorical, values: [a]}", "  x: {type: float, min: 0, max: 1, when: {otp: [a]}}"),
		"space.yaml:5:43", `parameter "x": when names unknown parameter "otp" (did you mean "opt"?); declared parameters: opt, x`},
	{"condition on itself", minimal("  x: {type: int, min: 0, max: 1, when: {x: [1]}}"),
		"space.yaml:4:41", `parameter "x": when cannot refer to the parameter itself`},
	{"condition on float", minimal("  y: {type: float, min: 0, max: 1}", "  x: {type: int, min: 0, max: 1, when: {y: [1]}}"),
		"space.yaml:5:41", `when cannot depend on float parameter "y"`},
	{"condition on later parameter", minimal("  x: {type: int, min: 0, max: 1, when: {y: [1]}}", "  y: {type: int, min: 0, max: 1}"),
		"space.yaml:4:41", `parameter "x" depends on "y", which is declared after it; declare "y" first`},
	{"condition cycle", minimal("  x: {type: int, min: 0, max: 1, when: {y: [1]}}", "  y: {type: int, min: 0, max: 1, when: {x: [1]}}"),
		"space.yaml:4:41", "conditions form a cycle: x → y → x"},
	{"condition value not possible", minimal("  opt: {type: categorical, values: [sgd, adam]}", "  x: {type: float, min: 0, max: 1, when: {opt: [adamw]}}"),
		"space.yaml:5:49", `parameter "x": when opt: "adamw" is not a value of parameter "opt", which takes "sgd", "adam"`},
	{"condition value off the int grid", minimal("  n: {type: int, min: 0, max: 10, step: 5}", "  x: {type: float, min: 0, max: 1, when: {n: [3]}}"),
		"space.yaml:5:47", "which takes whole numbers from 0 to 10 in steps of 5"},
	{"condition value not the constant", minimal("  k: {type: constant, value: 1}", "  x: {type: float, min: 0, max: 1, when: {k: [2]}}"),
		"space.yaml:5:47", "which takes only 1"},
	{"condition values not a list", minimal("  k: {type: constant, value: 1}", "  x: {type: float, min: 0, max: 1, when: {k: 1}}"),
		"space.yaml:5:46", `parameter "x": when.k must be a list, got integer 1`},
	{"empty condition", minimal("  k: {type: constant, value: 1}", "  x: {type: float, min: 0, max: 1, when: {k: []}}"),
		"space.yaml:5:46", `parameter "x": when.k must not be empty`},
	{"empty when", minimal("  x: {type: float, min: 0, max: 1, when: {}}"),
		"space.yaml:4:42", `parameter "x": when must name at least one parameter`},

	// Trainer.
	{"missing trainer", lines("name: test", "objective: {metric: loss, goal: minimize}", "parameters: {x: {type: float, min: 0, max: 1}}", "max_trials: 5"),
		"space.yaml:1:1", `the space file is missing required key "trainer"`},
	{"trainer with neither", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{timeout: 1m}", 1),
		"space.yaml:5:10", "trainer needs builtin (one of digits-mlp) or command"},
	{"trainer with both", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{builtin: digits-mlp, command: [python3]}", 1),
		"space.yaml:5:32", "trainer has both builtin and command; keep one of them"},
	{"unknown builtin", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "digits-mlp", "digit-mlp", 1),
		"space.yaml:5:20", `unknown builtin workload "digit-mlp" (did you mean "digits-mlp"?); known: digits-mlp`},
	{"env with builtin", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{builtin: digits-mlp, dir: x}", 1),
		"space.yaml:5:32", "trainer.dir applies only to a command trainer"},
	{"empty command", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{command: []}", 1),
		"space.yaml:5:20", "trainer.command must not be empty"},
	{"command string", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{command: python3 train.py}", 1),
		"space.yaml:5:20", `trainer.command must be a list, got string "python3 train.py"`},
	{"command number argument", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{command: [python3, 5]}", 1),
		"space.yaml:5:30", "trainer.command[1] must be a string, got integer 5; quote it"},
	{"command empty program", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", `{command: [""]}`, 1),
		"space.yaml:5:21", "trainer.command[0] must name a program"},
	{"env number value", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{command: [a], env: {N: 1}}", 1),
		"space.yaml:5:34", "trainer.env.N must be a string, got integer 1; quote it"},
	{"env bad name", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{command: [a], env: {A-B: x}}", 1),
		"space.yaml:5:31", `trainer.env: "A-B" is not a valid environment variable name`},
	{"empty dir", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", `{command: [a], dir: ""}`, 1),
		"space.yaml:5:30", "trainer.dir must not be empty"},
	{"bad duration", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{builtin: digits-mlp, timeout: 10 minutes}", 1),
		"space.yaml:5:41", `trainer.timeout: "10 minutes" is not a duration; write a number with a unit, like 90s, 30m or 1h30m`},
	{"duration without unit", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{builtin: digits-mlp, timeout: 600}", 1),
		"space.yaml:5:41", "trainer.timeout must be a duration with a unit, like 90s, 30m or 1h30m, got integer 600"},
	{"zero timeout", strings.Replace(minimal("  x: {type: float, min: 0, max: 1}"), "{builtin: digits-mlp}", "{builtin: digits-mlp, timeout: 0s}", 1),
		"space.yaml:5:41", "trainer.timeout must be positive, got 0s"},

	// Sampler, budget and backend.
	{"unknown sampler", minimal("  x: {type: float, min: 0, max: 1}") + "sampler: {type: bayes}\n",
		"space.yaml:7:17", "sampler.type must be random, grid, sobol, tpe, tpe-multivariate, gp or cmaes, got \"bayes\""},
	{"seed not an integer", minimal("  x: {type: float, min: 0, max: 1}") + "sampler: {seed: abc}\n",
		"space.yaml:7:17", `sampler.seed must be an integer, got string "abc"`},
	{"grid without points", minimal("  x: {type: float, min: 0, max: 1}") + "sampler: {type: grid}\n",
		"space.yaml:4:3", "grid sampler needs explicit points for float parameter x: add points: [...]"},
	{"grid too large", minimal("  a: {type: int, min: 0, max: 99999}", "  b: {type: int, min: 0, max: 99999}") + "sampler: {type: grid}\n",
		"space.yaml:8:10", "the grid has more than 1000000000 points; use fewer values or another sampler type"},
	{"negative max_wall", minimal("  x: {type: float, min: 0, max: 1}") + "budget: {max_wall: -1h}\n",
		"space.yaml:7:20", "budget.max_wall must not be negative, got -1h0m0s"},
	{"negative cost", minimal("  x: {type: float, min: 0, max: 1}") + "budget: {max_cost_usd: -0.5}\n",
		"space.yaml:7:24", "budget.max_cost_usd must not be negative, got -0.5"},
	{"budget unknown key", minimal("  x: {type: float, min: 0, max: 1}") + "budget: {max_cost: 1}\n",
		"space.yaml:7:10", `unknown key "max_cost" in budget`},
	{"unknown backend", minimal("  x: {type: float, min: 0, max: 1}") + "backend: {type: ec2}\n",
		"space.yaml:7:17", `backend.type must be local, lambda or cloudrun, got "ec2"`},
	{"memory too small", minimal("  x: {type: float, min: 0, max: 1}") + "backend: {memory_mb: 64}\n",
		"space.yaml:7:22", "backend.memory_mb must be between 128 and 10240, got 64"},
	{"runtime too short", minimal("  x: {type: float, min: 0, max: 1}") + "backend: {max_runtime: 10ms}\n",
		"space.yaml:7:24", "backend.max_runtime must be 0 (no bound) or at least 1s, got 10ms"},
	{"grace not shorter than runtime", minimal("  x: {type: float, min: 0, max: 1}") + "backend: {max_runtime: 5s}\ncheckpoint: {grace: 5s}\n",
		"space.yaml:8:21", "checkpoint.grace (5s) must be shorter than backend.max_runtime (5s)"},
	{"zero checkpoint interval", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {every: 0s}\n",
		"space.yaml:7:21", "checkpoint.every must be positive"},
	{"keep_last zero", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {keep_last: 0}\n",
		"space.yaml:7:25", "checkpoint.keep_last must be at least 1, got 0"},
	{"unknown keep policy", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {keep_checkpoints: latest}\n",
		"space.yaml:7:32", `checkpoint.keep_checkpoints must be best, all or none, got "latest"`},
	{"unknown store scheme", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {store: 'gs://b/p'}\n",
		"space.yaml:7:21", `checkpoint.store: unknown scheme "gs"; use a path, file:///path or s3://bucket/prefix`},
	{"s3 store without bucket", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {store: 's3:///p'}\n",
		"space.yaml:7:21", "s3:// needs a bucket"},
	{"file store without path", minimal("  x: {type: float, min: 0, max: 1}") + "checkpoint: {store: 'file://'}\n",
		"space.yaml:7:21", "file:// needs a path"},
	{"negative price", minimal("  x: {type: float, min: 0, max: 1}") + "backend: {price_per_request: -1}\n",
		"space.yaml:7:30", "backend.price_per_request must not be negative"},
	{"scheduler without type", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {min: 1, max: 9}\n",
		"space.yaml:7:12", `scheduler is missing required key "type"`},
	{"unknown scheduler", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asah, min: 1, max: 9}\n",
		"space.yaml:7:19", "scheduler.type must be asha, hyperband, median or pbt"},
	{"scheduler key of another type", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 1, max: 9, quantile: 0.2}\n",
		"space.yaml:7:41", `unknown key "quantile" in scheduler`},
	{"scheduler max not above min", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 9, max: 9}\n",
		"space.yaml:7:38", "scheduler.max (9) must be greater than scheduler.min (9)"},
	{"scheduler min zero", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 0, max: 9}\n",
		"space.yaml:7:30", "scheduler.min must be positive, got 0"},
	{"reduction factor one", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 1, max: 9, reduction_factor: 1}\n",
		"space.yaml:7:59", "scheduler.reduction_factor must be greater than 1, got 1"},
	{"too many brackets", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: hyperband, min: 1, max: 9, brackets: 4}\n",
		"space.yaml:7:56", "scheduler.brackets is 4, but only 3 fit"},
	{"quantile too large", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: pbt, min: 1, max: 9, quantile: 0.6}\n",
		"space.yaml:7:50", "scheduler.quantile must be above 0 and at most 0.5, got 0.6"},
	{"explore unknown parameter", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: pbt, min: 1, max: 9, explore: [y]}\n",
		"space.yaml:7:50", `scheduler.explore[0]: no parameter "y"`},
	{"perturbation factor zero", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: pbt, min: 1, max: 9, perturbation_factors: [0.8, 0]}\n",
		"space.yaml:7:68", "scheduler.perturbation_factors[1] must be positive, got 0"},
	{"fractional rungs for epochs", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: asha, min: 1, max: 9, reduction_factor: 1.5}\n",
		"space.yaml:7:12", "rung 1.5 is not one"},
	{"fractional max for epochs", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: median, min: 1, max: 8.5}\n",
		"space.yaml:7:12", "rung 8.5 is not one"},
	{"too many rungs", minimal("  x: {type: float, min: 0, max: 1}") + "scheduler: {type: pbt, min: 1e-9, max: 1e9, interval: 1}\n",
		"space.yaml:7:12", "rungs between min (1e-09) and max (1e+09) are too many"},
	{"pbt without floats", minimal("  n: {type: int, min: 1, max: 4}") + "scheduler: {type: pbt, min: 1, max: 9}\n",
		"space.yaml:7:12", "pbt has no parameter to perturb"},
	{"model params over an unknown parameter", minimal("  x: {type: float, min: 0, max: 1}") + "resources: {model_params: 12 * layer}\n",
		"space.yaml:7:27", `resources.model_params: no parameter "layer"`},
	{"model params expression with an operator", minimal("  x: {type: float, min: 0, max: 1}") + "resources: {model_params: 'x ^ 2'}\n",
		"space.yaml:7:27", "operator ^ is not supported; use + - * / ( ) and pow(x, y)"},
	{"model params table missing a value", minimal("  s: {type: categorical, values: [a, b]}") + "resources: {model_params: {param: s, values: {a: 1}}}\n",
		"space.yaml:7:46", "has no entry for b"},
	{"gpu without a pool", minimal("  x: {type: float, min: 0, max: 1}") + "resources: {gpu: 1}\n",
		"space.yaml:7:12", "a trial needs 1 GPU(s) and the local backend has 0, and there is no pool"},
	{"pool without a price", minimal("  x: {type: float, min: 0, max: 1}") + "pool: {name: gpu, instance_type: x9.huge}\n",
		"space.yaml:7:34", `pool.instance_type "x9.huge" has no default price; add price_per_hour`},
	{"sqs pool queue without records", minimal("  x: {type: float, min: 0, max: 1}") + "pool: {name: gpu, price_per_hour: 1, queue: 'sqs://q?region=eu-west-1'}\n",
		"space.yaml:7:45", "needs the queue's name and records=BUCKET"},
	{"pool listening on any port", minimal("  x: {type: float, min: 0, max: 1}") + "pool: {name: gpu, price_per_hour: 1, listen: '127.0.0.1:0'}\n",
		"space.yaml:7:46", "must be HOST:PORT with a fixed port"},
	{"pool with an unknown queue", minimal("  x: {type: float, min: 0, max: 1}") + "pool: {name: gpu, price_per_hour: 1, queue: redis}\n",
		"space.yaml:7:45", "pool.queue must be http"},
}

func TestDecodeInvalid(t *testing.T) {
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			errs := decodeErrors(t, tc.yaml)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			at := strings.Join(strings.SplitN(errs[0].Error(), ":", 4)[:3], ":")
			if at != tc.at || !strings.Contains(errs[0].Msg, tc.msg) {
				t.Errorf("got error\n  %v\nwant it at %s and containing\n  %s", errs[0], tc.at, tc.msg)
			}
		})
	}
}

// decodeErrors decodes a file that must be broken and returns its errors.
func decodeErrors(t *testing.T, yaml string) Errors {
	t.Helper()
	s, err := Decode("space.yaml", []byte(yaml))
	if err == nil {
		t.Fatalf("Decode succeeded: %+v", s)
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Decode error %T is not Errors: %v", err, err)
	}
	return errs
}

// TestInvalidFiles decodes every file in testdata/invalid: each lists the
// errors it must produce, in order, as "# error: line:col: fragment".
func TestInvalidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no files in testdata/invalid")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := expectedErrors(string(data))
			errs := decodeErrors(t, string(data))
			for i := range max(len(errs), len(want)) {
				switch {
				case i >= len(want):
					t.Errorf("unexpected error %v", errs[i])
				case i >= len(errs):
					t.Errorf("missing error %s", want[i])
				default:
					at, msg, _ := strings.Cut(want[i], " ")
					got := errs[i].Error()
					if !strings.HasPrefix(got, "space.yaml:"+at+" ") || !strings.Contains(errs[i].Msg, msg) {
						t.Errorf("error %d is\n  %s\nwant\n  %s", i, got, want[i])
					}
				}
			}
		})
	}
}

// expectedErrors returns the "line:col: fragment" of each "# error:"
// comment of a file.
func expectedErrors(data string) []string {
	var want []string
	for _, l := range strings.Split(data, "\n") {
		if _, e, ok := strings.Cut(l, "# error: "); ok {
			want = append(want, e)
		}
	}
	return want
}

func TestErrorsFormat(t *testing.T) {
	errs := Errors{
		{File: "a.yaml", Line: 1, Col: 2, Msg: "first"},
		{File: "a.yaml", Line: 3, Col: 4, Msg: "second"},
	}
	want := "a.yaml:1:2: first\na.yaml:3:4: second"
	if errs.Error() != want {
		t.Errorf("Errors.Error() = %q, want %q", errs.Error(), want)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
	_, err := Load("testdata/invalid/many.yaml")
	var errs Errors
	if !errors.As(err, &errs) || errs[0].File != "testdata/invalid/many.yaml" {
		t.Errorf("Load of a broken file: %v, want Errors naming the file", err)
	}
}
