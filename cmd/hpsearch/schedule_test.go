package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// ashaSpace is an ASHA study of the built-in workload, one trial at a time
// so that the order in which trials reach their rungs, and with it every
// decision, is the same in every run.
const ashaSpace = `name: asha-kill
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.001, max: 0.5, log: true}
  hidden_units: {type: int, min: 32, max: 128, step: 32}
  momentum: {type: float, min: 0.5, max: 0.95}
  epochs: {type: constant, value: 9}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: random, seed: 8}
scheduler: {type: asha, min: 1, max: 9, reduction_factor: 3}
checkpoint: {every: 20ms}
max_trials: 14
max_concurrency: 1
`

// rungDecisions lists a study's rung decisions in the order they were made,
// with everything that makes them what they are.
func rungDecisions(trials []hptype.Trial) []string {
	var all []hptype.RungDecision
	trialOf := map[int]int{}
	for _, tr := range trials {
		for _, r := range tr.Rungs {
			all = append(all, r)
			trialOf[r.Seq] = tr.Number
		}
	}
	slices.SortFunc(all, func(a, b hptype.RungDecision) int { return a.Seq - b.Seq })
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = fmt.Sprintf("#%d trial %d at %g = %v: %s (%s)", r.Seq, trialOf[r.Seq], r.Resource, r.Value, r.Action, r.Reason)
	}
	return out
}

// TestKill9ASHAMakesTheSameDecisions kills `hpsearch run` with SIGKILL
// several times in the middle of an ASHA study and runs it again each
// time: the rung decisions of the finished study are exactly those of an
// uninterrupted run, value for value.
func TestKill9ASHAMakesTheSameDecisions(t *testing.T) {
	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, []byte(ashaSpace), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := rungDecisions(runStudy(t, filepath.Join(dir, "reference"), space, "asha-kill"))
	whole := time.Since(start)
	if len(want) < 14 {
		t.Fatalf("the reference run made only %d decisions", len(want))
	}

	state := filepath.Join(dir, "killed")
	kills := 0
	for _, frac := range []float64{0.15, 0.3, 0.3, 0.3} {
		cmd := exec.Command(hpsearchBin, "run", "--state", state, "--json", space)
		cmd.Stdout, cmd.Stderr = new(bytes.Buffer), new(bytes.Buffer)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(frac * float64(whole)))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			kills++
		}
		made := rungDecisions(studyTrials(t, state, "asha-kill"))
		if !slices.Equal(made, want[:len(made)]) {
			t.Fatalf("after kill %d the recorded decisions differ from the reference run's:\n got %q\nwant %q", kills, made, want[:len(made)])
		}
		t.Logf("after %s: %d of %d decisions recorded", time.Duration(frac*float64(whole)), len(made), len(want))
	}
	got := rungDecisions(runStudy(t, state, space, "asha-kill"))
	if !slices.Equal(got, want) {
		t.Errorf("decisions after %d kills differ from the uninterrupted run's:\n got %q\nwant %q", kills, got, want)
	}
	if kills == 0 {
		t.Errorf("every run ended before its kill; the test proved nothing (the reference run took %s)", whole)
	}
}
