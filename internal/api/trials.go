package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// trialStates are the states the state filter accepts.
var trialStates = []hptype.TrialState{hptype.TrialQueued, hptype.TrialRunning, hptype.TrialCompleted, hptype.TrialFailed, hptype.TrialPruned, hptype.TrialInterrupted}

// trialQuery is a parsed trial listing request.
type trialQuery struct {
	states        []hptype.TrialState
	byValue       bool
	noMetrics     bool
	offset, limit int
}

func parseTrialQuery(q url.Values) (trialQuery, error) {
	tq := trialQuery{limit: 100}
	for _, v := range q["state"] {
		for _, name := range strings.Split(v, ",") {
			st := hptype.TrialState(strings.TrimSpace(name))
			if !slices.Contains(trialStates, st) {
				return tq, invalid("state", "state %q is not a trial state; use %s", st, joinStates())
			}
			tq.states = append(tq.states, st)
		}
	}
	switch q.Get("sort") {
	case "", "number":
	case "value":
		tq.byValue = true
	default:
		return tq, invalid("sort", "sort %q is not number or value", q.Get("sort"))
	}
	switch q.Get("metrics") {
	case "", "true":
	case "false":
		tq.noMetrics = true
	default:
		return tq, invalid("metrics", "metrics %q is not true or false", q.Get("metrics"))
	}
	var err error
	if tq.offset, err = intParam(q, "offset", 0, 0, 1<<31-1); err != nil {
		return tq, err
	}
	if tq.limit, err = intParam(q, "limit", 100, 1, 1000); err != nil {
		return tq, err
	}
	return tq, nil
}

func joinStates() string {
	names := make([]string, len(trialStates))
	for i, s := range trialStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, "%s %q must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// listTrials returns a page of a study's trials: filtered by state, in
// number order or best value first, with or without their metric history.
func (s *Server) listTrials(w http.ResponseWriter, r *http.Request) error {
	tq, err := parseTrialQuery(r.URL.Query())
	if err != nil {
		return err
	}
	st, sp, err := s.loadStudy(r.Context(), r.PathValue("study"))
	if err != nil {
		return err
	}
	trials, err := s.cfg.Store.ListTrials(r.Context(), st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	if len(tq.states) > 0 {
		trials = slices.DeleteFunc(trials, func(t *hptype.Trial) bool { return !slices.Contains(tq.states, t.State) })
	}
	if tq.byValue {
		slices.SortStableFunc(trials, func(a, b *hptype.Trial) int {
			switch {
			case coordinator.Better(sp.Objective, a, b):
				return -1
			case coordinator.Better(sp.Objective, b, a):
				return 1
			}
			return 0
		})
	}
	page := client.TrialPage{Trials: []*hptype.Trial{}, Total: len(trials)}
	if tq.offset < len(trials) {
		end := min(tq.offset+tq.limit, len(trials))
		page.Trials = trials[tq.offset:end]
		if end < len(trials) {
			page.NextOffset = end
		}
	}
	if tq.noMetrics {
		for i, t := range page.Trials {
			page.Trials[i] = summaryOf(t)
		}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getTrial(w http.ResponseWriter, r *http.Request) error {
	n, err := pathNumber(r)
	if err != nil {
		return err
	}
	st, _, err := s.loadStudy(r.Context(), r.PathValue("study"))
	if err != nil {
		return err
	}
	t, err := s.cfg.Store.GetTrial(r.Context(), st.ID, n)
	if errors.Is(err, hptype.ErrNotFound) {
		return errorf(http.StatusNotFound, client.CodeNotFound, "study %q has no trial %d", st.Name, n)
	}
	if err != nil {
		return fmt.Errorf("read trial %d of study %q: %w", n, st.Name, err)
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// best returns a study's best completed trial.
func (s *Server) best(w http.ResponseWriter, r *http.Request) error {
	st, sp, err := s.loadStudy(r.Context(), r.PathValue("study"))
	if err != nil {
		return err
	}
	trials, err := s.cfg.Store.ListTrials(r.Context(), st.ID)
	if err != nil {
		return fmt.Errorf("read the trials of study %q: %w", st.Name, err)
	}
	best := coordinator.Summarize(sp.Objective, sp.MaxTrials, st.ElapsedSeconds, trials).Best
	if best == nil {
		return errorf(http.StatusNotFound, client.CodeNoCompletedTrial, "study %q has no completed trial yet", st.Name)
	}
	writeJSON(w, http.StatusOK, best)
	return nil
}
