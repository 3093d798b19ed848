// Package cli is the hpsearch command line.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Exit codes.
const (
	ExitOK          = 0
	ExitFailed      = 1 // the study failed
	ExitUsage       = 2 // bad usage or bad input
	ExitInterrupted = 130
)

// exitError carries an exit code with the error that caused it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: ExitUsage, err: err} }

// Main runs the command line with the process's arguments and returns the
// exit code.
func Main() int {
	return Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs the command line with args and returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	code := ExitUsage // cobra's own errors are usage errors
	if errors.As(err, &ee) {
		code = ee.code
	}
	var serr spec.Errors
	switch {
	case errors.As(err, &serr):
		for _, e := range serr {
			fmt.Fprintln(stderr, e.Error())
		}
		fmt.Fprintf(stderr, "%d problem(s) found; nothing was run\n", len(serr))
	case code != ExitInterrupted || err.Error() != "":
		fmt.Fprintln(stderr, "hpsearch: "+err.Error())
	}
	return code
}

type globals struct {
	stateDir string
	// server, when set, makes studies, trials, best and run talk to the
	// hpsearch server at that URL.
	server string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "hpsearch",
		Short: "Serverless hyperparameter search",
		Long: `hpsearch runs hyperparameter searches: it expands a space file into trials,
runs them (locally by default), stops at the budget, and reports the best
configuration and what it cost.

State (studies, trials, the job queue and trial logs) lives in the state
directory: --state, else $HPSEARCH_STATE, else ./.hpsearch.

With --server URL (or $HPSEARCH_SERVER), studies, trials, best and run
talk to an hpsearch server (hpsearch serve) instead, with the bearer
token in $HPSEARCH_TOKEN.

Exit codes: 0 success, 1 the study failed, 2 bad usage or bad input,
130 stopped by the user (run the same command again to resume).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("HPSEARCH_STATE")
	if def == "" {
		def = localstate.DefaultDir
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state", def, "state directory (env HPSEARCH_STATE)")
	root.PersistentFlags().StringVar(&g.server, "server", os.Getenv("HPSEARCH_SERVER"), "URL of an hpsearch server for studies, trials, best and run (env HPSEARCH_SERVER; token in HPSEARCH_TOKEN)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		newRunCmd(g),
		newValidateCmd(g),
		newStudiesCmd(g),
		newTrialsCmd(g),
		newBestCmd(g),
		newReportCmd(g),
		newTrainerCmd(g),
		newServeCmd(g),
		newTokenCmd(g),
		newBenchCmd(g),
		newWorkerCmd(g),
	)
	return root
}

// queueConfig is the queue configuration every command opens the state
// with; the coordinator's retry limit matches it.
var queueConfig = queue.Config{MaxAttempts: 3}

func (g *globals) openState() (*localstate.State, error) {
	st, err := localstate.Open(g.stateDir, queueConfig)
	if err != nil {
		return nil, &exitError{code: ExitFailed, err: err}
	}
	return st, nil
}
