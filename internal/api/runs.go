package api

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Causes a run is stopped with; the coordinator records them as the reason.
var (
	errStopped   = errors.New("stopped through the API")
	errCancelled = errors.New("cancelled through the API")
)

// run is a study's coordinator running in the server.
type run struct {
	id, name string
	sp       *spec.Spec
	queue    queue.Queue
	cancel   context.CancelCauseFunc
	// cancelled marks a stop that cancels the study.
	cancelled atomic.Bool
	// finishing is set once the coordinator has returned.
	finishing atomic.Bool
	// done is closed when the run is over and recorded.
	done chan struct{}
	// final is the coordinator's study_finished event, published once the
	// server has recorded the study's end. Only the run's goroutine uses it.
	final *client.Event
	// observed is, per trial, the newest attempt whose latency is in the
	// histogram. Only the run's goroutine uses it.
	observed map[int]int
}

// startRun starts a study's coordinator with cfg, whose resources release
// frees. The study must be recorded as running.
func (s *Server) startRun(st *hptype.Study, sp *spec.Spec, cfg coordinator.Config, release func()) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &run{id: st.ID, name: st.Name, sp: sp, queue: cfg.Queue, cancel: cancel, done: make(chan struct{}), observed: map[int]int{}}
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		cancel(nil)
		release()
		return errShuttingDown()
	case s.runs[st.ID] != nil:
		s.mu.Unlock()
		cancel(nil)
		release()
		return errorf(http.StatusConflict, client.CodeRunning, "study %q is running already", st.Name)
	}
	s.runs[st.ID] = r
	s.wg.Add(1)
	s.mu.Unlock()
	cfg.OnEvent = s.onEvent(r)
	s.cfg.Logger.Info("study started", "study", st.Name, "id", st.ID)
	go func() {
		defer s.wg.Done()
		defer close(r.done)
		res, err := coordinator.Run(ctx, cfg)
		r.finishing.Store(true)
		cancel(nil)
		release()
		s.finishRun(r, res, err)
	}()
	return nil
}

// onEvent publishes a coordinator's events with the metrics each trial
// reported since its previous event, and observes segment latencies. The
// study_finished event waits for the server to record the study's end.
func (s *Server) onEvent(r *run) func(coordinator.Event) {
	log := s.eventLog(r.id)
	return func(e coordinator.Event) {
		ev := client.Event{Time: e.Time, Kind: client.EventKind(e.Kind), Study: e.Study, StudyID: r.id, State: hptype.StudyRunning,
			Trial: e.Trial, Message: e.Message, Progress: progressOf(e.Progress)}
		if t := e.Trial; t != nil {
			full, err := s.cfg.Store.GetTrial(context.Background(), t.Study, t.Number)
			if err != nil {
				s.cfg.Logger.Warn("read a trial for its event", "study", r.name, "trial", t.Number, "error", err)
			} else {
				ev.Metrics = log.newMetrics(t.Number, full.Metrics)
			}
			s.observeAttempt(r, t)
		}
		if e.Kind == coordinator.StudyFinished {
			r.final = &ev
			return
		}
		s.publish(ev)
	}
}

// observeAttempt puts the latency of a trial's newest attempt in the
// histogram once it has ended.
func (s *Server) observeAttempt(r *run, t *hptype.Trial) {
	if len(t.Attempts) == 0 {
		return
	}
	a := t.Attempts[len(t.Attempts)-1]
	if a.FinishedAt.IsZero() || a.Status == "running" || r.observed[t.Number] >= a.Number {
		return
	}
	r.observed[t.Number] = a.Number
	s.metrics.segment(string(r.sp.Backend.Type), a.Status, a.FinishedAt.Sub(a.StartedAt))
}

// finishRun records how a run ended, publishes its study_finished event
// and forgets the run. A run that ended with an error leaves its study
// stopped; a cancelled one, cancelled.
func (s *Server) finishRun(r *run, res *coordinator.Result, runErr error) {
	ctx := context.Background()
	ev := r.final
	if runErr != nil {
		s.cfg.Logger.Error("study run failed", "study", r.name, "error", runErr)
		if _, err := s.setStudyState(ctx, r.id, hptype.StudyStopped, hptype.StudyRunning); err != nil {
			s.cfg.Logger.Error("record a failed run's study as stopped", "study", r.name, "error", err)
		}
	}
	if r.cancelled.Load() {
		// Only a study the cancel stopped: one that completed meanwhile
		// stays completed.
		if _, err := s.setStudyState(ctx, r.id, hptype.StudyCancelled, hptype.StudyStopped); err != nil {
			s.cfg.Logger.Error("record a study as cancelled", "study", r.name, "error", err)
		}
	}
	if ev == nil {
		// The coordinator ended with an error, before its own event.
		ev = &client.Event{Time: time.Now().UTC(), Kind: client.EventStudyFinished, Study: r.name, StudyID: r.id, Message: runErr.Error()}
	}
	st, err := s.cfg.Store.GetStudy(ctx, r.id)
	if err != nil {
		s.cfg.Logger.Error("read a finished study", "study", r.name, "error", err)
	} else {
		ev.State = st.State
	}
	if res == nil && st != nil {
		if trials, err := s.cfg.Store.ListTrials(ctx, r.id); err == nil {
			ev.Progress = progressOf(coordinator.Summarize(r.sp.Objective, r.sp.MaxTrials, st.ElapsedSeconds, trials))
		}
	}
	s.cfg.Logger.Info("study finished", "study", r.name, "state", ev.State, "reason", ev.Message)
	s.publish(*ev)
	s.mu.Lock()
	delete(s.runs, r.id)
	s.mu.Unlock()
}

// setStudyState records a study's state, if its state is from (any state
// when from is empty), retrying when the record changed meanwhile. It
// returns the study as recorded.
func (s *Server) setStudyState(ctx context.Context, id string, state, from hptype.StudyState) (*hptype.Study, error) {
	for try := 1; ; try++ {
		st, err := s.cfg.Store.GetStudy(ctx, id)
		if err != nil {
			return nil, err
		}
		if from != "" && st.State != from {
			return st, nil
		}
		st.State, st.UpdatedAt = state, time.Now().UTC()
		err = s.cfg.Store.UpdateStudy(ctx, st)
		if !errors.Is(err, hptype.ErrConflict) || try == 5 {
			return st, err
		}
	}
}

// progressOf converts a coordinator's progress for the API.
func progressOf(p coordinator.Progress) client.Progress {
	return client.Progress{
		MaxTrials: p.MaxTrials, Created: p.Created, Queued: p.Queued, Running: p.Running,
		Completed: p.Completed, Failed: p.Failed, Interrupted: p.Interrupted,
		CostUSD: p.CostUSD, WastedCostUSD: p.WastedCostUSD, ElapsedSeconds: p.ElapsedSeconds,
		Throttles: p.Throttles, BilledMS: p.BilledMS, EstimatedMS: p.EstimatedMS, Best: p.Best,
		Pruned: p.Pruned, ResourceTrained: p.ResourceTrained, Pool: (*client.PoolProgress)(p.Pool),
	}
}
