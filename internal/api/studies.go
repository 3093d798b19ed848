package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// loadStudy reads a study by ID or name, with its space document decoded.
func (s *Server) loadStudy(ctx context.Context, idOrName string) (*hptype.Study, *spec.Spec, error) {
	st, err := s.cfg.Store.GetStudy(ctx, idOrName)
	if errors.Is(err, hptype.ErrNotFound) {
		return nil, nil, errorf(http.StatusNotFound, client.CodeNotFound, "no study named %q; GET /v1/studies lists them", idOrName)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read study %q: %w", idOrName, err)
	}
	sp, err := spec.Decode(st.Name+".yaml (stored)", st.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("decode the stored space of study %q: %w", st.Name, err)
	}
	return st, sp, nil
}

// resource is a study as the API shows it.
func (s *Server) resource(ctx context.Context, st *hptype.Study, sp *spec.Spec) (*client.Study, error) {
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return nil, fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	out := Describe(st, sp, trials)
	out.Active, out.LastEventID = s.live(st, out.Mode), s.eventLog(st.ID).last()
	if s.cfg.LogDir != "" && out.Mode == client.ModeRun {
		out.LogDir = s.cfg.LogDir
	}
	return out, nil
}

// Describe is a stored study in the API's form, from its record, its
// decoded space and its trials, as far as they tell: the fields a serving
// server knows (Active, LastEventID, LogDir) are left empty. hpsearch
// report uses it for studies read from a state directory.
func Describe(st *hptype.Study, sp *spec.Spec, trials []*hptype.Trial) *client.Study {
	p := coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials)
	return &client.Study{
		ID: st.ID, Name: st.Name, Mode: modeOf(sp), State: st.State,
		Objective: client.Objective{Metric: sp.Objective.Metric, Goal: string(sp.Objective.Goal)},
		Sampler:   string(sp.Sampler.Type), Backend: string(sp.Backend.Type),
		Spec: string(st.Spec), SearchFingerprint: st.SearchFingerprint, Version: st.Version,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, ElapsedSeconds: st.ElapsedSeconds,
		Progress: progressOf(p), Cost: costOf(sp, trials),
	}
}

// costOf breaks a study's cost down by trial state and attempt status.
func costOf(sp *spec.Spec, trials []*hptype.Trial) client.Cost {
	c := client.Cost{
		Backend: string(sp.Backend.Type), MemoryMB: sp.Backend.MemoryMB, USDPerSecond: sp.Backend.RatePerSecond(),
		ByTrialState: map[string]float64{}, ByAttemptStatus: map[string]float64{},
	}
	for _, t := range trials {
		for _, a := range t.Attempts {
			c.TotalUSD += a.CostUSD
			c.WastedUSD += a.WastedCostUSD
			c.ByTrialState[string(t.State)] += a.CostUSD
			c.ByAttemptStatus[a.Status] += a.CostUSD
		}
	}
	return c
}

func (s *Server) writeStudy(w http.ResponseWriter, r *http.Request, status int, st *hptype.Study, sp *spec.Spec) error {
	res, err := s.resource(r.Context(), st, sp)
	if err != nil {
		return err
	}
	writeJSON(w, status, res)
	return nil
}

