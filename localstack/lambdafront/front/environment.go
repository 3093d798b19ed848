package front

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Timings of an environment's aws-lambda-rie process.
const (
	// startTimeout bounds the wait for a new aws-lambda-rie to listen.
	startTimeout = 15 * time.Second
	// startAttempts is how often a start is tried (a free port picked for
	// it may be taken by the time it listens).
	startAttempts = 3
	// timeoutSlack is how long past the function's timeout the front
	// waits for aws-lambda-rie's own "Task timed out" answer before it
	// ends the invocation itself.
	timeoutSlack = 10 * time.Second
	// reportWait bounds the wait, after aws-lambda-rie answered, for its
	// REPORT line, which closes the invocation's share of the log.
	reportWait = 2 * time.Second
	// stopGrace is how long a stopping environment has between SIGTERM
	// and SIGKILL, as Lambda gives a runtime at shutdown.
	stopGrace = 2 * time.Second
	// failureLogWait is how long the front lets a failed runtime's last
	// output reach the log, which has no REPORT line to wait for.
	failureLogWait = 100 * time.Millisecond
	// sampleEvery is how often an invocation's memory is sampled.
	sampleEvery = 100 * time.Millisecond
	// maxLogBytes bounds the log an invocation keeps for its tail.
	maxLogBytes = 64 << 10
)

// rieLine matches the log lines of aws-lambda-rie itself, e.g.
// "29 Nov 2026 18:45:41,189 [INFO] (rapid) INIT START(...)", which Lambda
// does not show a function.
var rieLine = regexp.MustCompile(`^\d{1,2} \w{3} \d{4} \d{2}:\d{2}:\d{2},\d{3} \[\w+\] \(rapid\)`)

// initReport matches aws-lambda-rie's record of the init phase.
var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// environment is one execution environment of a function: an
// aws-lambda-rie process (started when first needed) that runs the
// function's bootstrap, one invocation at a time.
type environment struct {
	fn     Function
	index  int
	rie    string
	region string
	log    *slog.Logger

	mu   sync.Mutex
	proc *rieProcess // nil until started, and after it was stopped
}

// rieProcess is a running aws-lambda-rie.
type rieProcess struct {
	cmd    *exec.Cmd
	url    string        // its invoke URL
	exited chan struct{} // closed when the process has exited
	out    *output
	once   sync.Once

	mu     sync.Mutex
	groups map[int]bool // process groups seen in its tree
}

// process returns the environment's running aws-lambda-rie, starting one
// when it has none or the one it had exited.
func (e *environment) process(ctx context.Context) (*rieProcess, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if e.proc != nil {
		select {
		case <-e.proc.exited:
			e.log.Warn("aws-lambda-rie exited; starting a new one", "function", e.fn.Name, "env", e.index)
			e.proc.stop(0)
			e.proc = nil
		default:
			return e.proc, nil
		}
	}
	var errs []error
	for range startAttempts {
		p, err := e.start(ctx)
		if err == nil {
			e.proc = p
			return p, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start aws-lambda-rie for function %s: %w", e.fn.Name, errors.Join(errs...))
}

// reset stops the environment's process; the next invocation starts a new
// one (a cold start), as Lambda replaces an environment whose runtime
// crashed or timed out.
func (e *environment) reset() {
	e.mu.Lock()
	p := e.proc
	e.proc = nil
	e.mu.Unlock()
	if p != nil {
		p.stop(0)
	}
}

// shutdown stops the environment's process, SIGTERM first.
func (e *environment) shutdown() {
	e.mu.Lock()
	p := e.proc
	e.proc = nil
	e.mu.Unlock()
	if p != nil {
		p.stop(stopGrace)
	}
}

// start starts an aws-lambda-rie on free ports of 127.0.0.1 and waits
// until it listens.
func (e *environment) start(ctx context.Context) (*rieProcess, error) {
	emuAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.rie,
		"--runtime-interface-emulator-address", emuAddr,
		"--runtime-api-address", apiAddr,
		"--log-level", "info",
		e.fn.Bootstrap)
	// Lambda runs the bootstrap in its own folder (LAMBDA_TASK_ROOT).
	cmd.Dir = filepath.Dir(e.fn.Bootstrap)
	cmd.Env = e.runtimeEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for aws-lambda-rie's output: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("run %s: %w; install it with: go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest", e.rie, err)
	}
	p := &rieProcess{
		cmd:    cmd,
		url:    "http://" + emuAddr + "/2015-03-31/functions/function/invocations",
		exited: make(chan struct{}),
		out:    &output{log: e.log.With("function", e.fn.Name, "env", e.index, "pid", cmd.Process.Pid)},
	}
	go p.out.read(r)
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	if err := p.awaitListening(ctx, emuAddr); err != nil {
		p.stop(0)
		return nil, fmt.Errorf("aws-lambda-rie (pid %d) on %s: %w; its last output: %s", cmd.Process.Pid, emuAddr, err, p.out.last())
	}
	e.log.Info("started aws-lambda-rie", "function", e.fn.Name, "env", e.index, "pid", cmd.Process.Pid, "addr", emuAddr)
	return p, nil
}

