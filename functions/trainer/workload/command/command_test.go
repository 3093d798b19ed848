package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Timings of the signal tests: short, but long enough for sh to start and
// set its traps on a loaded machine.
const (
	testGrace    = 300 * time.Millisecond
	testDeadline = 1500 * time.Millisecond
)

// syncBuffer is a log the test can read while Run writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// script writes a shell script to a new directory and returns a workload
// that runs it there.
func script(t *testing.T, body string) hptype.Workload {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return hptype.Workload{Command: []string{"sh", "run.sh"}, Dir: dir}
}

type result struct {
	metrics []hptype.Metric
	log     *syncBuffer
	err     error
	elapsed time.Duration
}

// run runs w and collects what it reported. in.Log and in.Grace get test
// defaults when unset.
func run(t *testing.T, ctx context.Context, w hptype.Workload, in Inputs) result {
	t.Helper()
	r := result{log: &syncBuffer{}}
	if in.Log == nil {
		in.Log = r.log
	}
	if in.Grace == 0 {
		in.Grace = testGrace
	}
	start := time.Now()
	r.err = Run(ctx, w, in, func(m hptype.Metric) { r.metrics = append(r.metrics, m) })
	r.elapsed = time.Since(start)
	t.Logf("Run took %v, returned %v", r.elapsed, r.err)
	return r
}

// waitFor polls cond until it holds, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether process pid has ended (a zombie counts as ended).
func gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// readPID reads a pid a script wrote to file name in dir.
func readPID(t *testing.T, dir, name string) int {
	t.Helper()
	var pid int
	waitFor(t, "the script to write "+name, func() bool {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	return pid
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	w := script(t, `
echo starting
echo '{"step": 10, "loss": 0.5, "epoch": 2, "phase": "train"}'
echo '  {"epoch": 3, "val_accuracy": 0.9}  '
echo '{"acc": 0.1}'
echo '{"acc": 0.2, "note": "hi", "nested": {"a": 1}, "flag": true, "none": null}'
echo '{"only": "strings"}'
echo '{"bad json'
echo '[1, 2]'
printf '{"acc": 0.3}'
`)
	r := run(t, context.Background(), w, Inputs{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []hptype.Metric{
		{Step: 10, Name: "epoch", Value: 2},
		{Step: 10, Name: "loss", Value: 0.5},
		{Step: 3, Name: "val_accuracy", Value: 0.9},
		{Step: 3, Name: "acc", Value: 0.1}, // third report line
		{Step: 4, Name: "acc", Value: 0.2},
		{Step: 5, Name: "acc", Value: 0.3}, // a last line with no newline
	}
	if !reflect.DeepEqual(r.metrics, want) {
		t.Errorf("metrics:\n got %v\nwant %v", r.metrics, want)
	}
	wantLog := "starting\n{\"only\": \"strings\"}\n{\"bad json\n[1, 2]\n"
	if got := r.log.String(); got != wantLog {
		t.Errorf("log = %q, want %q", got, wantLog)
	}
}

func TestParseReport(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []hptype.Metric // nil: not a report
	}{
		{`{"loss": 1}`, []hptype.Metric{{Step: 7, Name: "loss", Value: 1}}},
		{`{"step": 2, "epoch": 1, "loss": -1.5e-3}`, []hptype.Metric{{Step: 2, Name: "epoch", Value: 1}, {Step: 2, Name: "loss", Value: -1.5e-3}}},
		{`{"step": "warmup", "epoch": 4, "loss": 1}`, []hptype.Metric{{Step: 4, Name: "loss", Value: 1}}},
		{`{"epoch": 1e999, "loss": 1}`, []hptype.Metric{{Step: 7, Name: "loss", Value: 1}}},
		{`{"b": 2, "a": 1}`, []hptype.Metric{{Step: 7, Name: "a", Value: 1}, {Step: 7, Name: "b", Value: 2}}},
		{"\t{\"a\": 1}\r\n", []hptype.Metric{{Step: 7, Name: "a", Value: 1}}},
		{`{"a": 1} trailing`, nil},
		{`{"a": NaN}`, nil},
		{`{"step": 3}`, nil},
		{`{"a": "1", "b": true, "c": null, "d": [1], "e": {"f": 1}}`, nil},
		{`{}`, nil},
		{`[{"a": 1}]`, nil},
		{`epoch 1 loss 0.5`, nil},
		{``, nil},
	} {
		if got := parseReport([]byte(tc.line), 7); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseReport(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestLongLines(t *testing.T) {
	t.Parallel()
	w := script(t, `
head -c 3000000 /dev/zero | tr '\0' x; echo
pad=$(head -c 300000 /dev/zero | tr '\0' y)
echo "{\"pad\": \"$pad\", \"m\": 1}"
`)
	r := run(t, context.Background(), w, Inputs{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := []hptype.Metric{{Step: 1, Name: "m", Value: 1}}; !reflect.DeepEqual(r.metrics, want) {
		t.Errorf("metrics = %v, want %v", r.metrics, want)
	}
	if got, want := r.log.String(), strings.Repeat("x", 3000000)+"\n"; got != want {
		t.Errorf("log holds %d bytes, want the %d of the long line", len(got), len(want))
	}
}

func TestMetricWriterOverlongLine(t *testing.T) {
	var log bytes.Buffer
	var got []hptype.Metric
	w := &metricWriter{report: func(m hptype.Metric) { got = append(got, m) }, log: &log}
	chunk := bytes.Repeat([]byte("z"), 1<<20)
	w.Write([]byte(`{"a": 1, "pad": "`))
	for range maxLine / len(chunk) {
		w.Write(chunk)
	}
	w.Write([]byte("\"}\n{\"b\": 2}\n"))
	if want := []hptype.Metric{{Step: 1, Name: "b", Value: 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("metrics = %v, want only %v: a line longer than maxLine is not a report", got, want)
	}
	if want := len(`{"a": 1, "pad": "`) + maxLine + len("\"}\n"); log.Len() != want {
		t.Errorf("log holds %d bytes, want the %d of the overlong line", log.Len(), want)
	}
	if cap(w.buf) > 2*maxLine {
		t.Errorf("line buffer grew to %d bytes, want it bounded near maxLine (%d)", cap(w.buf), maxLine)
	}
}

func TestEnvironmentAndParamsFile(t *testing.T) {
	t.Parallel()
	w := script(t, `
env > env.txt
cp "$HPSEARCH_PARAMS_FILE" params.json
pwd -P > pwd.txt
`)
	w.Env = map[string]string{"EXTRA_VAR": "extra value", "HPSEARCH_TRIAL": "overridden by hpsearch"}
	params := hptype.Params{
		"learning_rate": 0.001,
		"l2":            1e-07,
		"whole_float":   2.0,
		"batch_size":    int64(32),
		"use-bn":        true,
		"optimizer":     "adam",
	}
	r := run(t, context.Background(), w, Inputs{Params: params, Study: "wine", Trial: 7, Attempt: 2, Seed: -42})
	if r.err != nil {
		t.Fatal(r.err)
	}
	data, err := os.ReadFile(filepath.Join(w.Dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for k, want := range map[string]string{
		"HPSEARCH_PARAM_LEARNING_RATE": "0.001",
		"HPSEARCH_PARAM_L2":            "1e-07",
		"HPSEARCH_PARAM_WHOLE_FLOAT":   "2",
		"HPSEARCH_PARAM_BATCH_SIZE":    "32",
		"HPSEARCH_PARAM_USE_BN":        "true",
		"HPSEARCH_PARAM_OPTIMIZER":     "adam",
		"HPSEARCH_STUDY":               "wine",
		"HPSEARCH_TRIAL":               "7",
		"HPSEARCH_ATTEMPT":             "2",
		"HPSEARCH_SEED":                "-42",
		"EXTRA_VAR":                    "extra value",
		"PATH":                         os.Getenv("PATH"),
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}

	copied, err := os.ReadFile(filepath.Join(w.Dir, "params.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(copied, &got); err != nil {
		t.Fatalf("params file %q: %v", copied, err)
	}
	want := map[string]any{"learning_rate": 0.001, "l2": 1e-07, "whole_float": 2.0, "batch_size": 32.0, "use-bn": true, "optimizer": "adam"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("params file = %v, want %v", got, want)
	}
	for _, k := range optionalEnv {
		if v, ok := env[k]; ok {
			t.Errorf("env %s = %q, want it absent when its input is not set", k, v)
		}
	}
	if _, err := os.Stat(env[EnvParamsFile]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("params file %s after Run: %v, want it removed", env[EnvParamsFile], err)
	}

	pwd, err := os.ReadFile(filepath.Join(w.Dir, "pwd.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if wantDir, _ := filepath.EvalSymlinks(w.Dir); strings.TrimSpace(string(pwd)) != wantDir {
		t.Errorf("working directory = %q, want %q", strings.TrimSpace(string(pwd)), wantDir)
	}
}

func TestParamEnvName(t *testing.T) {
	for name, want := range map[string]string{
		"learning_rate": "HPSEARCH_PARAM_LEARNING_RATE",
		"l2":            "HPSEARCH_PARAM_L2",
		"model.depth":   "HPSEARCH_PARAM_MODEL_DEPTH",
		"drop-out rate": "HPSEARCH_PARAM_DROP_OUT_RATE",
		"β1":            "HPSEARCH_PARAM__1",
	} {
		if got := ParamEnvName(name); got != want {
			t.Errorf("ParamEnvName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestParamEnvNameCollision(t *testing.T) {
	t.Parallel()
	w := script(t, "touch ran\n")
	r := run(t, context.Background(), w, Inputs{Params: hptype.Params{"drop-out": 0.1, "drop_out": 0.2}})
	if r.err == nil || !strings.Contains(r.err.Error(), `"drop-out" and "drop_out" would both be passed as HPSEARCH_PARAM_DROP_OUT`) {
		t.Errorf("Run = %v, want an error naming both parameters", r.err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "ran")); err == nil {
		t.Error("the command ran despite the error")
	}
}

func TestStderrGoesToLog(t *testing.T) {
	t.Parallel()
	w := script(t, `
echo "warming up" >&2
echo '{"m": 1}'
echo "plain stdout"
printf 'partial line' >&2
`)
	r := run(t, context.Background(), w, Inputs{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	log := r.log.String()
	for _, want := range []string{"warming up\n", "plain stdout\n", "partial line"} {
		if !strings.Contains(log, want) {
			t.Errorf("log %q does not contain %q", log, want)
		}
	}
	if strings.Contains(log, `{"m": 1}`) {
		t.Errorf("log %q contains the metric line", log)
	}
	// A nil Log discards.
	if err := Run(context.Background(), w, Inputs{}, func(hptype.Metric) {}); err != nil {
		t.Errorf("Run with a nil Log: %v", err)
	}
}

func TestExitError(t *testing.T) {
	t.Parallel()
	w := script(t, `
i=1
while [ $i -le 25 ]; do echo "err line $i" >&2; i=$((i+1)); done
printf 'progress 10%%\rprogress 100%%\n' >&2
exit 3
`)
	r := run(t, context.Background(), w, Inputs{})
	if r.err == nil {
		t.Fatal("Run succeeded, want an error")
	}
	msg := r.err.Error()
	for _, want := range []string{`command "sh run.sh" in ` + w.Dir, "exit status 3", "last 20 lines of its stderr", "err line 7\n", "err line 25\n", "\tprogress 100%"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	for _, unwanted := range []string{"err line 6\n", "progress 10%"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("error %q contains %q, which is not among the last lines a terminal shows", msg, unwanted)
		}
	}
	if errors.Is(r.err, ErrTimeout) {
		t.Errorf("error %v wraps ErrTimeout", r.err)
	}

	r = run(t, context.Background(), script(t, "exit 1\n"), Inputs{})
	if r.err == nil || !strings.Contains(r.err.Error(), "(exit status 1); it wrote nothing to stderr") {
		t.Errorf("Run of a silent failure = %v, want it to say stderr was empty", r.err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec.sh"), []byte("exit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		w    hptype.Workload
		want []string
	}{
		{"empty", hptype.Workload{Dir: dir}, []string{"command is empty", "trainer.command"}},
		{"not on PATH", hptype.Workload{Command: []string{"hpsearch-no-such-program", "x"}, Dir: dir},
			[]string{`"hpsearch-no-such-program" not found on PATH`, dir}},
		{"not in dir", hptype.Workload{Command: []string{"./missing.sh"}, Dir: dir},
			[]string{`"./missing.sh" not found in working directory ` + dir}},
		{"not executable", hptype.Workload{Command: []string{"./noexec.sh"}, Dir: dir},
			[]string{`"./noexec.sh"`, "permission denied", "chmod +x"}},
		{"no dir", hptype.Workload{Command: []string{"sh", "-c", "true"}, Dir: filepath.Join(dir, "nope")},
			[]string{"working directory", filepath.Join(dir, "nope"), "trainer.dir"}},
		{"dir is a file", hptype.Workload{Command: []string{"sh", "-c", "true"}, Dir: filepath.Join(dir, "noexec.sh")},
			[]string{"is not a directory", "trainer.dir"}},
		{"bad env", hptype.Workload{Command: []string{"sh", "-c", "true"}, Dir: dir, Env: map[string]string{"A=B": "c"}},
			[]string{`"A=B" is not valid`, "trainer.env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), tc.w, Inputs{}, func(hptype.Metric) {})
			if err == nil {
				t.Fatal("Run succeeded, want an error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestSuspendedAtDeadline(t *testing.T) {
	t.Parallel()
	w := script(t, `
trap 'echo "got TERM, saving" >&2; echo "{\"saved\": 1}"; echo "epoch 3" > "$HPSEARCH_CHECKPOINT_DIR/state"; exit 0' TERM
echo ready >&2
while :; do sleep 0.05; done
`)
	ckpt := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	r := run(t, ctx, w, Inputs{CheckpointDir: ckpt})
	if !errors.Is(r.err, ErrSuspended) || errors.Is(r.err, ErrTimeout) || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrSuspended only", r.err)
	}
	for _, want := range []string{`command "sh run.sh" suspended at the deadline`, "got SIGTERM 300ms before the deadline", "and exited (exit status 0)"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not contain %q", r.err, want)
		}
	}
	if !strings.Contains(r.log.String(), "got TERM, saving") {
		t.Errorf("log %q lacks the script's TERM handler output", r.log)
	}
	if want := []hptype.Metric{{Step: 1, Name: "saved", Value: 1}}; !reflect.DeepEqual(r.metrics, want) {
		t.Errorf("metrics = %v, want %v reported from the TERM handler", r.metrics, want)
	}
	if data, err := os.ReadFile(filepath.Join(ckpt, "state")); err != nil || string(data) != "epoch 3\n" {
		t.Errorf("checkpoint file: %q, %v; want the one the TERM handler wrote", data, err)
	}
	if early := testDeadline - testGrace - 50*time.Millisecond; r.elapsed < early {
		t.Errorf("Run returned after %v, before SIGTERM was due (%v)", r.elapsed, early)
	}
	if r.elapsed > testDeadline {
		t.Errorf("Run returned after %v, after the deadline %v", r.elapsed, testDeadline)
	}
}

// TestStopAfterTerm checks how Run classifies the ways a command can end
// after the deadline's SIGTERM.
func TestStopAfterTerm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap string
		suspended  bool
		want       []string
	}{
		{"exit 143", `trap 'exit 143' TERM`, true, []string{"and exited (exit status 143)"}},
		{"no handler", ``, true, []string{"and was ended by signal: terminated"}},
		{"exit 3", `trap 'echo "save failed" >&2; exit 3' TERM`, false,
			[]string{"exceeded the trial timeout", "and exited (exit status 3), which is not a clean stop", "save failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := script(t, tc.trap+"\necho ready >&2\nwhile :; do sleep 0.05; done\n")
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			r := run(t, ctx, w, Inputs{})
			if errors.Is(r.err, ErrSuspended) != tc.suspended || errors.Is(r.err, ErrTimeout) == tc.suspended {
				t.Fatalf("Run = %v, want suspended %v (else timed out)", r.err, tc.suspended)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error %q does not contain %q", r.err, want)
				}
			}
		})
	}
}

func TestTimeoutKillsAtDeadline(t *testing.T) {
	t.Parallel()
	w := script(t, `
sleep 30 &
echo $! > child.pid
trap '' TERM
while :; do sleep 0.05; done
`)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	r := run(t, ctx, w, Inputs{})
	if !errors.Is(r.err, ErrTimeout) || errors.Is(r.err, ErrSuspended) || !strings.Contains(r.err.Error(), "and SIGKILL at it") {
		t.Fatalf("Run = %v, want ErrTimeout saying it got SIGKILL", r.err)
	}
	if r.elapsed < testDeadline-10*time.Millisecond || r.elapsed > testDeadline+2*time.Second {
		t.Errorf("Run returned after %v, want about the deadline %v", r.elapsed, testDeadline)
	}
	child := readPID(t, w.Dir, "child.pid")
	waitFor(t, "the command's child to die", func() bool { return gone(child) })
}

func TestDeadlineCloserThanGrace(t *testing.T) {
	t.Parallel()
	w := script(t, "while :; do sleep 0.05; done\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := run(t, ctx, w, Inputs{Grace: time.Hour})
	if !errors.Is(r.err, ErrSuspended) || !strings.Contains(r.err.Error(), "was ended by signal: terminated") {
		t.Fatalf("Run = %v, want ErrSuspended by SIGTERM", r.err)
	}
	if r.elapsed > 2*time.Second {
		t.Errorf("Run took %v, want SIGTERM at once when less than the grace period remains", r.elapsed)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap, want  string
		suspended, killed bool
	}{
		{"exits on TERM", `trap 'echo bye >&2; exit 0' TERM`, "suspended because the trial was cancelled: it got SIGTERM and exited (exit status 0)", true, false},
		{"fails on TERM", `trap 'exit 1' TERM`, "it exited (exit status 1) after SIGTERM", false, false},
		{"ignores TERM", `trap '' TERM`, "it got SIGKILL after not exiting within 300ms of SIGTERM", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := script(t, tc.trap+"\necho ready >&2\nwhile :; do sleep 0.05; done\n")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := &syncBuffer{}
			cancelled := make(chan time.Time, 1)
			go func() {
				// Cancel once the script is ready, or after a while if it never is.
				for start := time.Now(); !strings.Contains(log.String(), "ready") && time.Since(start) < 5*time.Second; {
					time.Sleep(10 * time.Millisecond)
				}
				cancelled <- time.Now()
				cancel()
			}()
			r := run(t, ctx, w, Inputs{Log: log})
			cancelledAt := <-cancelled
			if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, ErrTimeout) || errors.Is(r.err, ErrSuspended) != tc.suspended {
				t.Fatalf("Run = %v, want context.Canceled, suspended %v", r.err, tc.suspended)
			}
			if !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", r.err, tc.want)
			}
			took := time.Since(cancelledAt)
			if tc.killed && took < testGrace {
				t.Errorf("Run returned %v after cancel, before the grace period %v", took, testGrace)
			}
			if took > testGrace+2*time.Second {
				t.Errorf("Run returned %v after cancel, want about the grace period %v at most", took, testGrace)
			}
		})
	}
}

func TestCompletedIsNotSuspended(t *testing.T) {
	t.Parallel()
	w := script(t, `trap 'exit 0' TERM; echo '{"epoch": 1, "loss": 0.5}'`)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if r := run(t, ctx, w, Inputs{}); r.err != nil {
		t.Errorf("Run of a command that exits 0 before the deadline = %v, want nil", r.err)
	}
	if r := run(t, context.Background(), script(t, "exit 143\n"), Inputs{}); r.err == nil || errors.Is(r.err, ErrSuspended) || !strings.Contains(r.err.Error(), "exit status 143") {
		t.Errorf("Run of a command that exits 143 unasked = %v, want a failure", r.err)
	}
}

// segmentEnv runs a script that prints the segment's variables and returns
// them; absent ones map to "unset".
func segmentEnv(t *testing.T, in Inputs) map[string]string {
	t.Helper()
	w := script(t, `for v in HPSEARCH_CHECKPOINT_DIR HPSEARCH_RESOURCE_TARGET HPSEARCH_CHECKPOINT_EVERY; do
	eval "echo $v=\${$v-unset}"
done
`)
	r := run(t, context.Background(), w, in)
	if r.err != nil {
		t.Fatal(r.err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	return env
}

// TestSegmentEnvironment is not parallel: it sets the trainer's own
// environment.
func TestSegmentEnvironment(t *testing.T) {
	ckpt := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	got := segmentEnv(t, Inputs{CheckpointDir: rel, Target: 12, CheckpointEvery: 1500 * time.Millisecond})
	want := map[string]string{EnvCheckpointDir: ckpt, EnvResourceTarget: "12", EnvCheckpointEvery: "1.5"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a relative checkpoint directory: env %v, want %v", got, want)
	}
	got = segmentEnv(t, Inputs{CheckpointDir: ckpt, Target: 2.5, CheckpointEvery: 250 * time.Millisecond})
	want = map[string]string{EnvCheckpointDir: ckpt, EnvResourceTarget: "2.5", EnvCheckpointEvery: "0.25"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}

	for _, k := range optionalEnv {
		t.Setenv(k, "inherited")
	}
	got = segmentEnv(t, Inputs{})
	want = map[string]string{EnvCheckpointDir: "unset", EnvResourceTarget: "unset", EnvCheckpointEvery: "unset"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with none set and inherited values: env %v, want %v", got, want)
	}
}

func TestBadSegmentInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   Inputs
		want string
	}{
		{"no checkpoint dir", Inputs{CheckpointDir: filepath.Join(dir, "nope")}, "checkpoint directory: stat " + filepath.Join(dir, "nope") + ": no such file or directory; the trainer must create it"},
		{"checkpoint dir is a file", Inputs{CheckpointDir: file}, "checkpoint directory " + file + " is not a directory"},
		{"negative target", Inputs{Target: -1}, "resource target -1 is not a finite number >= 0"},
		{"NaN target", Inputs{Target: math.NaN()}, "resource target NaN"},
		{"infinite target", Inputs{Target: math.Inf(1)}, "resource target +Inf"},
		{"negative interval", Inputs{CheckpointEvery: -time.Second}, "checkpoint interval -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := script(t, "touch ran\n")
			r := run(t, context.Background(), w, tc.in)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("Run = %v, want an error containing %q", r.err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(w.Dir, "ran")); err == nil {
				t.Error("the command ran despite the error")
			}
		})
	}
}

func TestNotStartedWhenContextDone(t *testing.T) {
	t.Parallel()
	w := script(t, "touch ran\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := run(t, ctx, w, Inputs{})
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", r.err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "ran")); err == nil {
		t.Error("the command ran with a cancelled context")
	}
}

func TestLeftoverProcessesAreKilled(t *testing.T) {
	t.Parallel()
	t.Run("detached output", func(t *testing.T) {
		t.Parallel()
		w := script(t, "sleep 30 >/dev/null 2>&1 &\necho $! > child.pid\n")
		r := run(t, context.Background(), w, Inputs{})
		if r.err != nil {
			t.Fatal(r.err)
		}
		child := readPID(t, w.Dir, "child.pid")
		waitFor(t, "the leftover child to die", func() bool { return gone(child) })
	})
	t.Run("holding stdout", func(t *testing.T) {
		t.Parallel()
		w := script(t, "sleep 30 &\necho $! > child.pid\n")
		r := run(t, context.Background(), w, Inputs{})
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.elapsed > waitDelay+2*time.Second {
			t.Errorf("Run took %v, want about %v", r.elapsed, waitDelay)
		}
		if !strings.Contains(r.log.String(), "kept its output open") {
			t.Errorf("log %q does not explain the wait", r.log)
		}
		child := readPID(t, w.Dir, "child.pid")
		waitFor(t, "the leftover child to die", func() bool { return gone(child) })
	})
}
