package spec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecode checks that Decode never panics, that its errors are Errors,
// and that every spec it accepts survives Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.yaml))
	}
	for _, tc := range invalidCases {
		f.Add([]byte(tc.yaml))
	}
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode("fuzz.yaml", data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Decode error %T is not a non-empty Errors: %v", err, err)
			}
			return
		}
		checkRoundTrip(t, s)
	})
}

// FuzzEncode builds specs around fuzzed strings and numbers and checks that
// every spec Encode accepts survives Decode unchanged.
func FuzzEncode(f *testing.F) {
	f.Add("sgd", "--lr=0.1", 0.5, int64(3), true)
	f.Add("1e3", "", -0.0, int64(-1), false)
	f.Add("a: b", "\t#x\n", 1e21, int64(1)<<53, true)
	f.Fuzz(func(t *testing.T, str, arg string, x float64, n int64, b bool) {
		s := defaults(
			Param{Name: "c", Type: Categorical, Values: []any{str, x, n, b}},
			Param{Name: "k", Type: Constant, Value: arg},
			Param{Name: "f", Type: Float, Min: x, Max: x + 1, Points: []float64{x}},
			Param{Name: "i", Type: Int, Min: float64(n % (1 << 53)), Max: float64(n%(1<<53)) + 10, Step: 1 + n&7},
			Param{Name: "w", Type: Float, Max: 1, When: []Condition{{Param: "c", Values: []any{str}}, {Param: "k", Values: []any{arg}}}},
		)
		s.Objective.Metric = str
		s.Trainer = Trainer{Command: []string{"run", arg, str}, Env: map[string]string{"A": str, "B": arg}, Dir: arg, Timeout: time.Duration(n)}
		s.Sampler.Seed = n
		s.Budget.MaxCostUSD = x
		s.Backend.MaxRuntime = time.Duration(n)
		s.Checkpoint.Store = str
		s.Checkpoint.Grace = s.Checkpoint.GraceOrDefault(s.Backend.MaxRuntime)
		if _, err := Encode(s); err != nil {
			return
		}
		checkRoundTrip(t, s)
	})
}