// runtimeEnv is the environment of aws-lambda-rie, which passes it on to
// the runtime: a few variables of the front's own (PATH, HOME, TMPDIR,
// LANG, TZ), what Lambda sets for a function, and the function's own
// variables, which win.
func (e *environment) runtimeEnv() []string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	name := e.fn.Name
	env["AWS_LAMBDA_FUNCTION_NAME"] = name
	env["AWS_LAMBDA_FUNCTION_VERSION"] = "$LATEST"
	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(e.fn.MemoryMB)
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(int(time.Duration(e.fn.Timeout) / time.Second))
	env["AWS_LAMBDA_LOG_GROUP_NAME"] = "/aws/lambda/" + name
	env["AWS_LAMBDA_LOG_STREAM_NAME"] = fmt.Sprintf("%s/[$LATEST]env%d", time.Now().UTC().Format("2006/01/02"), e.index)
	env["AWS_REGION"] = e.region
	env["AWS_DEFAULT_REGION"] = e.region
	env["LAMBDA_TASK_ROOT"] = filepath.Dir(e.fn.Bootstrap)
	env["LAMBDA_RUNTIME_DIR"] = filepath.Dir(e.fn.Bootstrap)
	env["_HANDLER"] = "bootstrap"
	for k, v := range e.fn.Env {
		env[k] = v
	}
	return sortedEnv(env)
}

// freeAddr returns an address of 127.0.0.1 with a port that was free.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// awaitListening waits until the process accepts connections on addr.
func (p *rieProcess) awaitListening(ctx context.Context, addr string) error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before it listened (%v)", p.cmd.ProcessState)
		case <-deadline.C:
			return fmt.Errorf("not listening after %v", startTimeout)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// stop ends the process and every process it started, which the runtime
// supervisor puts in process groups of their own: SIGTERM first when grace
// is positive, SIGKILL after grace or at once. It returns when
// aws-lambda-rie has exited.
func (p *rieProcess) stop(grace time.Duration) {
	p.once.Do(func() {
		tree := p.tree()
		if grace > 0 {
			p.signal(tree, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(grace):
			}
		}
		p.signal(tree, syscall.SIGKILL)
		<-p.exited
	})
}

// tree returns the process and its living descendants, and remembers
// their process groups.
func (p *rieProcess) tree() []procInfo {
	tree := processTree(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.groups == nil {
		p.groups = map[int]bool{p.cmd.Process.Pid: true}
	}
	for _, q := range tree {
		p.groups[q.pgid] = true
	}
	return tree
}

// signal sends sig to every process group seen in the process's tree (a
// runtime outlives aws-lambda-rie in its own group), and to each process
// of tree.
func (p *rieProcess) signal(tree []procInfo, sig syscall.Signal) {
	own := syscall.Getpgrp()
	p.mu.Lock()
	for g := range p.groups {
		if g > 1 && g != own {
			syscall.Kill(-g, sig)
		}
	}
	p.mu.Unlock()
	for _, q := range tree {
		syscall.Kill(q.pid, sig)
	}
}

// memoryNow returns how much resident memory the runtime's processes
// (everything aws-lambda-rie started) hold, or the peak (VmHWM) of the
// runtime itself when that is more.
func (p *rieProcess) memoryNow() int64 {
	tree := p.tree()
	if len(tree) == 0 {
		return 0
	}
	var total, peak int64
	for _, q := range tree[1:] {
		rss, hwm := memory(q.pid)
		total += rss
		if q.ppid == p.cmd.Process.Pid {
			peak = max(peak, hwm)
		}
	}
	return max(total, peak)
}

// peakMemory samples memoryNow until ctx ends, once more then, and
// returns the most it saw, or first if that is more.
func (p *rieProcess) peakMemory(ctx context.Context, first int64) int64 {
	peak := first
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return max(peak, p.memoryNow())
		case <-tick.C:
			peak = max(peak, p.memoryNow())
		}
	}
}

// output reads aws-lambda-rie's output (its own log and the runtime's),
// logs it, and keeps the current invocation's share of it.
type output struct {
	log *slog.Logger

	mu        sync.Mutex
	requestID string        // the invocation in progress, if any
	lines     []string      // its function output
	bytes     int           // the size of lines
	init      time.Duration // its init phase, when it had one
	ended     chan struct{} // closed at its REPORT line
	recent    []string      // the last lines, for errors
}

// read reads r to its end.
func (o *output) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			o.line(strings.TrimRight(line, "\r\n"))
		}
		if err != nil {
			return
		}
	}
}

