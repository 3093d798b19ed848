package command

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// TestPythonExample runs examples/python/train.py as hpsearch does and checks
// that a decent configuration learns.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed; the example needs it")
	}
	w := hptype.Workload{Command: []string{"python3", "train.py"}, Dir: filepath.Join("..", "..", "..", "..", "examples", "python")}
	params := hptype.Params{"learning_rate": 0.1, "l2": 1e-4, "batch_size": int64(16), "epochs": int64(30)}
	r := run(t, context.Background(), w, Inputs{Params: params, Seed: 1})
	if r.err != nil {
		t.Fatal(r.err)
	}
	var accuracy []hptype.Metric
	for _, m := range r.metrics {
		if m.Name == "val_accuracy" {
			accuracy = append(accuracy, m)
		}
	}
	if len(accuracy) != 30 || accuracy[29].Step != 30 {
		t.Fatalf("val_accuracy reported %d times (%v), want once per epoch for 30 epochs", len(accuracy), accuracy)
	}
	if final := accuracy[29].Value; final < 0.9 {
		t.Errorf("val_accuracy after 30 epochs = %.3f, want >= 0.9", final)
	}
	t.Logf("log: %s", r.log)
}
