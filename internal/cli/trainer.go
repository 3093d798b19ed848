package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/functions/trainer"
)

// newTrainerCmd is the trainer process the local executor starts: a
// SegmentRequest in on stdin, a SegmentResult out on stdout.
func newTrainerCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "trainer",
		Short:  "Run one segment: a SegmentRequest as JSON on stdin, the SegmentResult on stdout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return trainer.ServeStdio(ctx, g.stdin, g.stdout)
		},
	}
}
