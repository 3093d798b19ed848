package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
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
by default the state directory's checkpoints folder).

On a terminal it shows live progress; otherwise it prints a line per event;
with --json it prints one JSON event per line. At the end it prints the best
trial and a summary with the cost.

Ctrl-C stops cleanly: running trials are asked to checkpoint and are
recorded as interrupted. Running the same command again resumes the study
where it stopped, also after a crash: completed trials are not run again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.run(cmd.Context(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON lines")
	return cmd
}

func (g *globals) run(ctx context.Context, path string, asJSON bool) error {
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
	q, err := st.Queue(sp.Name)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	defer q.Close()
	ckpts, err := openCheckpoints(ctx, sp, st.Dir)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	logger := newLogger(g.stderr)
	exec, closeExec, err := newExecutor(ctx, sp, ckpts, logger)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	defer closeExec()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()

	view := newView(g.stdout, sp, asJSON)
	defer view.close()
	res, err := coordinator.Run(ctx, coordinator.Config{
		Spec:        sp,
		SpecDir:     specDir,
		Store:       st.Store,
		Queue:       q,
		Executor:    exec,
		Checkpoints: ckpts,
		LogDir:      st.LogDir,
		Logger:      logger,
		OnEvent:     view.event,
		MaxAttempts: queueConfig.MaxAttempts,
	})
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
	switch res.Study.State {
	case hptype.StudyStopped:
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("study %q stopped; run the same command again to resume it", sp.Name)}
	case hptype.StudyFailed:
		return &exitError{code: ExitFailed, err: fmt.Errorf("study %q failed: %s; see the trial logs in %s", sp.Name, res.Reason, filepath.Join(st.LogDir, sp.Name))}
	case hptype.StudyBudgetExhausted:
		if res.Progress.Best == nil {
			return &exitError{code: ExitFailed, err: fmt.Errorf("study %q spent its budget with no completed trial", sp.Name)}
		}
	}
	return nil
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