func (s *Server) listStudies(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Store.ListStudies(r.Context())
	if err != nil {
		return fmt.Errorf("list studies: %w", err)
	}
	out := struct {
		Studies []*client.Study `json:"studies"`
	}{Studies: []*client.Study{}}
	for _, st := range list {
		sp, err := spec.Decode(st.Name+".yaml (stored)", st.Spec)
		if err != nil {
			return fmt.Errorf("decode the stored space of study %q: %w", st.Name, err)
		}
		res, err := s.resource(r.Context(), st, sp)
		if err != nil {
			return err
		}
		out.Studies = append(out.Studies, res)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getStudy(w http.ResponseWriter, r *http.Request) error {
	st, sp, err := s.loadStudy(r.Context(), r.PathValue("study"))
	if err != nil {
		return err
	}
	return s.writeStudy(w, r, http.StatusOK, st, sp)
}

// createParams reads the query parameters of a create request.
func createParams(q url.Values) (mode client.Mode, start bool, filename string, err error) {
	mode = client.Mode(q.Get("mode"))
	switch mode {
	case "":
		mode = client.ModeRun
	case client.ModeRun, client.ModeAskTell:
	default:
		return "", false, "", invalid("mode", "mode %q is not run or ask_tell", mode)
	}
	start = true
	switch q.Get("start") {
	case "", "true":
	case "false":
		start = false
	default:
		return "", false, "", invalid("start", "start %q is not true or false", q.Get("start"))
	}
	return mode, start, spaceName(q), nil
}

// spaceName is the name problems give a space document: the filename
// parameter, or space.yaml.
func spaceName(q url.Values) string {
	if f := q.Get("filename"); f != "" {
		return f
	}
	return "space.yaml"
}

// createStudy creates a study from the space document in the body and,
// unless start=false, starts it.
func (s *Server) createStudy(w http.ResponseWriter, r *http.Request) error {
	mode, start, filename, err := createParams(r.URL.Query())
	if err != nil {
		return err
	}
	doc, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return invalid("body", "the request body is empty; send a space document (YAML or JSON)")
	}
	sp, err := s.decodeSpace(filename, doc, mode)
	if err != nil {
		return asSpaceError(err)
	}
	encoded, err := spec.Encode(sp)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	st := &hptype.Study{ID: uuid.NewString(), Name: sp.Name, Spec: encoded, SearchFingerprint: sp.SearchFingerprint(),
		State: hptype.StudyStopped, CreatedAt: now, UpdatedAt: now}
	if start {
		st.State = hptype.StudyRunning
	}
	if s.shuttingDown() {
		return errShuttingDown()
	}
	var cfg coordinator.Config
	release := func() {}
	if start && mode == client.ModeRun {
		if cfg, release, err = s.cfg.Wire(context.WithoutCancel(r.Context()), sp); err != nil {
			return invalid("space", "prepare the study's backend: %v", err)
		}
	}
	ctx := r.Context()
	if err := s.cfg.Store.CreateStudy(ctx, st); err != nil {
		release()
		if errors.Is(err, hptype.ErrExists) {
			return errorf(http.StatusConflict, client.CodeExists, "a study named %q exists; resume it with POST /v1/studies/%s/resume, or give the new one another name", st.Name, st.Name)
		}
		return fmt.Errorf("create study %q: %w", st.Name, err)
	}
	last := s.eventLog(st.ID).last()
	if start {
		if mode == client.ModeAskTell {
			if err := s.publishStudy(ctx, client.EventStudyStarted, st, sp, ""); err != nil {
				return err
			}
		} else if err := s.startRun(st, sp, cfg, release); err != nil {
			if _, serr := s.setStudyState(ctx, st.ID, hptype.StudyStopped, ""); serr != nil {
				s.cfg.Logger.Error("record a study that did not start as stopped", "study", st.Name, "error", serr)
			}
			return err
		}
	}
	res, err := s.resource(ctx, st, sp)
	if err != nil {
		return err
	}
	res.LastEventID = last
	w.Header().Set("Location", "/v1/studies/"+url.PathEscape(st.Name))
	writeJSON(w, http.StatusCreated, res)
	return nil
}

// asSpaceError turns the problems of a space document into its 400.
func asSpaceError(err error) error {
	var errs spec.Errors
	if errors.As(err, &errs) {
		return spaceError(errs)
	}
	return err
}

// publishStudy publishes a study event with the study's progress.
func (s *Server) publishStudy(ctx context.Context, kind client.EventKind, st *hptype.Study, sp *spec.Spec, msg string) error {
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	p := coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials)
	p.Best = summaryOf(p.Best)
	s.publish(client.Event{Time: time.Now().UTC(), Kind: kind, Study: st.Name, StudyID: st.ID, State: st.State, Message: msg, Progress: progressOf(p)})
	return nil
}

// summaryOf copies a trial for an event, without its metric history.
func summaryOf(t *hptype.Trial) *hptype.Trial {
	if t == nil {
		return nil
	}
	cp := *t
	cp.Metrics = nil
	return &cp
}

// await waits for a stopped run to be recorded, up to StopWait.
func (s *Server) await(ctx context.Context, r *run) {
	t := time.NewTimer(s.cfg.StopWait)
	defer t.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// stopStudy stops a running study: its running trials are asked to
// checkpoint and recorded as interrupted, and it is recorded stopped.
func (s *Server) stopStudy(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	st, sp, unlock, err := s.lockedStudy(ctx, r.PathValue("study"))
	if err != nil {
		return err
	}
	if modeOf(sp) == client.ModeAskTell {
		defer unlock()
		if st.State != hptype.StudyRunning {
			return errorf(http.StatusConflict, client.CodeNotRunning, "study %q is not running (it is %s)", st.Name, st.State)
		}
		name := st.Name
		if st, err = s.setStudyState(ctx, st.ID, hptype.StudyStopped, ""); err != nil {
			return fmt.Errorf("stop study %q: %w", name, err)
		}
		if err := s.publishStudy(ctx, client.EventStudyFinished, st, sp, errStopped.Error()); err != nil {
			return err
		}
		return s.writeStudy(w, r, http.StatusOK, st, sp)
	}
	rn := s.active(st.ID)
	if rn == nil {
		unlock()
		return errorf(http.StatusConflict, client.CodeNotRunning, "study %q is not running (it is %s); POST /v1/studies/%s/resume runs it", st.Name, st.State, st.Name)
	}
	rn.cancel(errStopped)
	unlock()
	return s.afterStop(w, r, rn, st.ID)
}

// afterStop waits for a stopped run and answers with the study: 200 once
// it is recorded, 202 if it is still stopping.
func (s *Server) afterStop(w http.ResponseWriter, r *http.Request, rn *run, id string) error {
	s.await(r.Context(), rn)
	st, sp, err := s.loadStudy(r.Context(), id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if s.active(id) != nil {
		status = http.StatusAccepted
	}
	return s.writeStudy(w, r, status, st, sp)
}

// cancelStudy stops a study for good.
func (s *Server) cancelStudy(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	st, sp, unlock, err := s.lockedStudy(ctx, r.PathValue("study"))
	if err != nil {
		return err
	}
	switch st.State {
	case hptype.StudyCancelled:
		unlock()
		return s.writeStudy(w, r, http.StatusOK, st, sp)
	case hptype.StudyCompleted, hptype.StudyFailed:
		unlock()
		return errorf(http.StatusConflict, client.CodeFinished, "study %q has finished (%s); there is nothing to cancel", st.Name, st.State)
	}
	if rn := s.active(st.ID); rn != nil {
		rn.cancelled.Store(true)
		rn.cancel(errCancelled)
		unlock()
		s.await(ctx, rn)
		select {
		case <-rn.done:
			// Recorded cancelled, unless the run ended on its own first:
			// then it is cancelled here if it can be.
			lock := s.studyLock(st.ID)
			lock.Lock()
			defer lock.Unlock()
			return s.cancelIdle(w, r, st.ID)
		default:
			return s.afterStop(w, r, rn, st.ID)
		}
	}
	defer unlock()
	return s.cancelIdle(w, r, st.ID)
}

// cancelIdle cancels a study no coordinator runs: its trials left running
// are recorded interrupted. The caller holds the study's lock.
func (s *Server) cancelIdle(w http.ResponseWriter, r *http.Request, id string) error {
	ctx := r.Context()
	st, sp, err := s.loadStudy(ctx, id)
	if err != nil {
		return err
	}
	if st.State == hptype.StudyCancelled || st.State == hptype.StudyCompleted || st.State == hptype.StudyFailed {
		return s.writeStudy(w, r, http.StatusOK, st, sp)
	}
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	for _, t := range trials {
		if t.State != hptype.TrialRunning {
			continue
		}
		t.State, t.LeaseToken, t.Error = hptype.TrialInterrupted, "", errCancelled.Error()
		if err := s.cfg.Store.UpdateTrial(ctx, t); err != nil {
			return fmt.Errorf("interrupt trial %d of study %q: %w", t.Number, st.Name, err)
		}
	}
	name := st.Name
	if st, err = s.setStudyState(ctx, st.ID, hptype.StudyCancelled, ""); err != nil {
		return fmt.Errorf("cancel study %q: %w", name, err)
	}
	if err := s.publishStudy(ctx, client.EventStudyFinished, st, sp, errCancelled.Error()); err != nil {
		return err
	}
	return s.writeStudy(w, r, http.StatusOK, st, sp)
}

// resumeStudy starts a stopped study again, with the space document in
// the body if there is one.
func (s *Server) resumeStudy(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	doc, err := readBody(r)
	if err != nil {
		return err
	}
	if s.shuttingDown() {
		return errShuttingDown()
	}
	st, sp, unlock, err := s.lockedStudy(ctx, r.PathValue("study"))
	if err != nil {
		return err
	}
	defer unlock()
	if st.State == hptype.StudyCancelled {
		return errorf(http.StatusConflict, client.CodeCancelled, "study %q was cancelled and does not resume; create a study with another name", st.Name)
	}
	if rn := s.active(st.ID); rn != nil {
		if !rn.finishing.Load() {
			return errorf(http.StatusConflict, client.CodeRunning, "study %q is running already", st.Name)
		}
		<-rn.done
	}
	mode := modeOf(sp)
	if mode == client.ModeAskTell && st.State == hptype.StudyRunning {
		return errorf(http.StatusConflict, client.CodeRunning, "study %q is running already", st.Name)
	}
	if len(bytes.TrimSpace(doc)) > 0 {
		if sp, err = s.replacement(st, doc, spaceName(r.URL.Query()), mode); err != nil {
			return err
		}
	}
	encoded, err := spec.Encode(sp)
	if err != nil {
		return err
	}
	var cfg coordinator.Config
	release := func() {}
	if mode == client.ModeRun {
		if cfg, release, err = s.cfg.Wire(context.WithoutCancel(ctx), sp); err != nil {
			return invalid("space", "prepare the study's backend: %v", err)
		}
	}
	st.Spec, st.State, st.UpdatedAt = encoded, hptype.StudyRunning, time.Now().UTC()
	if err := s.cfg.Store.UpdateStudy(ctx, st); err != nil {
		release()
		if errors.Is(err, hptype.ErrConflict) {
			return errorf(http.StatusConflict, client.CodeConflict, "study %q changed while it was resumed; try again", st.Name)
		}
		return fmt.Errorf("resume study %q: %w", st.Name, err)
	}
	last := s.eventLog(st.ID).last()
	if mode == client.ModeAskTell {
		if err := s.resumeAskTell(ctx, st, sp); err != nil {
			return err
		}
	} else if err := s.startRun(st, sp, cfg, release); err != nil {
		if _, serr := s.setStudyState(ctx, st.ID, hptype.StudyStopped, ""); serr != nil {
			s.cfg.Logger.Error("record a study that did not start as stopped", "study", st.Name, "error", serr)
		}
		return err
	}
	if st, sp, err = s.loadStudy(ctx, st.ID); err != nil {
		return err
	}
	res, err := s.resource(ctx, st, sp)
	if err != nil {
		return err
	}
	res.LastEventID = last
	writeJSON(w, http.StatusOK, res)
	return nil
}

// resumeAskTell announces a resumed ask/tell study, and ends it at once if
// its trials were all told while it was stopped.
func (s *Server) resumeAskTell(ctx context.Context, st *hptype.Study, sp *spec.Spec) error {
	if err := s.publishStudy(ctx, client.EventStudyStarted, st, sp, ""); err != nil {
		return err
	}
	trials, err := s.cfg.Store.ListTrials(ctx, st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	return s.completeIfDone(ctx, st, sp, trials, false)
}

// replacement decodes the space document a study resumes with: the same
// study, the same search.
func (s *Server) replacement(st *hptype.Study, doc []byte, filename string, mode client.Mode) (*spec.Spec, error) {
	sp, err := s.decodeSpace(filename, doc, mode)
	if err != nil {
		return nil, asSpaceError(err)
	}
	if sp.Name != st.Name {
		line, col := valuePos(rootMapping(doc), "name")
		return nil, spaceError(spec.Errors{{File: filename, Line: line, Col: col, Msg: fmt.Sprintf("name %q is not the study's name %q; a study resumes only with its own name", sp.Name, st.Name)}})
	}
	if sp.SearchFingerprint() != st.SearchFingerprint {
		return nil, errorf(http.StatusConflict, client.CodeSearchChanged, "study %q: the document's search (space, sampler, objective or trainer) differs from the study's; only max_trials, max_concurrency, budget, backend and checkpoint may change", st.Name)
	}
	return sp, nil
}
