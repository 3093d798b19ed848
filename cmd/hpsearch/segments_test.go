package main_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer/workload/digits"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// runStudy runs `hpsearch run` to the end and returns the study's trials.
func runStudy(t *testing.T, state, space, study string) []hptype.Trial {
	t.Helper()
	cmd := exec.Command(hpsearchBin, "run", "--state", state, "--json", space)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hpsearch run %s: %v\n%s", space, err, stderr.String())
	}
	return studyTrials(t, state, study)
}

// TestSegmentsMatchOneGo runs examples/segments, whose trials need about
// 20 s of training under a max_runtime of 5 s, and the same study with no
// limit. Every limited trial must take 4 or more segments and end with
// exactly the metrics of its one-go twin.
func TestSegmentsMatchOneGo(t *testing.T) {
	src, err := os.ReadFile("../../examples/segments/space.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte("max_runtime: 5s")) {
		t.Fatal("examples/segments/space.yaml no longer sets max_runtime: 5s")
	}
	dir := t.TempDir()
	limited, unlimited := filepath.Join(dir, "limited.yaml"), filepath.Join(dir, "unlimited.yaml")
	if err := os.WriteFile(limited, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unlimited, bytes.Replace(src, []byte("max_runtime: 5s"), []byte("max_runtime: 0s"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var oneGo []hptype.Trial
	done := make(chan struct{})
	go func() {
		defer close(done)
		oneGo = runStudy(t, filepath.Join(dir, "state-unlimited"), unlimited, "digits-segments")
	}()
	segmented := runStudy(t, filepath.Join(dir, "state-limited"), limited, "digits-segments")
	<-done
	if t.Failed() {
		return
	}
	if len(segmented) != 2 || len(oneGo) != 2 {
		t.Fatalf("%d and %d trials, want 2 and 2", len(segmented), len(oneGo))
	}
	for i := range segmented {
		s, o := segmented[i], oneGo[i]
		if s.State != hptype.TrialCompleted || o.State != hptype.TrialCompleted {
			t.Fatalf("trial %d: %s and %s, want both completed", i, s.State, o.State)
		}
		if s.Segments() < 4 {
			t.Errorf("trial %d ran in %d segments, want 4 or more under max_runtime 5s", i, s.Segments())
		}
		if o.Segments() != 1 {
			t.Errorf("trial %d with no limit ran in %d segments, want 1", i, o.Segments())
		}
		if err := sameMetrics(s.Metrics, o.Metrics); err != nil {
			t.Errorf("trial %d in segments vs in one go: %v", i, err)
		}
		t.Logf("trial %d: %d segments, %s %v; one go %v", i, s.Segments(), "val_accuracy", *s.Value, *o.Value)
	}
}

// TestKilledTrainersLoseAtMostOneInterval kills trainer processes at
// random while a study runs. No trial may be lost; each killed attempt may
// lose at most one checkpoint interval of work; and every trial must end
// with exactly the metrics of an uninterrupted training.
func TestKilledTrainersLoseAtMostOneInterval(t *testing.T) {
	const every = time.Second
	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, []byte(`name: kill-trainers
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.02, max: 0.2, log: true}
  hidden_units: {type: constant, value: 256}
  epochs: {type: constant, value: 150}
trainer: {builtin: digits-mlp, timeout: 5m}
sampler: {type: random, seed: 9}
max_trials: 4
max_concurrency: 2
checkpoint: {every: 1s}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cmd := exec.Command(hpsearchBin, "run", "--state", state, "--json", space)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Each victim is a trainer that has run for a random 1.1 to 2 checkpoint
	// intervals, so it has usually saved once: a segment killed again and
	// again before any checkpoint fails its trial after 3 attempts, which is
	// right, but not what this test is about.
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]time.Time{}
	kills := 0
	next := time.Duration(1100+rng.IntN(900)) * time.Millisecond
	var runErr error
loop:
	for kills < 6 {
		select {
		case runErr = <-exited:
			break loop
		case <-time.After(50 * time.Millisecond):
		}
		for _, pid := range childrenWith(cmd.Process.Pid, "trainer") {
			first, ok := seen[pid]
			if !ok {
				seen[pid] = time.Now()
				continue
			}
			if time.Since(first) >= next && syscall.Kill(pid, syscall.SIGKILL) == nil {
				kills++
				next = time.Duration(1100+rng.IntN(900)) * time.Millisecond
				break
			}
		}
	}
	if kills < 6 {
		t.Logf("the study ended after %d kills", kills)
	} else {
		runErr = <-exited
	}
	if runErr != nil {
		t.Fatalf("hpsearch run: %v\n%s", runErr, stderr.String())
	}

	trials := studyTrials(t, state, "kill-trainers")
	if len(trials) != 4 {
		t.Fatalf("%d trials, want 4", len(trials))
	}
	killed := 0
	for _, tr := range trials {
		if tr.State != hptype.TrialCompleted {
			t.Fatalf("trial %d is %s (%s), want completed", tr.Number, tr.State, tr.Error)
		}
		for _, a := range tr.Attempts {
			if a.Status != "error" {
				continue
			}
			killed++
			// A checkpoint every second, taken between epochs: the work lost
			// is at most the interval plus the epoch that crossed it.
			if limit := (every + 750*time.Millisecond).Seconds(); a.WastedSeconds > limit {
				t.Errorf("trial %d attempt %d lost %.3fs of work, more than one checkpoint interval (%s, with %.2fs for the epoch that crosses it)", tr.Number, a.Number, a.WastedSeconds, every, limit-every.Seconds())
			}
			t.Logf("trial %d attempt %d killed after %.2fs: %.2fs lost, resumed at epoch %g", tr.Number, a.Number, a.WallSeconds, a.WastedSeconds, a.ResourceTo)
		}
		if err := sameMetrics(tr.Metrics, referenceMetrics(t, tr, 9)); err != nil {
			t.Errorf("trial %d against uninterrupted training: %v", tr.Number, err)
		}
	}
	if killed == 0 {
		t.Fatalf("no attempt was recorded as killed after %d kills", kills)
	}
}

// referenceMetrics trains a trial in-process, in one go.
func referenceMetrics(t *testing.T, tr hptype.Trial, seed int64) []hptype.Metric {
	t.Helper()
	cfg, err := digits.ConfigFromParams(tr.Params, coordinator.TrialSeed(seed, tr.Number))
	if err != nil {
		t.Fatal(err)
	}
	var ms []hptype.Metric
	if err := digits.Train(t.Context(), cfg, func(m hptype.Metric) { ms = append(ms, m) }); err != nil {
		t.Fatal(err)
	}
	return ms
}

// sameMetrics compares two metric histories bit for bit.
func sameMetrics(got, want []hptype.Metric) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d metrics, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Step != w.Step || math.Float64bits(g.Value) != math.Float64bits(w.Value) {
			return fmt.Errorf("metric %d is %s@%g=%v, want %s@%g=%v", i, g.Name, g.Step, g.Value, w.Name, w.Step, w.Value)
		}
	}
	return nil
}

// childrenWith returns the child processes of parent whose command line
// contains arg.
func childrenWith(parent int, arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name: state, ppid, ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(arg)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
