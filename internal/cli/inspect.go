package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// withState runs fn on the state directory, which must exist: inspecting
// creates nothing.
func (g *globals) withState(fn func(*stateView) error) error {
	if _, err := os.Stat(filepath.Join(g.stateDir, "state.db")); errors.Is(err, os.ErrNotExist) {
		return &exitError{code: ExitFailed, err: fmt.Errorf("no studies in %s (no state.db); run a study first, or pass --state DIR", g.stateDir)}
	}
	st, err := g.openState()
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(&stateView{st: st.Store})
}

// studySource is where the inspecting commands read studies: the state
// directory, or a server (--server).
type studySource interface {
	// studies returns every study; their Trials may be left out.
	studies(ctx context.Context) ([]*studyInfo, error)
	// study returns one study with its trials.
	study(ctx context.Context, name string) (*studyInfo, error)
}

// withSource runs fn on the server of --server, or on the state directory.
func (g *globals) withSource(fn func(studySource) error) error {
	if g.server != "" {
		r, err := g.remote()
		if err != nil {
			return err
		}
		return fn(r)
	}
	return g.withState(func(v *stateView) error { return fn(v) })
}

type stateView struct {
	st interface {
		GetStudy(context.Context, string) (*hptype.Study, error)
		ListStudies(context.Context) ([]*hptype.Study, error)
		ListTrials(context.Context, string) ([]*hptype.Trial, error)
	}
}

// studyInfo is a study with its decoded spec, trials and progress.
type studyInfo struct {
	Study    *hptype.Study        `json:"study"`
	Spec     *spec.Spec           `json:"-"`
	Trials   []*hptype.Trial      `json:"-"`
	Progress coordinator.Progress `json:"progress"`
}

func (v *stateView) load(ctx context.Context, st *hptype.Study) (*studyInfo, error) {
	sp, err := spec.Decode(st.Name+".yaml (stored)", st.Spec)
	if err != nil {
		return nil, fmt.Errorf("decode the stored space of study %q: %w", st.Name, err)
	}
	trials, err := v.st.ListTrials(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	return &studyInfo{Study: st, Spec: sp, Trials: trials, Progress: coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials)}, nil
}

func (v *stateView) studies(ctx context.Context) ([]*studyInfo, error) {
	list, err := v.st.ListStudies(ctx)
	if err != nil {
		return nil, err
	}
	infos := make([]*studyInfo, 0, len(list))
	for _, st := range list {
		info, err := v.load(ctx, st)
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (v *stateView) study(ctx context.Context, name string) (*studyInfo, error) {
	st, err := v.st.GetStudy(ctx, name)
	if errors.Is(err, hptype.ErrNotFound) {
		return nil, usageError(fmt.Errorf("no study named %q; `hpsearch studies` lists them", name))
	}
	if err != nil {
		return nil, err
	}
	return v.load(ctx, st)
}

func newStudiesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "studies",
		Short: "List the studies in the state directory, or on --server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSource(func(v studySource) error {
				infos, err := v.studies(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, infos)
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STUDY\tSTATE\tTRIALS\tFAILED\tBEST\tCOST\tWALL\tCREATED")
				for _, in := range infos {
					p := in.Progress
					best := "-"
					if p.Best != nil {
						best = fmt.Sprintf("%s=%.4f (#%d)", in.Spec.Objective.Metric, *p.Best.Value, p.Best.Number)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\t$%.6f\t%s\t%s\n", in.Study.Name, in.Study.State, p.Completed, p.MaxTrials, p.Failed, best, p.CostUSD, formatDuration(in.Study.ElapsedSeconds), in.Study.CreatedAt.Local().Format("2006-01-02 15:04"))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTrialsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trials STUDY",
		Short: "List a study's trials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withSource(func(v studySource) error {
				in, err := v.study(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, in.Trials)
				}
				return writeTrials(g.stdout, in.Spec, in.Trials)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newBestCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "best STUDY",
		Short: "Show a study's best trial",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withSource(func(v studySource) error {
				in, err := v.study(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				best := in.Progress.Best
				if best == nil {
					return &exitError{code: ExitFailed, err: fmt.Errorf("study %q has no completed trial yet", in.Study.Name)}
				}
				if asJSON {
					return writeJSON(g.stdout, best)
				}
				fmt.Fprintf(g.stdout, "trial %d: %s = %.6g (%s)\n", best.Number, in.Spec.Objective.Metric, *best.Value, in.Spec.Objective.Goal)
				writeParamList(g.stdout, in.Spec, best.Params)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func formatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
