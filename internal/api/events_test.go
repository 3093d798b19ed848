package api_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
)

// askTell runs n trials of the ask/tell study "external" to completion.
func askTell(t *testing.T, c *client.Client, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		tr, err := c.Ask(ctx, "external")
		if err != nil {
			t.Fatal(err)
		}
		v, err := loss(tr.Params)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Tell(ctx, "external", tr.Number, client.Report{State: client.TrialCompleted, Value: &v}); err != nil {
			t.Fatal(err)
		}
	}
}

// next reads n events of a stream.
func next(t *testing.T, s *client.EventStream, n int) []*client.Event {
	t.Helper()
	var out []*client.Event
	for range n {
		e, err := s.Next()
		if err != nil {
			t.Fatalf("event %d of %d: %v", len(out)+1, n, err)
		}
		out = append(out, e)
	}
	return out
}

// A stream resumed with Last-Event-ID continues after that event: nothing
// missed, nothing repeated, also for events published while no stream
// was open.
func TestEventsResume(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.c.CreateStudy(ctx, []byte(askTellSpace), &client.CreateOptions{Mode: client.ModeAskTell}); err != nil {
		t.Fatal(err)
	}
	askTell(t, b.c, 2) // study_started, then 2 x (trial_started, trial_completed)
	s, err := b.c.Events(ctx, "external", 0)
	if err != nil {
		t.Fatal(err)
	}
	first := next(t, s, 3)
	s.Close()
	askTell(t, b.c, 3)

	s, err = b.c.Events(ctx, "external", first[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	rest := next(t, s, 2+6)
	s.Close()
	all := append(first, rest...)
	want := []client.EventKind{client.EventStudyStarted}
	for range 5 {
		want = append(want, client.EventTrialStarted, client.EventTrialCompleted)
	}
	for i, e := range all {
		if e.Kind != want[i] || (i > 0 && e.ID <= all[i-1].ID) {
			t.Fatalf("event %d: %s with ID %d after %d, want %s", i, e.Kind, e.ID, all[max(i-1, 0)].ID, want[i])
		}
		if e.Kind != client.EventStudyStarted && e.Trial.Number != (i-1)/2 {
			t.Fatalf("event %d is about trial %d, want %d", i, e.Trial.Number, (i-1)/2)
		}
	}

	// A stream that resumes after an event this server never sent (one of
	// an earlier process) starts with a resync.
	s, err = b.c.Events(ctx, "external", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := next(t, s, 2)
	s.Close()
	if got[0].Kind != client.EventResync || got[0].ID != 0 || got[1].Kind != client.EventStudyStarted {
		t.Fatalf("stream after an unknown ID: %s (ID %d), %s; want resync, study_started", got[0].Kind, got[0].ID, got[1].Kind)
	}

	// A stopped study's stream ends after its study_finished event, and
	// after that there is nothing to stream.
	if _, err := b.c.StopStudy(ctx, "external"); err != nil {
		t.Fatal(err)
	}
	s, err = b.c.Events(ctx, "external", all[len(all)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	fin := next(t, s, 1)[0]
	if fin.Kind != client.EventStudyFinished || fin.State != client.StudyStopped {
		t.Fatalf("after stop: %s (%s), want study_finished (stopped)", fin.Kind, fin.State)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream goes on after study_finished: %v", err)
	}
	s.Close()
	s, err = b.c.Events(ctx, "external", fin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("a stopped study streams more: %v", err)
	}
	s.Close()
}

// The server keeps only a study's newest events; a client resuming from
// before them is told to resync.
func TestEventsRetention(t *testing.T) {
	b := setup(t, func(c *api.Config) { c.EventsPerStudy = 4 })
	ctx := context.Background()
	if _, err := b.c.CreateStudy(ctx, []byte(askTellSpace), &client.CreateOptions{Mode: client.ModeAskTell}); err != nil {
		t.Fatal(err)
	}
	s, err := b.c.Events(ctx, "external", 0)
	if err != nil {
		t.Fatal(err)
	}
	start := next(t, s, 1)[0]
	s.Close()
	askTell(t, b.c, 3)
	s, err = b.c.Events(ctx, "external", start.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := next(t, s, 5)
	s.Close()
	// Of study_started and 3 x (trial_started, trial_completed), the
	// newest 4 are kept.
	if got[0].Kind != client.EventResync || got[1].Kind != client.EventTrialStarted || got[1].Trial.Number != 1 || got[4].Kind != client.EventTrialCompleted || got[4].Trial.Number != 2 {
		t.Fatalf("resumed after dropped events: %v", kinds(got))
	}
}

// An event stream outlives the server's read and write timeouts, which are
// for ordinary requests.
func TestEventsOutliveTimeouts(t *testing.T) {
	b := setup(t, nil)
	hs := httptest.NewUnstartedServer(b.srv.Handler())
	hs.Config.ReadTimeout, hs.Config.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond
	hs.Start()
	defer hs.Close()
	c, err := client.New(hs.URL, client.WithToken(b.token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateStudy(ctx, []byte(askTellSpace), &client.CreateOptions{Mode: client.ModeAskTell}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Events(ctx, "external", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next(t, s, 1)
	// Let both timeouts pass while the stream waits.
	time.Sleep(300 * time.Millisecond)
	askTell(t, c, 1)
	if got := next(t, s, 2); got[0].Kind != client.EventTrialStarted || got[1].Kind != client.EventTrialCompleted {
		t.Fatalf("after the timeouts: %v", kinds(got))
	}
}
