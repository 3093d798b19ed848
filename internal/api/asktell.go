package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// lockedStudy reads a study under its lock, taken once the study is known
// and then read again, so that what it returns is current; the caller
// releases the lock with the returned function. On an error nothing is
// held.
func (s *Server) lockedStudy(ctx context.Context, idOrName string) (*hptype.Study, *spec.Spec, func(), error) {
	st, _, err := s.loadStudy(ctx, idOrName)
	if err != nil {
		return nil, nil, nil, err
	}
	lock := s.studyLock(st.ID)
	lock.Lock()
	st, sp, err := s.loadStudy(ctx, st.ID)
	if err != nil {
		lock.Unlock()
		return nil, nil, nil, err
	}
	return st, sp, lock.Unlock, nil
}

// askTellStudy reads an ask/tell study under its lock, which the caller
// must release with the returned function.
func (s *Server) askTellStudy(ctx context.Context, idOrName string) (*hptype.Study, *spec.Spec, func(), error) {
	st, sp, unlock, err := s.lockedStudy(ctx, idOrName)
	if err != nil {
		return nil, nil, nil, err
	}
	if modeOf(sp) != client.ModeAskTell {
		unlock()
		return nil, nil, nil, errorf(http.StatusConflict, client.CodeWrongMode, "study %q runs its own trainer; ask and tell are for studies created with mode=ask_tell", st.Name)
	}
	return st, sp, unlock, nil
}

// ask samples the next trial of an ask/tell study with the study's sampler
// and records it as running.
func (s *Server) ask(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	st, sp, unlock, err := s.askTellStudy(ctx, r.PathValue("study"))
	if err != nil {
		return err
	}
	defer unlock()
	switch st.State {
	case hptype.StudyRunning:
	case hptype.StudyCancelled:
		return errorf(http.StatusConflict, client.CodeCancelled, "study %q was cancelled", st.Name)
	case hptype.StudyCompleted, hptype.StudyFailed:
		return errorf(http.StatusConflict, client.CodeFinished, "study %q has finished (%s); resume it with a higher max_trials for more trials", st.Name, st.State)
	default:
		return errorf(http.StatusConflict, client.CodeNotRunning, "study %q is %s; POST /v1/studies/%s/resume to ask for more trials", st.Name, st.State, st.Name)
	}
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	n := len(trials)
	if n >= sp.MaxTrials {
		return errorf(http.StatusConflict, client.CodeMaxTrials, "study %q has all its %d trials (max_trials); resume it with a higher max_trials for more", st.Name, sp.MaxTrials)
	}
	sampler, err := search.New(sp)
	if err != nil {
		return fmt.Errorf("sampler of study %q: %w", st.Name, err)
	}
	history := make([]hptype.Trial, n)
	for i, t := range trials {
		history[i] = *t
	}
	params, err := sampler.Sample(ctx, n, history)
	if errors.Is(err, search.ErrExhausted) {
		if err := s.completeIfDone(ctx, st, sp, trials, true); err != nil {
			return err
		}
		return errorf(http.StatusConflict, client.CodeExhausted, "study %q has tried every point of its space (%d trials)", st.Name, n)
	}
	if err != nil {
		return fmt.Errorf("sample trial %d of study %q: %w", n, st.Name, err)
	}
	t := &hptype.Trial{Study: st.ID, Number: n, Params: params, State: hptype.TrialRunning, CreatedAt: time.Now().UTC()}
	if err := s.cfg.Store.CreateTrial(ctx, t); err != nil {
		return fmt.Errorf("create trial %d of study %q: %w", n, st.Name, err)
	}
	if err := s.publishTrial(ctx, client.EventTrialStarted, st, sp, t, ""); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, t)
	return nil
}

