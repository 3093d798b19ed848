// Package command runs a user's command as one segment of a trial:
// typically `python3 train.py`. It hands the command its parameters as a JSON
// file and as environment variables, a checkpoint directory to resume from
// and save into, and the resource (e.g. epoch) to train up to; it reads
// metrics from the JSON lines the command prints on stdout, passes everything
// else it prints to the trial's log, and stops it at the segment's deadline:
// SIGTERM a grace period before, so that it can save its work, and SIGKILL at
// the deadline.
//
// Run's error says how the command ended: nil when it exited with status 0
// on its own, an error wrapping ErrSuspended when it stopped cleanly after
// SIGTERM (so that what it saved can be resumed), ErrTimeout when it was
// killed at the deadline or failed after SIGTERM, and a plain error when it
// failed by itself.
//
// The command runs in a process group of its own, and every signal goes to
// the whole group, so the processes it starts stop with it. The package
// runs on Unix systems only.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Environment variables the command receives, on top of the trainer's own
// environment and the workload's Env.
const (
	// EnvParamsFile is the path of a JSON object holding the parameters.
	EnvParamsFile = "HPSEARCH_PARAMS_FILE"
	// EnvParamPrefix starts the name of one variable per parameter: the
	// parameter's name upper-cased, with every character other than A-Z,
	// 0-9 and _ replaced by _ (learning_rate → HPSEARCH_PARAM_LEARNING_RATE).
	EnvParamPrefix = "HPSEARCH_PARAM_"
	EnvStudy       = "HPSEARCH_STUDY"
	EnvTrial       = "HPSEARCH_TRIAL"
	EnvAttempt     = "HPSEARCH_ATTEMPT"
	// EnvSeed is the seed the command should use to be reproducible.
	EnvSeed = "HPSEARCH_SEED"
	// EnvCheckpointDir is the absolute path of Inputs.CheckpointDir: the
	// command resumes from what it finds there and saves its state there.
	// Absent when Inputs.CheckpointDir is empty.
	EnvCheckpointDir = "HPSEARCH_CHECKPOINT_DIR"
	// EnvResourceTarget is Inputs.Target, the resource (e.g. epoch) to train
	// up to in this segment, as a decimal number. Absent when the target is 0.
	EnvResourceTarget = "HPSEARCH_RESOURCE_TARGET"
	// EnvCheckpointEvery is Inputs.CheckpointEvery in seconds, as a decimal
	// number that may have a fraction ("2", "0.5"). Absent when it is 0.
	EnvCheckpointEvery = "HPSEARCH_CHECKPOINT_EVERY"
)

// optionalEnv are the variables that Run sets only when their input is set.
// Run removes them from the environment it passes on otherwise, so that a
// value the trainer inherited cannot pass for one of its own.
var optionalEnv = []string{EnvCheckpointDir, EnvResourceTarget, EnvCheckpointEvery}

// DefaultGrace is how long before the deadline the command gets SIGTERM
// when Inputs.Grace is not set.
const DefaultGrace = 5 * time.Second

// waitDelay bounds how long Run waits, once the command has exited, for the
// processes it left behind to close its stdout and stderr.
const waitDelay = time.Second

// ErrTimeout is wrapped by the error Run returns when the command reached
// its deadline without stopping cleanly: it got SIGKILL there, or it exited
// with a failure status after the SIGTERM before it. What it saved after its
// last good checkpoint cannot be trusted.
var ErrTimeout = errors.New("exceeded the trial timeout")

// ErrSuspended is wrapped by the error Run returns when the command stopped
// cleanly after Run's SIGTERM, the one a grace period before the deadline or
// the one on cancellation: it exited with status 0 or 143 (128 + SIGTERM,
// as shells report it), or was ended by the SIGTERM itself, before SIGKILL.
// It had its chance to save its state into the checkpoint directory, and the
// trial can be resumed from there. When ctx was cancelled the error wraps
// ctx.Err() as well.
//
// A command that finished its work just as the SIGTERM came is reported as
// suspended too; resumed, it finds its target reached.
var ErrSuspended = errors.New("suspended")

