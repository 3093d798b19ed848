package spec

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkRoundTrip asserts that s survives Encode and Decode and that
// encoding is stable.
func checkRoundTrip(t *testing.T, s *Spec) {
	t.Helper()
	enc, err := Encode(s)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	back, err := Decode("encoded.yaml", enc)
	if err != nil {
		t.Fatalf("Decode of encoded spec: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip changed the spec:\n%#v\nbecame\n%#v\nvia\n%s", s, back, enc)
	}
	again, err := Encode(back)
	if err != nil {
		t.Fatalf("second Encode: %v", err)
	}
	if !bytes.Equal(enc, again) {
		t.Fatalf("encoding is not stable:\n%s\nthen\n%s", enc, again)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			checkRoundTrip(t, tc.want)
		})
	}
}

// TestRoundTripEdgeValues round-trips values whose text form is tricky.
func TestRoundTripEdgeValues(t *testing.T) {
	s := defaults(
		Param{Name: "f", Type: Float, Min: -0.0, Max: 1e300, Points: []float64{5e-324, 0.1, 1e21, 123456789.123456789}},
		Param{Name: "n", Type: Int, Min: -(1 << 53), Max: 1 << 53, Step: 3},
		Param{Name: "c", Type: Categorical, Values: []any{
			"true", "null", "1", "1e3", "0x10", ".5", ".inf", "-", "", " padded ", "a: b", "#x", "[x]", "line\nbreak",
			"tab\t", "quote\"", "émoji 😀", "\u2028", "\x7f", "y", "No", "~", "- a", "? x", "@x", "`x`", "%x", "!x", "&x", "*x",
			int64(-9223372036854775808), 1.0, -0.0, 2e-7, false,
		}},
		Param{Name: "k", Type: Constant, Value: "01"},
		Param{Name: "w", Type: Float, Min: 0, Max: 1, When: []Condition{
			{Param: "c", Values: []any{"true", 1.0, "line\nbreak"}},
			{Param: "k", Values: []any{"01"}},
		}},
	)
	s.Name = "1e5"
	s.Objective.Metric = "val loss: total"
	s.Trainer = Trainer{
		Command: []string{"/usr/bin/env", "--flag=x y", "'single'", "{brace}"},
		Env:     map[string]string{"B": "2", "A": "", "_Z": "yes"},
		Dir:     "../dir with space",
		Timeout: 1500 * time.Nanosecond,
	}
	s.Sampler.Seed = -1
	s.Budget = Budget{MaxWall: 36*time.Hour + time.Millisecond, MaxCostUSD: 1e-9}
	s.Backend.PricePerGBSecond = 0.1 + 0.2
	checkRoundTrip(t, s)
}

func TestEncodeCanonical(t *testing.T) {
	s, err := Decode("space.yaml", []byte(validCases[1].yaml))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	want := lines(
		"name: digits-quickstart",
		"objective:",
		"  metric: val_accuracy",
		"  goal: maximize",
		"parameters:",
		"  learning_rate:",
		"    type: float",
		"    min: 0.001",
		"    max: 0.5",
		"    log: true",
		"  hidden_units:",
		"    type: int",
		"    min: 16",
		"    max: 128",
		"    log: false",
		"    step: 16",
		"  batch_size:",
		"    type: categorical",
		"    values: [16, 32, 64]",
		"  optimizer:",
		"    type: categorical",
		"    values: [sgd, momentum]",
		"  momentum:",
		"    type: float",
		"    min: 0.5",
		"    max: 0.99",
		"    log: false",
		"    points: [0.5, 0.9, 0.99]",
		"    when:",
		"      optimizer: [momentum]",
		"  epochs:",
		"    type: constant",
		"    value: 20",
		"trainer:",
		"  command: [python3, train.py]",
		"  env:",
		"    KEY: value",
		"  dir: .",
		"  timeout: 10m0s",
		"sampler:",
		"  type: random",
		"  seed: 42",
		"max_trials: 20",
		"max_concurrency: 2",
		"budget:",
		"  max_wall: 30m0s",
		"  max_cost_usd: 1.5",
		"backend:",
		"  type: local",
		"  memory_mb: 1024",
		"  price_per_gb_second: 1.33334e-05",
		"  price_per_request: 2e-07",
		"  max_runtime: 0s",
		"checkpoint:",
		"  every: 1m0s",
		"  grace: 10s",
		"  keep_last: 2",
		"  keep_checkpoints: best",
	)
	if string(got) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
}

func TestEncodeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *Spec)
		msg    string
	}{
		{"unsupported value type", func(s *Spec) { s.Params[0] = Param{Name: "k", Type: Constant, Value: 3} }, "has type int"},
		{"infinite bound", func(s *Spec) { s.Params[0].Max = math.Inf(1) }, "not finite"},
		{"invalid UTF-8", func(s *Spec) { s.Objective.Metric = "\xff" }, "not valid UTF-8"},
		{"no parameters", func(s *Spec) { s.Params = nil }, "at least one parameter"},
		{"zero max_trials", func(s *Spec) { s.MaxTrials = 0 }, "max_trials must be at least 1"},
		{"int step missing", func(s *Spec) { s.Params[0] = Param{Name: "n", Type: Int, Max: 3} }, "step must be at least 1"},
		{"step on float", func(s *Spec) { s.Params[0].Step = 2 }, `key "step" does not apply to a float parameter`},
		{"env on builtin", func(s *Spec) { s.Trainer.Env = map[string]string{"A": "b"} }, "trainer.env applies only to a command trainer"},
		{"command without dir", func(s *Spec) { s.Trainer = Trainer{Command: []string{"a"}, Timeout: time.Hour} }, "trainer.dir must not be empty"},
		{"no sampler type", func(s *Spec) { s.Sampler.Type = "" }, "sampler.type must be random, grid, sobol, tpe, tpe-multivariate, gp or cmaes"},
		{"key injection", func(s *Spec) { s.Params[0].Name = "x: {type: float, min: 0, max: 1}\n  y" }, `parameter name "x: {type`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := defaults(floatX)
			tc.change(s)
			_, err := Encode(s)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Encode error = %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

func TestSearchFingerprint(t *testing.T) {
	base := defaults(floatX, Param{Name: "k", Type: Constant, Value: int64(1)})
	fp := base.SearchFingerprint()
	if len(fp) != 64 {
		t.Fatalf("fingerprint %q is not hex SHA-256", fp)
	}
	same := []func(s *Spec){
		func(s *Spec) { s.MaxTrials = 100 },
		func(s *Spec) { s.MaxConcurrency = 8 },
		func(s *Spec) { s.Budget = Budget{MaxWall: time.Hour, MaxCostUSD: 3} },
		func(s *Spec) {
			s.Backend.MemoryMB = 2048
			s.Backend.PricePerRequest = 0
			s.Backend.MaxRuntime = time.Minute
		},
		func(s *Spec) {
			s.Checkpoint = Checkpoint{Store: "/x", Every: time.Second, Grace: time.Second, KeepLast: 5, Keep: KeepNone}
		},
	}
	different := []func(s *Spec){
		func(s *Spec) { s.Name = "other" },
		func(s *Spec) { s.Objective.Goal = Maximize },
		func(s *Spec) { s.Objective.Metric = "acc" },
		func(s *Spec) { s.Params[0].Max = 2 },
		func(s *Spec) { s.Params[1].Value = 1.0 },
		func(s *Spec) { s.Params[0], s.Params[1] = s.Params[1], s.Params[0] },
		func(s *Spec) { s.Trainer.Timeout = time.Minute },
		func(s *Spec) { s.Sampler.Seed = 1 },
		func(s *Spec) { s.Sampler.Type = Sobol },
		func(s *Spec) {
			s.Scheduler = Scheduler{Type: ASHA, Resource: "epoch", Min: 1, Max: 9, ReductionFactor: 3, MinTrials: 5, Quantile: 0.25}
		},
	}
	for i, change := range same {
		s := defaults(floatX, Param{Name: "k", Type: Constant, Value: int64(1)})
		change(s)
		if got := s.SearchFingerprint(); got != fp {
			t.Errorf("change %d of a run setting changed the fingerprint", i)
		}
	}
	for i, change := range different {
		s := defaults(floatX, Param{Name: "k", Type: Constant, Value: int64(1)})
		change(s)
		if got := s.SearchFingerprint(); got == fp {
			t.Errorf("change %d of the search did not change the fingerprint", i)
		}
	}
}
