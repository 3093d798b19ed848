package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// hpsearchBin is the real binary, built once for the tests of this package.
var hpsearchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hpsearch-bin-")
	if err != nil {
		panic(err)
	}
	hpsearchBin = filepath.Join(dir, "hpsearch")
	if out, err := exec.Command("go", "build", "-o", hpsearchBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const crashSpace = `name: crash
objective: {metric: score, goal: maximize}
parameters:
  x: {type: float, min: 0, max: 1}
trainer:
  command: [sh, %q]
  env: {RUNS: %q}
  timeout: 1m
sampler: {type: random, seed: 5}
max_trials: 16
max_concurrency: 3
`

// The workload logs when each attempt starts and ends.
const crashWorkload = `echo "start $HPSEARCH_TRIAL" >> "$RUNS"
sleep 0.3
echo "{\"step\": 1, \"score\": $HPSEARCH_PARAM_X}"
echo "done $HPSEARCH_TRIAL" >> "$RUNS"
`

// TestKill9AndResume kills `hpsearch run` with SIGKILL at several points of
// a study and runs it again each time. The study must end with exactly
// max_trials trials, each completed once; no trial the store had recorded
// as completed may start again; and no trainer may outlive the coordinator.
func TestKill9AndResume(t *testing.T) {
	bin := hpsearchBin
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.log")
	script := filepath.Join(dir, "crash-workload.sh")
	if err := os.WriteFile(script, []byte(crashWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, fmt.Appendf(nil, crashSpace, script, runs), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	run := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "--state", state, "--json", space)
		cmd.Stdout, cmd.Stderr = new(bytes.Buffer), new(bytes.Buffer)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	// completedAt[n] is the line of runs.log at which trial n was first seen
	// completed in the store.
	completedAt := map[int]int{}
	delays := []time.Duration{30 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 900 * time.Millisecond, 150 * time.Millisecond, 700 * time.Millisecond}
	for i, d := range delays {
		cmd := run()
		time.Sleep(d)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Logf("run %d ended before the kill (%v): %s", i, err, cmd.Stderr)
		}
		waitNoOrphans(t, script)
		lines := len(readLines(t, runs))
		for _, tr := range studyTrials(t, state, "crash") {
			if _, seen := completedAt[tr.Number]; !seen && tr.State == hptype.TrialCompleted {
				completedAt[tr.Number] = lines
			}
		}
		t.Logf("after kill %d at %s: %d trials completed, %d lines of runs", i, d, len(completedAt), lines)
	}

	start := time.Now()
	final := run()
	if err := final.Wait(); err != nil {
		t.Fatalf("final run: %v\n%s", err, final.Stderr)
	}
	t.Logf("final run took %s", time.Since(start))
	got := studyTrials(t, state, "crash")
	if len(got) != 16 {
		t.Fatalf("%d trials, want exactly 16", len(got))
	}
	for i, tr := range got {
		if tr.Number != i || tr.State != hptype.TrialCompleted || tr.Value == nil {
			t.Fatalf("trial %d: number %d state %s; want every trial completed once", i, tr.Number, tr.State)
		}
	}
	// No trial started again after the store recorded it completed.
	for i, line := range readLines(t, runs) {
		var n int
		if _, err := fmt.Sscanf(line, "start %d", &n); err != nil {
			continue
		}
		if at, ok := completedAt[n]; ok && i >= at {
			t.Errorf("trial %d started again (runs.log line %d) after it was recorded completed (line %d)", n, i+1, at)
		}
	}
	if len(completedAt) == 0 || len(completedAt) == 16 {
		t.Logf("the kills landed at %d completed trials; the test is strongest when they land mid-study", len(completedAt))
	}
}

// waitNoOrphans checks that no process running the workload script is left
// once the coordinator is dead.
func waitNoOrphans(t *testing.T, script string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		pids := processesWith(script)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("trainer workloads outlived the killed coordinator: pids %v", pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func processesWith(arg string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie has exited
		}
		if bytes.Contains(cmdline, []byte(arg)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// studyTrials reads a study's trials with `hpsearch trials --json`; a study
// that does not exist yet has none.
func studyTrials(t *testing.T, state, study string) []hptype.Trial {
	t.Helper()
	out, err := exec.Command(hpsearchBin, "trials", "--state", state, "--json", study).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		if strings.Contains(string(stderr), "no study named") || strings.Contains(string(stderr), "no studies") {
			return nil // killed before the study was created
		}
		t.Fatalf("hpsearch trials: %v\n%s", err, stderr)
	}
	var list []hptype.Trial
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("decode trials: %v\n%s", err, out)
	}
	return list
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
