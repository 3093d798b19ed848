package api_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/client"
)

// slowSpace has trials long enough to be running when they are stopped.
const slowSpace = `name: slow
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.05, max: 0.3, log: true}
  hidden_units: {type: constant, value: 128}
  batch_size: {type: constant, value: 16}
  epochs: {type: constant, value: 1000}
trainer: {builtin: digits-mlp, timeout: 10m}
sampler: {type: random, seed: 1}
max_trials: 2
max_concurrency: 2
`

// until reads a stream's events up to the first of kind.
func until(t *testing.T, s *client.EventStream, kind client.EventKind, n int) []*client.Event {
	t.Helper()
	var out []*client.Event
	seen := 0
	for seen < n {
		e, err := s.Next()
		if err != nil {
			t.Fatalf("waiting for %s after %v: %v", kind, kinds(out), err)
		}
		out = append(out, e)
		if e.Kind == kind {
			seen++
		}
	}
	return out
}

// A study is stopped, resumed with a changed document, and cancelled.
func TestStopResumeCancel(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	st, err := b.c.CreateStudy(ctx, []byte(slowSpace), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.c.Events(ctx, "slow", st.LastEventID)
	if err != nil {
		t.Fatal(err)
	}
	until(t, s, client.EventTrialStarted, 2)
	if _, err := b.c.ResumeStudy(ctx, "slow", nil, ""); !isCode(err, client.CodeRunning) {
		t.Fatalf("resume a running study: %v, want 409 running", err)
	}
	stopped, err := b.c.StopStudy(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != client.StudyStopped || stopped.Active || stopped.Progress.Interrupted != 2 || stopped.Progress.Failed != 0 {
		t.Fatalf("after stop: state %s, active %v, progress %+v", stopped.State, stopped.Active, stopped.Progress)
	}
	rest := until(t, s, client.EventStudyFinished, 1)
	if fin := rest[len(rest)-1]; fin.State != client.StudyStopped || fin.Message != "stopped through the API" || kinds(rest)[client.EventTrialInterrupted] != 2 {
		t.Fatalf("events of the stop: %v, final %s %q", kinds(rest), fin.State, fin.Message)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream goes on after study_finished: %v", err)
	}
	s.Close()
	if _, err := b.c.StopStudy(ctx, "slow"); !isCode(err, client.CodeNotRunning) {
		t.Fatalf("stop a stopped study: %v, want 409 not_running", err)
	}

	// Resuming takes the study's own document, not another study's or
	// another search.
	other := strings.Replace(slowSpace, "name: slow", "name: fast", 1)
	if _, err := b.c.ResumeStudy(ctx, "slow", []byte(other), "slow.yaml"); !isCode(err, client.CodeInvalidSpace) || !strings.HasPrefix(err.Error(), "slow.yaml:1:7: ") {
		t.Fatalf("resume with another name: %v, want 400 at slow.yaml:1:7", err)
	}
	changed := strings.Replace(slowSpace, "max: 0.3", "max: 0.4", 1)
	if _, err := b.c.ResumeStudy(ctx, "slow", []byte(changed), ""); !isCode(err, client.CodeSearchChanged) {
		t.Fatalf("resume with another search: %v, want 409 search_changed", err)
	}
	raised := strings.Replace(slowSpace, "max_trials: 2", "max_trials: 3", 1)
	resumed, err := b.c.ResumeStudy(ctx, "slow", []byte(raised), "")
	if err != nil {
		t.Fatal(err)
	}
	if resumed.State != client.StudyRunning || !resumed.Active || !strings.Contains(resumed.Spec, "max_trials: 3") {
		t.Fatalf("resumed: state %s, active %v, spec\n%s", resumed.State, resumed.Active, resumed.Spec)
	}
	s, err = b.c.Events(ctx, "slow", resumed.LastEventID)
	if err != nil {
		t.Fatal(err)
	}
	got := until(t, s, client.EventTrialStarted, 1)
	if got[0].Kind != client.EventStudyStarted || got[len(got)-1].Trial.Number > 1 {
		t.Fatalf("after resume: %v, trial %d; want study_started, then an interrupted trial going on", kinds(got), got[len(got)-1].Trial.Number)
	}

	cancelled, err := b.c.CancelStudy(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.State != client.StudyCancelled || cancelled.Active {
		t.Fatalf("after cancel: state %s, active %v", cancelled.State, cancelled.Active)
	}
	rest = until(t, s, client.EventStudyFinished, 1)
	if fin := rest[len(rest)-1]; fin.State != client.StudyCancelled {
		t.Fatalf("the cancel's study_finished has state %s", fin.State)
	}
	s.Close()
	if _, err := b.c.ResumeStudy(ctx, "slow", nil, ""); !isCode(err, client.CodeCancelled) {
		t.Fatalf("resume a cancelled study: %v, want 409 cancelled", err)
	}
	if again, err := b.c.CancelStudy(ctx, "slow"); err != nil || again.State != client.StudyCancelled {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := b.c.CreateStudy(ctx, []byte(slowSpace), nil); !isCode(err, client.CodeExists) {
		t.Fatalf("create a study that exists: %v, want 409 exists", err)
	}
	trials, err := b.c.AllTrials(ctx, "slow", client.TrialQuery{States: []client.TrialState{client.TrialCompleted, client.TrialRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 0 {
		t.Fatalf("%d trials completed or running after the cancel", len(trials))
	}
}

// Shutting the server down stops its studies cleanly: their trials are
// interrupted, the studies stopped, and streams end with study_finished.
func TestShutdown(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	st, err := b.c.CreateStudy(ctx, []byte(slowSpace), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.c.Events(ctx, "slow", st.LastEventID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	until(t, s, client.EventTrialStarted, 2)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := b.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	rest := until(t, s, client.EventStudyFinished, 1)
	if fin := rest[len(rest)-1]; fin.State != client.StudyStopped || fin.Message != "the server shut down" {
		t.Fatalf("study_finished at shutdown: %s %q", fin.State, fin.Message)
	}
	got, err := b.c.GetStudy(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != client.StudyStopped || got.Progress.Interrupted != 2 || got.Progress.Failed != 0 {
		t.Fatalf("after shutdown: state %s, progress %+v", got.State, got.Progress)
	}
	if _, err := b.c.ResumeStudy(ctx, "slow", nil, ""); !isCode(err, client.CodeShuttingDown) {
		t.Fatalf("resume during shutdown: %v, want 503 shutting_down", err)
	}
}

func isCode(err error, code string) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == code
}
