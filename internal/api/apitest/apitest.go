// Package apitest helps tests run real studies through the API: a TestMain
// that makes the test binary the trainer the local executor starts, and the
// wiring `hpsearch run` uses on the embedded default.
package apitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/executor/local"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/queue"
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

// Config opens a fresh state directory and returns the configuration of a
// server over it, with one valid token (returned too), the local wiring,
// and warnings logged to the test's output.
func Config(t *testing.T) (api.Config, string, *localstate.State) {
	t.Helper()
	st, err := localstate.Open(t.TempDir(), queue.Config{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	token, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.ParseTokens("test", api.HashToken(token))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	return api.Config{Store: st.Store, Wire: LocalWire(st, logger), Tokens: tokens, LogDir: st.LogDir, Logger: logger}, token, st
}

// Serve serves h on 127.0.0.1 until the test ends, then shuts srv down,
// and returns its URL.
func Serve(t *testing.T, srv *api.Server, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		hs.Close()
	})
	return hs.URL
}
