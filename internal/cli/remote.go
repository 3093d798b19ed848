package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// remoteSource reads studies from an hpsearch server.
type remoteSource struct {
	c      *client.Client
	server string
}

// remote returns the source of --server, with the token of HPSEARCH_TOKEN.
func (g *globals) remote() (*remoteSource, error) {
	c, err := client.New(g.server, client.WithToken(os.Getenv("HPSEARCH_TOKEN")))
	if err != nil {
		return nil, usageError(fmt.Errorf("--server: %w", err))
	}
	return &remoteSource{c: c, server: g.server}, nil
}

func (r *remoteSource) studies(ctx context.Context) ([]*studyInfo, error) {
	list, err := r.c.ListStudies(ctx)
	if err != nil {
		return nil, r.fail(err)
	}
	infos := make([]*studyInfo, 0, len(list))
	for _, s := range list {
		info, err := infoOf(s)
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (r *remoteSource) study(ctx context.Context, name string) (*studyInfo, error) {
	s, err := r.c.GetStudy(ctx, name)
	if err != nil {
		return nil, r.fail(err)
	}
	info, err := infoOf(s)
	if err != nil {
		return nil, err
	}
	if info.Trials, err = r.c.AllTrials(ctx, name, client.TrialQuery{}); err != nil {
		return nil, r.fail(err)
	}
	return info, nil
}

// infoOf is a study from a server in the form the CLI prints.
func infoOf(s *client.Study) (*studyInfo, error) {
	sp, err := spec.Decode(s.Name+".yaml (from the server)", []byte(s.Spec))
	if err != nil {
		return nil, &exitError{code: ExitFailed, err: fmt.Errorf("decode the space of study %q: %w", s.Name, err)}
	}
	st := &hptype.Study{
		ID: s.ID, Name: s.Name, Spec: []byte(s.Spec), SearchFingerprint: s.SearchFingerprint, State: s.State,
		Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, ElapsedSeconds: s.ElapsedSeconds,
	}
	return &studyInfo{Study: st, Spec: sp, Progress: coordinatorProgress(s.Progress)}, nil
}

func coordinatorProgress(p client.Progress) coordinator.Progress {
	return coordinator.Progress{
		MaxTrials: p.MaxTrials, Created: p.Created, Queued: p.Queued, Running: p.Running,
		Completed: p.Completed, Failed: p.Failed, Interrupted: p.Interrupted,
		CostUSD: p.CostUSD, WastedCostUSD: p.WastedCostUSD, ElapsedSeconds: p.ElapsedSeconds,
		Throttles: p.Throttles, BilledMS: p.BilledMS, EstimatedMS: p.EstimatedMS, Best: p.Best,
	}
}

// fail gives a server's error the exit code and words of the local
// commands: problems in a space file are printed as file:line:col.
func (r *remoteSource) fail(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return &exitError{code: ExitFailed, err: fmt.Errorf("cannot reach the server at %s: %w", r.server, err)}
	}
	switch {
	case ce.Code == client.CodeInvalidSpace && len(ce.Problems) > 0:
		errs := make(spec.Errors, len(ce.Problems))
		for i, p := range ce.Problems {
			errs[i] = &spec.Error{File: p.File, Line: p.Line, Col: p.Column, Msg: p.Message}
		}
		return usageError(errs)
	case errors.Is(err, client.ErrUnauthorized):
		return &exitError{code: ExitFailed, err: fmt.Errorf("the server at %s refused the request: %w; set HPSEARCH_TOKEN to a token it accepts", r.server, err)}
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrInvalid):
		return usageError(err)
	}
	return &exitError{code: ExitFailed, err: err}
}

// runRemote runs a study on the server of --server: it creates the study,
// or resumes it, or follows it if it runs already, and shows its events
// until it ends. Ctrl-C stops it on the server.
func (g *globals) runRemote(ctx context.Context, path string, asJSON bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return usageError(err)
	}
	r, err := g.remote()
	if err != nil {
		return err
	}
	st, err := r.start(ctx, path, data)
	if err != nil {
		return err
	}
	info, err := infoOf(st)
	if err != nil {
		return err
	}
	sp := info.Spec

	finished := make(chan struct{})
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer close(finished)
	go func() {
		select {
		case <-finished:
			return
		case <-sigCtx.Done():
		}
		// A second signal ends the process at once.
		stop()
		select {
		case <-finished:
		default:
			if _, err := r.c.StopStudy(context.WithoutCancel(ctx), st.ID); err != nil {
				fmt.Fprintf(g.stderr, "hpsearch: stop study %q on the server: %v\n", st.Name, err)
			}
		}
	}()

	view := newView(g.stdout, sp, asJSON)
	defer view.close()
	var reason string
	err = r.c.Follow(ctx, st.ID, st.LastEventID, func(e *client.Event) error {
		if e.Kind == client.EventStudyFinished {
			reason = e.Message
		}
		view.event(coordinator.Event{Time: e.Time, Kind: coordinator.EventKind(e.Kind), Study: e.Study, Trial: e.Trial, Message: e.Message, Progress: coordinatorProgress(e.Progress)})
		return nil
	})
	if err != nil {
		return r.fail(err)
	}
	view.close()
	end, err := r.study(ctx, st.ID)
	if err != nil {
		return err
	}
	if !asJSON {
		printSummary(g.stdout, sp, &coordinator.Result{Study: end.Study, Trials: end.Trials, Progress: end.Progress, Reason: reason}, st.LogDir)
	}
	return runExit(st.Name, end.Study.State, reason, end.Progress.Best != nil, st.LogDir+"/"+st.Name+" on the server")
}

// start creates the study of a space file on the server, or resumes it
// with the file if it exists, or returns it if it runs already.
func (r *remoteSource) start(ctx context.Context, path string, data []byte) (*client.Study, error) {
	st, err := r.c.CreateStudy(ctx, data, &client.CreateOptions{Filename: path})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeExists {
		if err != nil {
			return nil, r.fail(err)
		}
		return st, nil
	}
	sp, err := spec.Decode(path, data)
	if err != nil {
		return nil, usageError(err)
	}
	st, err = r.c.ResumeStudy(ctx, sp.Name, data, path)
	if errors.As(err, &ce) && ce.Code == client.CodeRunning {
		st, err = r.c.GetStudy(ctx, sp.Name)
	}
	if err != nil {
		return nil, r.fail(err)
	}
	return st, nil
}
