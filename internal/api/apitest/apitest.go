// Package apitest helps tests run real studies through the API: a TestMain
// that makes the test binary the trainer the local executor starts, and the
// wiring `hpsearch run` uses on the embedded default.
package apitest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/executor/local"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Main is a TestMain that makes the test binary the trainer the local
// executor starts (`SELF trainer`), so studies run real trainer processes,
// and otherwise runs the tests.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "trainer" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := trainer.ServeStdio(ctx, os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// LocalWire runs studies as `hpsearch run` does on the embedded default:
// local trainer processes, checkpoints in the state directory.
func LocalWire(st *localstate.State, logger *slog.Logger) api.Wire {
	return func(ctx context.Context, sp *spec.Spec) (coordinator.Config, func(), error) {
		q, err := st.Queue(sp.Name)
		if err != nil {
			return coordinator.Config{}, nil, err
		}
		b, err := bloburl.Open(ctx, "file://"+filepath.Join(st.Dir, "checkpoints"))
		if err != nil {
			q.Close()
			return coordinator.Config{}, nil, err
		}
		exec, err := local.New(local.Config{})
		if err != nil {
			q.Close()
			return coordinator.Config{}, nil, err
		}
		return coordinator.Config{
			Spec: sp, SpecDir: ".", Store: st.Store, Queue: q, Executor: exec, Checkpoints: checkpoint.New(b),
			LogDir: st.LogDir, Logger: logger, MaxAttempts: 3,
		}, func() { q.Close() }, nil
	}
}