// Inputs are what one run of the command receives besides the workload.
type Inputs struct {
	// Params are the trial's parameters.
	Params hptype.Params
	// Study is the study's name.
	Study   string
	Trial   int
	Attempt int
	Seed    int64
	// Log receives the command's stderr as it comes and the lines of its
	// stdout that are not metric reports. Nil discards them. Writes to Log
	// come from other goroutines, one at a time, and end when Run returns.
	Log io.Writer
	// Grace is how long before ctx's deadline the command gets SIGTERM; it
	// gets SIGKILL at the deadline. On cancellation it gets SIGTERM at once
	// and SIGKILL Grace later. Zero or negative means DefaultGrace.
	Grace time.Duration
	// CheckpointDir, when set, is an existing local directory into which the
	// caller has restored the trial's latest checkpoint, if it has one. The
	// command gets its absolute path as HPSEARCH_CHECKPOINT_DIR, resumes from
	// what it finds there and saves there; the caller uploads its contents
	// after Run returns.
	CheckpointDir string
	// Target is the resource (e.g. epoch) the command should train up to in
	// this segment, passed as HPSEARCH_RESOURCE_TARGET; 0 passes nothing and
	// leaves the command to its own end. It must be finite and >= 0.
	Target float64
	// CheckpointEvery is how often the command should save its state into
	// CheckpointDir while it runs, passed in seconds as
	// HPSEARCH_CHECKPOINT_EVERY; 0 passes nothing. It must be >= 0.
	CheckpointEvery time.Duration
}

// Run runs the command w.Command in w.Dir with the parameters in p and calls
// report for every metric it prints on stdout, until the command exits or
// ctx ends. Calls to report come from another goroutine, one at a time, and
// end when Run returns. A program name without a slash is looked up in the
// trainer's PATH; one with a slash is relative to w.Dir.
//
// Every line of stdout that is a JSON object with at least one numeric field
// is a metric report: each numeric field is a metric, except "step", which
// gives the Step of the others. When there is no numeric "step", a numeric
// "epoch" gives the Step instead and is not a metric itself; with neither,
// Step is the number of report lines so far, counting from 1. Other fields
// are ignored, and other lines go to p.Log.
//
// Run tells how the command ended by its error:
//
//   - nil: it exited with status 0 before any signal from Run; the segment
//     is complete.
//   - wrapping ErrSuspended: it stopped cleanly after Run's SIGTERM (see
//     ErrSuspended), at the deadline or on cancellation; on cancellation the
//     error wraps ctx.Err() as well. The segment can be resumed from what the
//     command saved.
//   - wrapping ErrTimeout: it got SIGKILL at the deadline, or exited with a
//     failure status after the SIGTERM before it.
//   - wrapping ctx.Err(), not ErrSuspended: ctx was cancelled and the command
//     got SIGKILL Grace after SIGTERM, or exited with a failure status.
//   - otherwise: the command did not start, or failed on its own; the error
//     gives the exit status and the end of its stderr.
func Run(ctx context.Context, w hptype.Workload, p Inputs, report func(hptype.Metric)) error {
	if len(w.Command) == 0 || w.Command[0] == "" {
		return errors.New("command workload: the command is empty; set trainer.command in the space file, e.g. [python3, train.py]")
	}
	name := strings.Join(w.Command, " ")
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("command %q not started: %w", name, err)
	}
	dir, err := workDir(w.Dir)
	if err != nil {
		return err
	}
	if p, err = checkInputs(p); err != nil {
		return err
	}
	paramsFile, err := writeParams(p.Params)
	if err != nil {
		return err
	}
	defer os.Remove(paramsFile)
	env, err := environment(w.Env, p, paramsFile)
	if err != nil {
		return err
	}
	grace := p.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	log := &lockedWriter{w: p.Log}
	if p.Log == nil {
		log.w = io.Discard
	}
	stdout := &metricWriter{report: report, log: log}
	stderr := &tail{}

	cmd := exec.Command(w.Command[0], w.Command[1:]...)
	cmd.Dir = w.Dir
	cmd.Env = env
	cmd.Stdout = stdout
	cmd.Stderr = io.MultiWriter(log, stderr)
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return startError(w.Command[0], dir, err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	stopped := make(chan stop, 1)
	go func() { stopped <- supervise(ctx, pgid, grace, exited) }()
	waitErr := cmd.Wait()
	close(exited)
	st := <-stopped
	// Whatever the command left running in its group goes with it.
	signalGroup(pgid, syscall.SIGKILL)
	stdout.flush()

	if errors.Is(waitErr, exec.ErrWaitDelay) {
		// It exited successfully but left a process holding its output,
		// which the group kill above has ended.
		fmt.Fprintf(log, "hpsearch: command %q exited but processes it started kept its output open for %v; they were killed\n", name, waitDelay)
	}
	ended := describeExit(cmd.ProcessState)
	deadline, _ := ctx.Deadline()
	at := deadline.Format(time.RFC3339)
	switch {
	case st.termed && stoppedCleanly(cmd.ProcessState):
		if st.cancelled {
			return fmt.Errorf("command %q %w because the trial was cancelled: it got SIGTERM and %s: %w", name, ErrSuspended, ended, ctx.Err())
		}
		return fmt.Errorf("command %q %w at the deadline: it got SIGTERM %v before the deadline (%s) and %s",
			name, ErrSuspended, st.termLead, at, ended)
	case st.deadline:
		how := fmt.Sprintf("it got SIGKILL at the deadline (%s)", at)
		switch {
		case st.termed && st.killed:
			how = fmt.Sprintf("it got SIGTERM %v before the deadline (%s) and SIGKILL at it", st.termLead, at)
		case st.termed:
			how = fmt.Sprintf("it got SIGTERM %v before the deadline (%s) and %s, which is not a clean stop (that is exit status 0 or 143, or death by SIGTERM); make it save and exit 0 on SIGTERM",
				st.termLead, at, ended)
		}
		return fmt.Errorf("command %q %w: %s; raise trainer.timeout in the space file or make the trial shorter%s",
			name, ErrTimeout, how, stderr.describe())
	case st.cancelled:
		how := "it " + ended + " after SIGTERM"
		if st.killed {
			how = fmt.Sprintf("it got SIGKILL after not exiting within %v of SIGTERM", grace)
		}
		return fmt.Errorf("command %q stopped because the trial was cancelled (%s): %w", name, how, ctx.Err())
	case waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay):
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			return fmt.Errorf("command %q in %s failed (%s)%s%s", name, dir, exit.ProcessState, exitHint(exit), stderr.describe())
		}
		return fmt.Errorf("command %q in %s: %w", name, dir, waitErr)
	}
	return nil
}

