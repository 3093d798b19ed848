package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func newValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate SPACE.yaml",
		Short: "Check a space file and run nothing",
		Long: `Check a space file: every problem is printed as file:line:col with how to
fix it, and the exit code is 2 if there is any. Nothing is run and the
state directory is not touched.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sp, err := spec.Load(args[0])
			if err != nil {
				return usageError(err)
			}
			if _, err := search.New(sp); err != nil {
				return usageError(fmt.Errorf("%s: %w", args[0], err))
			}
			fmt.Fprintf(g.stdout, "%s: ok: study %q, %d parameters, %d trials, %s sampler\n", args[0], sp.Name, len(sp.Params), sp.MaxTrials, sp.Sampler.Type)
			return nil
		},
	}
}