// line takes one line of output.
func (o *output) line(s string) {
	isRIE := rieLine.MatchString(s)
	if isRIE || isRIEReport(s) {
		o.log.Debug("aws-lambda-rie", "line", s)
	} else {
		o.log.Info("function output", "line", s)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recent = append(o.recent, s)
	if len(o.recent) > 20 {
		o.recent = o.recent[1:]
	}
	if o.requestID == "" {
		return
	}
	switch {
	case isRIE:
		if m := initReport.FindStringSubmatch(s); m != nil {
			if ms, err := strconv.ParseFloat(m[1], 64); err == nil {
				o.init = time.Duration(ms * float64(time.Millisecond))
			}
		}
	case strings.HasPrefix(s, "REPORT RequestId: "+o.requestID):
		select {
		case <-o.ended:
		default:
			close(o.ended)
		}
	case isRIEReport(s):
	default:
		o.lines = append(o.lines, s)
		o.bytes += len(s) + 1
		for o.bytes > maxLogBytes && len(o.lines) > 1 {
			o.bytes -= len(o.lines[0]) + 1
			o.lines = o.lines[1:]
		}
	}
}

// isRIEReport reports whether s is one of the START, END and REPORT lines
// that aws-lambda-rie prints for an invocation (the front writes its own).
func isRIEReport(s string) bool {
	return strings.HasPrefix(s, "START RequestId: ") || strings.HasPrefix(s, "END RequestId: ") || strings.HasPrefix(s, "REPORT RequestId: ")
}

// begin starts keeping the output of invocation id.
func (o *output) begin(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requestID, o.lines, o.bytes, o.init = id, nil, 0, 0
	o.ended = make(chan struct{})
}

// finish waits (at most until done or wait passes) for aws-lambda-rie's
// REPORT line of the invocation in progress, which follows the function's
// output, then returns that output and the init phase and stops keeping
// output.
func (o *output) finish(done <-chan struct{}, wait time.Duration) ([]string, time.Duration) {
	o.mu.Lock()
	ended := o.ended
	o.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ended:
	case <-done:
	case <-t.C:
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	lines, init := o.lines, o.init
	o.requestID, o.lines, o.bytes = "", nil, 0
	return lines, init
}

// last returns the last lines of output, for an error message.
func (o *output) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.recent) == 0 {
		return "(none)"
	}
	return strings.Join(o.recent, " | ")
}

// rawOutcome is what aws-lambda-rie made of one invocation.
type rawOutcome struct {
	status   int    // its HTTP status; 0 when it did not answer
	body     []byte // its answer
	err      error  // why it did not answer
	timedOut bool   // the front gave up waiting (timeout plus slack)
	exited   bool   // aws-lambda-rie exited meanwhile
	duration time.Duration
	init     time.Duration
	peak     int64
	lines    []string
}

// invoke sends one invocation to the process and waits for its answer.
// The invocation runs until it ends or the function's timeout (plus slack)
// passes, even when the caller goes away, as on Lambda; only ctx ending
// (the front shutting down) cuts it short.
func (p *rieProcess) invoke(ctx context.Context, client *http.Client, fn Function, inv invocation) rawOutcome {
	ctx, cancel := context.WithTimeoutCause(ctx, time.Duration(fn.Timeout)+timeoutSlack, errInvokeTimeout)
	defer cancel()
	p.out.begin(inv.requestID)

	// The first sample is taken now: a warm runtime that crashes at once
	// is gone before a sampler's first tick.
	first := p.memoryNow()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	peak := make(chan int64, 1)
	go func() { peak <- p.peakMemory(sampleCtx, first) }()

	var out rawOutcome
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(inv.payload))
	if err == nil {
		req.Header.Set("X-Amzn-RequestId", inv.requestID)
		if inv.clientContext != "" {
			req.Header.Set("X-Amz-Client-Context", inv.clientContext)
		}
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			out.status = resp.StatusCode
			out.body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
			resp.Body.Close()
		}
	}
	out.duration = time.Since(start)
	stopSampling()
	out.peak = <-peak
	if err != nil {
		out.status, out.err = 0, err
		out.timedOut = errors.Is(context.Cause(ctx), errInvokeTimeout)
	}
	// aws-lambda-rie prints a REPORT line after a response and a timeout,
	// but not after a runtime's failure.
	wait := reportWait
	if out.status != http.StatusOK {
		wait = failureLogWait
	}
	out.lines, out.init = p.out.finish(p.exited, wait)
	select {
	case <-p.exited:
		out.exited = true
	default:
	}
	return out
}

// errInvokeTimeout is the cause of an invocation given up after its
// function's timeout and slack.
var errInvokeTimeout = errors.New("aws-lambda-rie did not answer by the function's timeout")
