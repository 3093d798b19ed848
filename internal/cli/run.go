package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func newRunCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run SPACE.yaml",
		Short: "Run a study, or resume it",
		Long: `Run the study a space file declares. State lives in the state directory;
trials run on the space file's backend: local trainer processes (the
default), AWS Lambda invocations or Cloud Run job executions, in segments of
at most backend.max_runtime that resume from checkpoints (checkpoint.store,
by default the state directory's checkpoints folder). With a scheduler
section, trials are judged at rungs and the unpromising ones stopped early;
with a pool section, trials that do not fit the backend go to the pool's
workers (hpsearch worker), whose queue this command serves on pool.listen
to workers that present $HPSEARCH_POOL_TOKEN.

On a terminal it shows live progress; otherwise it prints a line per event;
with --json it prints one JSON event per line. At the end it prints the best
trial and a summary with the cost.

Ctrl-C stops cleanly: running trials are asked to checkpoint and are
recorded as interrupted. Running the same command again resumes the study
where it stopped, also after a crash: completed trials are not run again.

With --server URL the study runs on that hpsearch server: the command
creates it there (or resumes it, or follows it if it runs already), shows
its events as they come, and Ctrl-C stops it on the server.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.run(cmd.Context(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON lines")
	return cmd
}

func (g *globals) run(ctx context.Context, path string, asJSON bool) error {
	if g.server != "" {
		return g.runRemote(ctx, path, asJSON)
	}
	sp, err := spec.Load(path)
	if err != nil {
		return usageError(err)
	}
	specDir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return usageError(err)
	}
	st, err := g.openState()
	if err != nil {
		return err
	}
	defer st.Close()
	if prev, err := st.Store.GetStudy(ctx, sp.Name); err == nil && prev.State == hptype.StudyCancelled {
		return usageError(fmt.Errorf("study %q was cancelled and does not resume; give the space file another name", sp.Name))
	}
	cfg, release, err := wire(ctx, st, sp, specDir, newLogger(g.stderr))
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	defer release()
	if p := sp.Pool; p != nil && p.Queue == "http" && !asJSON {
		scheme := "http"
		if os.Getenv(envPoolTLSCert) != "" {
			scheme = "https"
		}
		fmt.Fprintf(g.stdout, "pool %s: workers lease from %s://%s with the token in $%s\n", p.Name, scheme, p.Listen, envPoolToken)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()

	view := newView(g.stdout, sp, asJSON)
	defer view.close()
	cfg.OnEvent = view.event
	res, err := coordinator.Run(ctx, cfg)
	if errors.Is(err, coordinator.ErrSearchChanged) {
		return usageError(err)
	}
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	view.close()
	if !asJSON {
		printSummary(g.stdout, sp, res, st.LogDir)
	}
	return runExit(sp.Name, res.Study.State, res.Reason, res.Progress.Best != nil, filepath.Join(st.LogDir, sp.Name))
}

// runExit is the outcome of a run that left its study in state: an error
// with the exit code for a study that stopped, failed, was cancelled or
// spent its budget with no completed trial.
func runExit(name string, state hptype.StudyState, reason string, hasBest bool, logs string) error {
	switch state {
	case hptype.StudyStopped:
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("study %q stopped; run the same command again to resume it", name)}
	case hptype.StudyCancelled:
		return &exitError{code: ExitFailed, err: fmt.Errorf("study %q was cancelled", name)}
	case hptype.StudyFailed:
		return &exitError{code: ExitFailed, err: fmt.Errorf("study %q failed: %s; see the trial logs in %s", name, reason, logs)}
	case hptype.StudyBudgetExhausted:
		if !hasBest {
			return &exitError{code: ExitFailed, err: fmt.Errorf("study %q spent its budget with no completed trial", name)}
		}
	}
	return nil
}

// wire prepares the coordinator of a study on an open state directory, as
// both `hpsearch run` and `hpsearch serve` run it: the study's queue, its
// checkpoint store and its backend's executor. It returns the
// coordinator's configuration without OnEvent, and a function that
// releases what it opened.
func wire(ctx context.Context, st *localstate.State, sp *spec.Spec, specDir string, logger *slog.Logger) (coordinator.Config, func(), error) {
	q, err := st.Queue(sp.Name)
	if err != nil {
		return coordinator.Config{}, nil, err
	}
	ckpts, err := openCheckpoints(ctx, sp, st.Dir)
	if err != nil {
		q.Close()
		return coordinator.Config{}, nil, err
	}
	exec, closeExec, err := newExecutor(ctx, sp, ckpts, logger)
	if err != nil {
		q.Close()
		return coordinator.Config{}, nil, err
	}
	pw, err := newPool(ctx, st, sp, ckpts, logger)
	if err != nil {
		closeExec()
		q.Close()
		return coordinator.Config{}, nil, err
	}
	cfg := coordinator.Config{
		Spec:        sp,
		SpecDir:     specDir,
		Store:       st.Store,
		Queue:       q,
		Executor:    exec,
		Checkpoints: ckpts,
		Pool:        pw.exec,
		PoolUsage:   pw.usage,
		LogDir:      st.LogDir,
		Logger:      logger,
		MaxAttempts: queueConfig.MaxAttempts,
	}
	return cfg, func() {
		pw.close()
		closeExec()
		q.Close()
	}, nil
}

// openCheckpoints opens the study's checkpoint store: the space file's
// checkpoint.store, or the checkpoints folder of the state directory.
func openCheckpoints(ctx context.Context, sp *spec.Spec, stateDir string) (*checkpoint.Store, error) {
	uri := sp.Checkpoint.Store
	if uri == "" {
		abs, err := filepath.Abs(filepath.Join(stateDir, "checkpoints"))
		if err != nil {
			return nil, err
		}
		uri = "file://" + abs
	}
	b, err := bloburl.Open(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("open the checkpoint store %s (checkpoint.store): %w", uri, err)
	}
	return checkpoint.New(b), nil
}
