// Package local is the executor of the embedded default: each segment runs
// in a trainer process on this machine, which reads the SegmentRequest on its
// standard input and writes the SegmentResult on its standard output.
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Config configures the local executor.
type Config struct {
	// Command starts a trainer process. Defaults to this executable with the
	// argument "trainer" (the hidden `hpsearch trainer` command).
	Command []string
	// Grace is how long a trainer gets between SIGTERM and SIGKILL when its
	// segment is stopped. Defaults to 5 seconds.
	Grace time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Command) == 0 {
		self, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find the hpsearch executable to run trainers: %w", err)
		}
		c.Command = []string{self, "trainer"}
	}
	if c.Grace <= 0 {
		c.Grace = 5 * time.Second
	}
	return c, nil
}

// Executor runs segments in local trainer processes.
type Executor struct {
	cfg Config
}

// New returns a local executor.
func New(cfg Config) (*Executor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg}, nil
}

// Run implements executor.Executor. When ctx ends, the trainer gets SIGTERM
// and Grace to checkpoint and answer; its answer, if it gives one, is
// returned. The trainer process runs in its own
// process group, so a Ctrl-C at the terminal reaches only the coordinator,
// which then stops trainers in order; and it is killed if the coordinator
// dies, so no trainer outlives the process that would record its result.
func (e *Executor) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("encode segment request: %w", err)
	}
	if !req.Deadline.IsZero() {
		// The trainer enforces the deadline itself; this is the backstop for
		// a trainer that does not return.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline.Add(2*e.cfg.Grace))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, e.cfg.Command[0], e.cfg.Command[1:]...)
	cmd.Stdin = bytes.NewReader(payload)
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = e.cfg.Grace
	runErr := cmd.Run()
	var res hptype.SegmentResult
	if runErr == nil {
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			return hptype.SegmentResult{}, fmt.Errorf("trainer for trial %d attempt %d wrote no valid result: %w%s", req.Trial, req.Attempt, err, stderr.suffix())
		}
	}
	switch {
	case runErr != nil && ctx.Err() != nil:
		// Stopped, and the trainer did not answer within its grace period.
		return hptype.SegmentResult{}, fmt.Errorf("segment of trial %d attempt %d stopped: %w", req.Trial, req.Attempt, context.Cause(ctx))
	case runErr != nil:
		return hptype.SegmentResult{}, fmt.Errorf("trainer process for trial %d attempt %d: %w%s", req.Trial, req.Attempt, runErr, stderr.suffix())
	}
	if res.Trial != req.Trial || res.Attempt != req.Attempt || res.Study != req.Study {
		return hptype.SegmentResult{}, fmt.Errorf("trainer answered for %s trial %d attempt %d, asked for %s trial %d attempt %d", res.Study, res.Trial, res.Attempt, req.Study, req.Trial, req.Attempt)
	}
	return res, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return "; trainer stderr: " + s
}
