// Package trainer is the trainer core: it runs one segment of a trial as the
// trainer contract describes (hptype.SegmentRequest in, hptype.SegmentResult
// out). It knows nothing of transports: the local executor speaks to it over
// a process's standard streams (ServeStdio); later transports (a Lambda
// handler, a Cloud Run task, a pool worker) call Run the same way.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer/workload/command"
	"github.com/hpsearch/hpsearch/functions/trainer/workload/digits"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// builtins are the workloads compiled into the trainer.
var builtins = map[string]func(ctx context.Context, req hptype.SegmentRequest, report func(hptype.Metric)) error{
	"digits-mlp": func(ctx context.Context, req hptype.SegmentRequest, report func(hptype.Metric)) error {
		cfg, err := digits.ConfigFromParams(req.Params, req.Seed)
		if err != nil {
			return err
		}
		return digits.Train(ctx, cfg, report)
	},
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
func Run(ctx context.Context, req hptype.SegmentRequest) hptype.SegmentResult {
	start := time.Now()
	res := hptype.SegmentResult{
		APIVersion: hptype.APIVersion,
		Study:      req.Study,
		Trial:      req.Trial,
		Segment:    req.Segment,
		Attempt:    req.Attempt,
		Metrics:    []hptype.Metric{},
	}
	report := func(m hptype.Metric) {
		res.Metrics = append(res.Metrics, m)
		res.ResourceReached = max(res.ResourceReached, m.Step)
	}
	err := run(ctx, req, report)
	res.Usage = usage(time.Since(start))
	if err != nil {
		res.Status = hptype.SegmentFailed
		res.Error = err.Error()
		return res
	}
	res.Status = hptype.SegmentCompleted
	return res
}

func run(ctx context.Context, req hptype.SegmentRequest, report func(hptype.Metric)) error {
	if req.APIVersion != hptype.APIVersion {
		return fmt.Errorf("request api_version %q: this trainer speaks %q; use a trainer built from the same hpsearch release as the coordinator", req.APIVersion, hptype.APIVersion)
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	log, closeLog, err := openLog(req.LogPath)
	if err != nil {
		return err
	}
	defer closeLog()
	w := req.Workload
	switch {
	case w.Builtin != "" && len(w.Command) > 0:
		return errors.New("workload names both a builtin and a command; give one")
	case w.Builtin != "":
		fn, ok := builtins[w.Builtin]
		if !ok {
			return fmt.Errorf("unknown built-in workload %q; known: %s", w.Builtin, strings.Join(Builtins(), ", "))
		}
		err = fn(ctx, req, report)
	case len(w.Command) > 0:
		err = command.Run(ctx, w, command.Inputs{
			Params:  req.Params,
			Study:   req.StudyName,
			Trial:   req.Trial,
			Attempt: req.Attempt,
			Seed:    req.Seed,
			Log:     log,
		}, report)
	default:
		return errors.New("workload names neither a builtin nor a command")
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !req.Deadline.IsZero() {
		return fmt.Errorf("trial exceeded its deadline %s (trainer.timeout in the space file): %w", req.Deadline.Format(time.RFC3339), err)
	}
	return err
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
