package command

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// pythonExample returns the workload that runs examples/python/train.py, or
// skips the test when python3 is missing.
func pythonExample(t *testing.T) hptype.Workload {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed; the example needs it")
	}
	return hptype.Workload{Command: []string{"python3", "train.py"}, Dir: filepath.Join("..", "..", "..", "..", "examples", "python")}
}

// TestPythonExample runs examples/python/train.py as hpsearch does and checks
// that a decent configuration learns.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	w := pythonExample(t)
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

// TestPythonExampleResumes trains examples/python/train.py for 10 epochs in
// four segments that share a checkpoint directory, stopped in every way a
// segment can stop, and checks that it reports exactly what one
// uninterrupted run does.
func TestPythonExampleResumes(t *testing.T) {
	t.Parallel()
	w := pythonExample(t)
	in := Inputs{
		Params: hptype.Params{"learning_rate": 0.1, "l2": 1e-4, "batch_size": int64(8), "epochs": int64(10)},
		Seed:   3,
	}
	whole := run(t, context.Background(), w, in)
	if whole.err != nil {
		t.Fatal(whole.err)
	}

	in.CheckpointDir = t.TempDir()
	var got []hptype.Metric
	segment := func(what string, ctx context.Context, in Inputs, onReport func(hptype.Metric)) error {
		t.Helper()
		log := &syncBuffer{}
		in.Log = log
		first := len(got)
		err := Run(ctx, w, in, func(m hptype.Metric) {
			got = append(got, m)
			onReport(m)
		})
		var epochs []float64
		for _, m := range got[first:] {
			if m.Name == "val_loss" {
				epochs = append(epochs, m.Step)
			}
		}
		t.Logf("%s: reported epochs %v, returned %v; log:\n%s", what, epochs, err, log)
		return err
	}
	ignore := func(hptype.Metric) {}

	// 1: up to a target, then exit 0 on its own.
	target := in
	target.Target = 3
	if err := segment("segment 1, target 3", context.Background(), target, ignore); err != nil {
		t.Fatalf("segment 1: %v, want it to complete", err)
	}
	if n := len(got); n == 0 || got[n-1].Step != 3 {
		t.Fatalf("segment 1 reported %v, want epochs 1 to 3", got)
	}

	// 2: cancelled as soon as it reports its first epoch: it finishes the
	// epoch it is in, saves and exits 0.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	every := in
	every.CheckpointEvery = 10 * time.Millisecond
	every.Grace = 5 * time.Second
	err := segment("segment 2, cancelled", ctx, every, func(hptype.Metric) { cancel() })
	if !errors.Is(err, ErrSuspended) || !errors.Is(err, context.Canceled) {
		t.Fatalf("segment 2: %v, want ErrSuspended and context.Canceled", err)
	}

	// 3: SIGTERM at once, the deadline being closer than the grace period.
	// Whether it comes before the script's handler is set (the script dies
	// of it, having saved nothing) or after (the script trains one epoch
	// and saves it), the checkpoint holds the last epoch reported.
	ctx, cancelDeadline := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelDeadline()
	soon := in
	soon.Grace = 3 * time.Second
	if err := segment("segment 3, SIGTERM at once", ctx, soon, ignore); !errors.Is(err, ErrSuspended) {
		t.Fatalf("segment 3: %v, want ErrSuspended", err)
	}

	// 4: to the end.
	if err := segment("segment 4, to the end", context.Background(), in, ignore); err != nil {
		t.Fatalf("segment 4: %v, want it to complete", err)
	}

	if len(got) != len(whole.metrics) {
		t.Fatalf("the segments reported %d metrics, the uninterrupted run %d:\n got %v\nwant %v", len(got), len(whole.metrics), got, whole.metrics)
	}
	for i, m := range got {
		want := whole.metrics[i]
		if m.Name != want.Name || m.Step != want.Step || math.Float64bits(m.Value) != math.Float64bits(want.Value) {
			t.Errorf("metric %d: segments reported %+v, the uninterrupted run %+v", i, m, want)
		}
	}
	if last := got[len(got)-1]; last.Step != 10 {
		t.Errorf("last metric %+v, want one of epoch 10", last)
	}
	entries, err := os.ReadDir(in.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	if names := fmt.Sprint(entries); len(entries) != 1 || entries[0].Name() != "state.json" {
		t.Errorf("checkpoint directory holds %s, want only state.json", names)
	}
}
