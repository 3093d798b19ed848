// Package trainer is the trainer core: it runs one segment of a trial as the
// trainer contract describes (hptype.SegmentRequest in, hptype.SegmentResult
// out). A segment resumes from the trial's newest valid checkpoint, trains
// towards the resource target, checkpoints every Checkpoint.Every and once
// more before its deadline, and returns completed, suspended (stopped at the
// deadline with a checkpoint to resume from) or failed. It knows nothing of
// transports: the local executor speaks to it over a process's standard
// streams (ServeStdio); other transports call Run the same way.
package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// workload runs a segment's training; it returns the status the segment
// ended with, or an error when the workload failed.
type workload func(ctx context.Context, s *segment) (hptype.SegmentStatus, error)

// builtins are the workloads compiled into the trainer.
var builtins = map[string]workload{
	"digits-mlp": runDigits,
}

// Builtins lists the names of the built-in workloads, sorted.
func Builtins() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Run runs one segment. A segment that cannot run or whose workload fails
// comes back with status failed and the error text: Run itself does not fail.
// When the request names a checkpoint store, the result is also stored next
// to the trial's checkpoints, so a coordinator that was down while the
// segment ran can find it.
func Run(ctx context.Context, req hptype.SegmentRequest) hptype.SegmentResult {
	start := time.Now()
	s := &segment{req: req, res: hptype.SegmentResult{
		APIVersion: hptype.APIVersion,
		Study:      req.Study,
		Trial:      req.Trial,
		Segment:    req.Segment,
		Attempt:    req.Attempt,
		Metrics:    []hptype.Metric{},
	}}
	status, err := s.run(ctx)
	if err != nil {
		s.res.Status, s.res.Error = hptype.SegmentFailed, err.Error()
		var r retryable
		s.res.Retryable = errors.As(err, &r)
	} else {
		s.res.Status = status
	}
	s.res.Usage = usage(time.Since(start))
	s.storeResult(ctx)
	return s.res
}

func (s *segment) run(ctx context.Context) (hptype.SegmentStatus, error) {
	req := s.req
	if req.APIVersion != hptype.APIVersion {
		return "", fmt.Errorf("request api_version %q: this trainer speaks %q; use a trainer built from the same hpsearch release as the coordinator", req.APIVersion, hptype.APIVersion)
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	if cp := req.Checkpoint; cp != nil {
		b, err := bloburl.Open(ctx, cp.Store)
		if err != nil {
			return "", retryable{fmt.Errorf("open the checkpoint store: %w", err)}
		}
		s.store = checkpoint.New(b)
	}
	log, closeLog, err := openLog(req.LogPath)
	if err != nil {
		return "", err
	}
	defer closeLog()
	s.log = log
	w := req.Workload
	switch {
	case w.Builtin != "" && len(w.Command) > 0:
		return "", errors.New("workload names both a builtin and a command; give one")
	case w.Builtin != "":
		run, ok := builtins[w.Builtin]
		if !ok {
			return "", fmt.Errorf("unknown built-in workload %q; known: %s", w.Builtin, strings.Join(Builtins(), ", "))
		}
		return run(ctx, s)
	case len(w.Command) > 0:
		return runCommand(ctx, s)
	}
	return "", errors.New("workload names neither a builtin nor a command")
}

// storeResult writes the result next to the trial's checkpoints. A
// failure costs only the chance to reconcile, so it is a warning.
func (s *segment) storeResult(ctx context.Context) {
	if s.store == nil {
		return
	}
	raw, err := json.Marshal(s.res)
	if err == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = s.store.PutResult(wctx, s.req.Checkpoint.Prefix, s.req.Segment, s.req.Attempt, raw)
	}
	if err != nil {
		fmt.Fprintf(s.logWriter(), "hpsearch: could not store the segment result for reconciliation: %v\n", err)
	}
}

// openLog opens the trial's log for appending; with no path the log is
// discarded.
func openLog(path string) (io.Writer, func(), error) {
	if path == "" {
		return io.Discard, func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open trial log: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// usage reports the segment's wall time, its billed time (rounded up to the
// millisecond, as AWS Lambda bills) and the peak resident memory of the
// trainer and the commands it ran.
func usage(wall time.Duration) hptype.Usage {
	u := hptype.Usage{
		WallMS:   wall.Milliseconds(),
		BilledMS: (wall + time.Millisecond - 1).Milliseconds(),
	}
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil && syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) == nil {
		u.PeakMemoryBytes = max(self.Maxrss, children.Maxrss) * 1024
	}
	return u
}

// retryable marks an error that is not the workload's: the checkpoint
// store failed, so the segment may succeed when run again.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }
