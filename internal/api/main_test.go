package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/api/apitest"
	"github.com/hpsearch/hpsearch/internal/localstate"
)

// TestMain makes the test binary the trainer the local executor starts
// (`SELF trainer`), so studies run real trainer processes.
func TestMain(m *testing.M) { apitest.Main(m) }

// bundle is a server on 127.0.0.1 over a fresh state directory, and a
// client of it with a valid token.
type bundle struct {
	srv   *api.Server
	url   string
	token string
	c     *client.Client
	state *localstate.State
}

// setup starts a server; mod changes its configuration.
func setup(t *testing.T, mod func(*api.Config)) *bundle {
	t.Helper()
	cfg, token, st := apitest.Config(t)
	if mod != nil {
		mod(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := apitest.Serve(t, srv, srv.Handler())
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{srv: srv, url: url, token: token, c: c, state: st}
}

// tinySpace is a study of the built-in digits workload small enough for a
// test: three trials of two epochs.
const tinySpace = `name: tiny
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.05, max: 0.3, log: true}
  hidden_units: {type: int, min: 16, max: 32, step: 16}
  epochs: {type: constant, value: 2}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: sobol, seed: 1}
max_trials: 3
max_concurrency: 2
`

// follow collects a study's events after lastID until it finishes.
func follow(t *testing.T, c *client.Client, study string, lastID int64) []*client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var events []*client.Event
	if err := c.Follow(ctx, study, lastID, func(e *client.Event) error {
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatalf("follow %s: %v", study, err)
	}
	return events
}

// kinds counts events by kind.
func kinds(events []*client.Event) map[client.EventKind]int {
	m := map[client.EventKind]int{}
	for _, e := range events {
		m[e.Kind]++
	}
	return m
}