// stop records how supervise stopped the command.
type stop struct {
	termed    bool          // it got SIGTERM, for the deadline or on cancellation
	termLead  time.Duration // for the deadline's SIGTERM: how long before the deadline
	deadline  bool          // it reached the deadline or the grace period before it
	cancelled bool          // ctx was cancelled before the deadline's SIGTERM
	killed    bool          // it got SIGKILL from us
}

// supervise signals the process group pgid as ctx requires until exited is
// closed: SIGTERM grace before ctx's deadline and SIGKILL at it, or on
// cancellation SIGTERM at once and SIGKILL grace later.
func supervise(ctx context.Context, pgid int, grace time.Duration, exited <-chan struct{}) stop {
	var st stop
	var term, kill <-chan time.Time
	var lead time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		lead = max(min(grace, time.Until(deadline)), 0).Round(time.Millisecond)
		t := time.NewTimer(time.Until(deadline) - grace)
		defer t.Stop()
		term = t.C
	}
	done := ctx.Done()
	for {
		select {
		case <-exited:
			return st
		case <-term:
			term = nil
			st.deadline, st.termed, st.termLead = true, true, lead
			signalGroup(pgid, syscall.SIGTERM)
		case <-done:
			done, term = nil, nil
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				st.deadline, st.killed = true, true
				signalGroup(pgid, syscall.SIGKILL)
				continue
			}
			if !st.deadline {
				st.cancelled, st.termed = true, true
				signalGroup(pgid, syscall.SIGTERM)
			}
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			st.killed = true
			signalGroup(pgid, syscall.SIGKILL)
		}
	}
}