// tell records a report on a running trial of an ask/tell study:
// intermediate metrics, or its end.
func (s *Server) tell(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	n, err := pathNumber(r)
	if err != nil {
		return err
	}
	var rep client.Report
	if err := decodeJSON(r, &rep); err != nil {
		return err
	}
	if err := checkReport(rep); err != nil {
		return err
	}
	st, sp, unlock, err := s.askTellStudy(ctx, r.PathValue("study"))
	if err != nil {
		return err
	}
	defer unlock()
	t, err := s.cfg.Store.GetTrial(ctx, st.ID, n)
	if errors.Is(err, hptype.ErrNotFound) {
		return errorf(http.StatusNotFound, client.CodeNotFound, "study %q has no trial %d; POST /v1/studies/%s/ask creates trials", st.Name, n, st.Name)
	}
	if err != nil {
		return fmt.Errorf("read trial %d of study %q: %w", n, st.Name, err)
	}
	if t.State != hptype.TrialRunning {
		return errorf(http.StatusConflict, client.CodeFinished, "trial %d of study %q is %s; only a running trial takes reports", n, st.Name, t.State)
	}
	t.Metrics = append(t.Metrics, rep.Metrics...)
	for _, m := range rep.Metrics {
		t.Resource = max(t.Resource, m.Step)
	}
	kind := client.EventTrialReported
	switch rep.State {
	case hptype.TrialCompleted:
		v, ok := objectiveValue(rep, t.Metrics, sp.Objective.Metric)
		if !ok {
			return invalid("value", "trial %d has no value: give value, or report the objective's metric %q", n, sp.Objective.Metric)
		}
		t.State, t.Value, t.FinishedAt = hptype.TrialCompleted, &v, time.Now().UTC()
		kind = client.EventTrialCompleted
	case hptype.TrialFailed:
		t.State, t.Error, t.FinishedAt = hptype.TrialFailed, rep.Error, time.Now().UTC()
		if t.Error == "" {
			t.Error = "the client reported the trial failed"
		}
		kind = client.EventTrialFailed
	}
	if err := s.cfg.Store.UpdateTrial(ctx, t); err != nil {
		if errors.Is(err, hptype.ErrConflict) {
			return errorf(http.StatusConflict, client.CodeConflict, "trial %d of study %q changed meanwhile; read it and report again", n, st.Name)
		}
		return fmt.Errorf("record trial %d of study %q: %w", n, st.Name, err)
	}
	if err := s.publishTrial(ctx, kind, st, sp, t, t.Error); err != nil {
		return err
	}
	if t.State.Finished() {
		trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
		if err != nil {
			return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
		}
		if err := s.completeIfDone(ctx, st, sp, trials, false); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// checkReport refuses a report that does not make sense, naming the field.
func checkReport(rep client.Report) error {
	switch rep.State {
	case "", hptype.TrialCompleted, hptype.TrialFailed:
	default:
		return invalid("state", "state %q is not completed or failed (leave it out for an intermediate report)", rep.State)
	}
	for i, m := range rep.Metrics {
		if m.Name == "" {
			return invalid(fmt.Sprintf("metrics[%d].name", i), "metric %d has no name", i)
		}
	}
	if rep.Value != nil && rep.State != hptype.TrialCompleted {
		return invalid("value", `value is the final value of a completed trial: add "state": "completed", or report it in metrics`)
	}
	if rep.Error != "" && rep.State != hptype.TrialFailed {
		return invalid("error", `error says why a trial failed: add "state": "failed"`)
	}
	return nil
}

// objectiveValue is a completed trial's value: the report's, or the newest
// value of the objective's metric.
func objectiveValue(rep client.Report, metrics []hptype.Metric, name string) (float64, bool) {
	if rep.Value != nil {
		return *rep.Value, true
	}
	for i := len(metrics) - 1; i >= 0; i-- {
		if metrics[i].Name == name && !math.IsNaN(metrics[i].Value) {
			return metrics[i].Value, true
		}
	}
	return 0, false
}

// completeIfDone ends an ask/tell study whose trials have all finished,
// when it has max_trials of them or its sampler is exhausted: completed if
// any trial completed, else failed.
func (s *Server) completeIfDone(ctx context.Context, st *hptype.Study, sp *spec.Spec, trials []*hptype.Trial, exhausted bool) error {
	if len(trials) < sp.MaxTrials && !exhausted {
		return nil
	}
	p := coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials)
	for _, t := range trials {
		if !t.State.Finished() {
			return nil
		}
	}
	state := hptype.StudyCompleted
	if p.Completed == 0 {
		state = hptype.StudyFailed
	}
	ended, err := s.setStudyState(ctx, st.ID, state, hptype.StudyRunning)
	if err != nil {
		return fmt.Errorf("record study %q as %s: %w", st.Name, state, err)
	}
	if ended.State != state {
		// Stopped meanwhile: it ends when resumed.
		return nil
	}
	return s.publishStudy(ctx, client.EventStudyFinished, ended, sp, "")
}

// publishTrial publishes an event about a trial of an ask/tell study, with
// the metrics reported since its previous event.
func (s *Server) publishTrial(ctx context.Context, kind client.EventKind, st *hptype.Study, sp *spec.Spec, t *hptype.Trial, msg string) error {
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	p := coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials)
	p.Best = summaryOf(p.Best)
	metrics := s.eventLog(st.ID).newMetrics(t.Number, t.Metrics)
	s.publish(client.Event{Time: time.Now().UTC(), Kind: kind, Study: st.Name, StudyID: st.ID, State: st.State,
		Trial: summaryOf(t), Metrics: metrics, Message: msg, Progress: progressOf(p)})
	return nil
}
