package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/dashboard"
)

func newReportCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report STUDY -o FILE",
		Short: "Write a study's dashboard as one self-contained HTML file",
		Long: `Write a study's trials table and plots as one HTML file: the optimization
history, the parameters against the objective (parallel coordinates), the
learning curves with the scheduler's decisions, and the cost breakdown.
The file needs nothing else: its style, script and data are inside it, and
it loads nothing from the network. Open it in a browser, attach it to an
issue, keep it with the model.

It reads the study from the state directory, or from the server of
--server (with the token in $HPSEARCH_TOKEN).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError(errors.New("report: -o FILE is required: where to write the report"))
			}
			data, err := g.reportData(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := writeReport(out, data); err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			fmt.Fprintf(g.stdout, "wrote %s: study %s, %d trials\n", out, data.Study.Name, len(data.Trials))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the HTML file to write (required)")
	return cmd
}

// reportData reads a study and its trials from --server, or from the state
// directory.
func (g *globals) reportData(ctx context.Context, name string) (dashboard.ReportData, error) {
	if g.server != "" {
		r, err := g.remote()
		if err != nil {
			return dashboard.ReportData{}, err
		}
		st, err := r.c.GetStudy(ctx, name)
		if err != nil {
			return dashboard.ReportData{}, r.fail(err)
		}
		trials, err := r.c.AllTrials(ctx, st.ID, client.TrialQuery{})
		if err != nil {
			return dashboard.ReportData{}, r.fail(err)
		}
		return dashboard.ReportData{Study: st, Trials: trials, GeneratedAt: time.Now().UTC()}, nil
	}
	var data dashboard.ReportData
	err := g.withState(func(v *stateView) error {
		in, err := v.study(ctx, name)
		if err != nil {
			return err
		}
		data = dashboard.ReportData{Study: api.Describe(in.Study, in.Spec, in.Trials), Trials: in.Trials, GeneratedAt: time.Now().UTC()}
		return nil
	})
	return data, err
}

// writeReport writes the report to a file next to path and renames it into
// place, so that path never holds half a report.
func writeReport(path string, data dashboard.ReportData) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := dashboard.Report(f, data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