// checkInputs checks the segment's inputs and returns them with
// CheckpointDir made absolute, since the command runs in another directory.
func checkInputs(p Inputs) (Inputs, error) {
	if math.IsNaN(p.Target) || math.IsInf(p.Target, 0) || p.Target < 0 {
		return p, fmt.Errorf("command workload: resource target %v is not a finite number >= 0; the coordinator sent a bad segment request", p.Target)
	}
	if p.CheckpointEvery < 0 {
		return p, fmt.Errorf("command workload: checkpoint interval %v is negative; give 0 for none", p.CheckpointEvery)
	}
	if p.CheckpointDir == "" {
		return p, nil
	}
	dir, err := filepath.Abs(p.CheckpointDir)
	if err != nil {
		return p, fmt.Errorf("command workload: checkpoint directory %s: %w", p.CheckpointDir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return p, fmt.Errorf("command workload: checkpoint directory: %w; the trainer must create it (and restore the checkpoint into it) before it runs the command", err)
	}
	if !fi.IsDir() {
		return p, fmt.Errorf("command workload: checkpoint directory %s is not a directory", dir)
	}
	p.CheckpointDir = dir
	return p, nil
}

// workDir checks the command's working directory and returns it in a form
// fit for messages.
func workDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("command workload: find the current directory: %w; set trainer.dir in the space file", err)
		}
		return wd, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("command workload: working directory: %w; fix trainer.dir in the space file", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("command workload: working directory %s is not a directory; fix trainer.dir in the space file", dir)
	}
	return dir, nil
}

// startError explains why program could not start in dir.
func startError(program, dir string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("command %q not found on PATH (working directory %s): %w; install it or give its path in trainer.command", program, dir, err)
	case errors.Is(err, fs.ErrNotExist) && strings.Contains(program, "/"):
		return fmt.Errorf("command %q not found in working directory %s: %w; fix trainer.command or trainer.dir in the space file", program, dir, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("command %q (working directory %s) cannot be run: %w; make it executable (chmod +x) or run it through its interpreter, e.g. [python3, train.py]", program, dir, err)
	}
	return fmt.Errorf("command %q (working directory %s) did not start: %w", program, dir, err)
}

// writeParams writes the parameters as a JSON object to a new temporary
// file and returns its path.
func writeParams(params hptype.Params) (string, error) {
	if params == nil {
		params = hptype.Params{}
	}
	data, err := json.Marshal(params)
	if err != nil {
		return "", fmt.Errorf("command workload: encode parameters as JSON: %w", err)
	}
	f, err := os.CreateTemp("", "hpsearch-params-*.json")
	if err != nil {
		return "", fmt.Errorf("command workload: create parameters file: %w; check that the temporary directory (TMPDIR) is writable", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("command workload: write parameters file: %w", err)
	}
	return f.Name(), nil
}

// environment returns the command's environment: the trainer's own, less
// the optionalEnv variables, then the workload's, then hpsearch's variables.
// Later entries win.
func environment(extra map[string]string, p Inputs, paramsFile string) ([]string, error) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(optionalEnv, k)
	})
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("command workload: environment variable name %q is not valid; fix trainer.env in the space file", k)
		}
		env = append(env, k+"="+extra[k])
	}
	env = append(env,
		EnvParamsFile+"="+paramsFile,
		EnvStudy+"="+p.Study,
		EnvTrial+"="+strconv.Itoa(p.Trial),
		EnvAttempt+"="+strconv.Itoa(p.Attempt),
		EnvSeed+"="+strconv.FormatInt(p.Seed, 10),
	)
	if p.CheckpointDir != "" {
		env = append(env, EnvCheckpointDir+"="+p.CheckpointDir)
	}
	if p.Target > 0 {
		env = append(env, EnvResourceTarget+"="+strconv.FormatFloat(p.Target, 'g', -1, 64))
	}
	if p.CheckpointEvery > 0 {
		env = append(env, EnvCheckpointEvery+"="+strconv.FormatFloat(p.CheckpointEvery.Seconds(), 'g', -1, 64))
	}
	from := map[string]string{} // variable name → parameter name
	for _, name := range slices.Sorted(maps.Keys(p.Params)) {
		key := ParamEnvName(name)
		if other, ok := from[key]; ok {
			return nil, fmt.Errorf("command workload: parameters %q and %q would both be passed as %s; rename one in the space file", other, name, key)
		}
		from[key] = name
		env = append(env, key+"="+formatValue(p.Params[name]))
	}
	return env, nil
}

// ParamEnvName returns the environment variable that carries parameter name.
func ParamEnvName(name string) string {
	var b strings.Builder
	b.WriteString(EnvParamPrefix)
	for _, r := range strings.ToUpper(name) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// formatValue writes a parameter value the way a shell script or
// float()/int() would read it: floats in the shortest form that reads back
// exactly, integers as integers, booleans as true/false.
func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return fmt.Sprint(v)
}

// lockedWriter serialises writes from the stdout and stderr goroutines. It
// never fails: a log that cannot be written must not stop the copying of the
// command's output, or the command would block on a full pipe.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(p) // errors ignored: see the type's comment
	return len(p), nil
}
