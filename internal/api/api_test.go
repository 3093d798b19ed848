package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/api/apitest"
)

// A whole study over HTTP only: create it from a space document, follow
// its events to the end, read its best trial and its metrics.
func TestWholeStudy(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	st, err := b.c.CreateStudy(ctx, []byte(tinySpace), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "tiny" || st.Mode != client.ModeRun || st.State != client.StudyRunning || !st.Active {
		t.Fatalf("created study: name %q mode %q state %q active %v, want tiny, run, running, active", st.Name, st.Mode, st.State, st.Active)
	}
	events := follow(t, b.c, st.Name, st.LastEventID)
	if len(events) == 0 || events[0].Kind != client.EventStudyStarted {
		t.Fatalf("the first event is not study_started: %v", kinds(events))
	}
	last := events[len(events)-1]
	if last.Kind != client.EventStudyFinished || last.State != client.StudyCompleted {
		t.Fatalf("the last event is %s (state %s), want study_finished (completed)", last.Kind, last.State)
	}
	if k := kinds(events); k[client.EventTrialStarted] != 3 || k[client.EventTrialCompleted] != 3 {
		t.Fatalf("events %v, want 3 trials started and completed", k)
	}
	for i, e := range events {
		if i > 0 && e.ID <= events[i-1].ID {
			t.Errorf("event %d has ID %d after %d", i, e.ID, events[i-1].ID)
		}
		if e.Kind != client.EventTrialCompleted {
			continue
		}
		if e.Trial == nil || e.Trial.Value == nil || e.Trial.Metrics != nil {
			t.Fatalf("trial_completed event without its trial's value, or with its metric history: %+v", e.Trial)
		}
		// The event carries the metrics the segment reported: the
		// objective at each of the 2 epochs.
		var got []float64
		for _, m := range e.Metrics {
			if m.Name == "val_accuracy" {
				got = append(got, m.Step)
			}
		}
		if len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("trial %d completed with val_accuracy at steps %v, want [1 2]", e.Trial.Number, got)
		}
	}

	best, err := b.c.Best(ctx, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := b.c.AllTrials(ctx, "tiny", client.TrialQuery{})
	if err != nil {
		t.Fatal(err)
	}
	top := math.Inf(-1)
	for _, tr := range trials {
		if tr.State != client.TrialCompleted || tr.Value == nil || len(tr.Metrics) == 0 {
			t.Fatalf("trial %d: state %s, value %v, %d metrics", tr.Number, tr.State, tr.Value, len(tr.Metrics))
		}
		top = max(top, *tr.Value)
	}
	if len(trials) != 3 || best.Value == nil || *best.Value != top || *best.Value < 0.5 {
		t.Fatalf("best trial %+v of %d trials, want the highest val_accuracy %v", best, len(trials), top)
	}
	got, err := b.c.GetStudy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != client.StudyCompleted || got.Active || got.Progress.Completed != 3 || got.Progress.Best == nil || got.Cost.TotalUSD <= 0 || got.Cost.ByTrialState["completed"] != got.Cost.TotalUSD {
		t.Fatalf("study after the run: %+v", got)
	}

	metrics := scrape(t, b)
	for _, want := range []string{
		`hpsearch_trials{state="completed",study="tiny"} 3`,
		`hpsearch_segments_in_flight{backend="local"} 0`,
		`hpsearch_segment_duration_seconds_count{backend="local",outcome="completed"} 3`,
		`hpsearch_studies{state="completed"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if !regexp.MustCompile(`(?m)^hpsearch_cost_usd\{study="tiny"\} [0-9.e-]+$`).MatchString(metrics) {
		t.Errorf("metrics lack the study's cost:\n%s", metrics)
	}
}

// scrape reads /metrics and checks that every line is in the Prometheus
// text format.
func scrape(t *testing.T, b *bundle) string {
	t.Helper()
	body, status := get(t, b.url+"/metrics", b.token)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	sample := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? [-+0-9.eE]+|\+Inf$`)
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
			if f[1] == "TYPE" {
				typed[f[2]] = true
			}
			continue
		}
		if !sample.MatchString(line) {
			t.Errorf("metrics line %q is not a sample", line)
			continue
		}
		name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(line)
		base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
		if !typed[name] && !typed[base] {
			t.Errorf("metric %s has no TYPE line before it", name)
		}
	}
	return body
}

// get sends a GET with a bearer token (none if empty).
func get(t *testing.T, url, token string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), resp.StatusCode
}

// askTellSpace has no trainer: its client evaluates the trials.
const askTellSpace = `name: external
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -2, max: 2}
  y: {type: float, min: -2, max: 2}
  kind: {type: categorical, values: [a, b]}
sampler: {type: tpe, seed: 7}
max_trials: 50
`

// loss is what the external loop evaluates.
func loss(p client.Params) (float64, error) {
	x, err := p.Float("x")
	if err != nil {
		return 0, err
	}
	y, err := p.Float("y")
	if err != nil {
		return 0, err
	}
	k, err := p.String("kind")
	if err != nil {
		return 0, err
	}
	v := (x-0.5)*(x-0.5) + (y+1)*(y+1)
	if k == "b" {
		v += 0.5
	}
	return v, nil
}

// An external loop runs 50 trials through ask and tell: an intermediate
// report and a final one for each.
func TestAskTell(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	st, err := b.c.CreateStudy(ctx, []byte(askTellSpace), &client.CreateOptions{Mode: client.ModeAskTell})
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != client.ModeAskTell || st.State != client.StudyRunning || !st.Active {
		t.Fatalf("created study: mode %q state %q active %v", st.Mode, st.State, st.Active)
	}
	bestLoss := math.Inf(1)
	for i := range 50 {
		tr, err := b.c.Ask(ctx, "external")
		if err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
		if tr.Number != i || tr.State != client.TrialRunning {
			t.Fatalf("ask %d gave trial %d, %s", i, tr.Number, tr.State)
		}
		v, err := loss(tr.Params)
		if err != nil {
			t.Fatalf("trial %d params %v: %v", i, tr.Params, err)
		}
		if _, err := b.c.Tell(ctx, "external", tr.Number, client.Report{Metrics: []client.Metric{{Step: 1, Name: "loss", Value: v + 1}}}); err != nil {
			t.Fatalf("tell %d (intermediate): %v", i, err)
		}
		done, err := b.c.Tell(ctx, "external", tr.Number, client.Report{State: client.TrialCompleted, Metrics: []client.Metric{{Step: 2, Name: "loss", Value: v}}})
		if err != nil {
			t.Fatalf("tell %d: %v", i, err)
		}
		if done.State != client.TrialCompleted || done.Value == nil || *done.Value != v || len(done.Metrics) != 2 || done.Resource != 2 {
			t.Fatalf("told trial %d: %+v, want completed with value %v and 2 metrics", i, done, v)
		}
		bestLoss = min(bestLoss, v)
	}
	_, err = b.c.Ask(ctx, "external")
	var ce *client.Error
	if !errors.As(err, &ce) || !errors.Is(err, client.ErrConflict) || ce.Code != client.CodeFinished {
		t.Fatalf("ask 51: %v, want 409 finished", err)
	}
	best, err := b.c.Best(ctx, "external")
	if err != nil {
		t.Fatal(err)
	}
	if *best.Value != bestLoss {
		t.Fatalf("best value %v, want %v", *best.Value, bestLoss)
	}
	// TPE learns: its proposals after the 10 random ones do better.
	page, err := b.c.ListTrials(ctx, "external", client.TrialQuery{Sort: "value", Limit: 10, NoMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for i, tr := range page.Trials {
		if tr.Number >= 10 {
			late++
		}
		if len(tr.Metrics) != 0 || (i > 0 && *tr.Value < *page.Trials[i-1].Value) {
			t.Fatalf("trial %d of the best first: value %v, %d metrics", i, *tr.Value, len(tr.Metrics))
		}
	}
	if page.Total != 50 || page.NextOffset != 10 || late < 8 {
		t.Fatalf("the 10 best trials: total %d, next %d, %d of them sampled after the first 10", page.Total, page.NextOffset, late)
	}
	got, err := b.c.GetStudy(ctx, "external")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != client.StudyCompleted || got.Active || got.Progress.Completed != 50 {
		t.Fatalf("study after 50 trials: state %s, active %v, %d completed", got.State, got.Active, got.Progress.Completed)
	}
	events := follow(t, b.c, "external", 0)
	k := kinds(events)
	if k[client.EventStudyStarted] != 1 || k[client.EventTrialStarted] != 50 || k[client.EventTrialReported] != 50 || k[client.EventTrialCompleted] != 50 || k[client.EventStudyFinished] != 1 {
		t.Fatalf("events: %v", k)
	}
	for _, e := range events {
		if (e.Kind == client.EventTrialReported || e.Kind == client.EventTrialCompleted) && len(e.Metrics) != 1 {
			t.Fatalf("%s event of trial %d has metrics %v, want the one reported", e.Kind, e.Trial.Number, e.Metrics)
		}
	}
}

// Tells that do not make sense are refused, naming the field.
func TestTellErrors(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.c.CreateStudy(ctx, []byte(askTellSpace), &client.CreateOptions{Mode: client.ModeAskTell}); err != nil {
		t.Fatal(err)
	}
	tr, err := b.c.Ask(ctx, "external")
	if err != nil {
		t.Fatal(err)
	}
	tell := fmt.Sprintf("%s/v1/studies/external/trials/%d/tell", b.url, tr.Number)
	for _, tc := range []struct {
		body         string
		status       int
		field        string
		line, column int
	}{
		{body: `{"state": "done"}`, status: 400, field: "state"},
		{body: "{\n  \"value\": \"high\",\n  \"state\": \"completed\"\n}", status: 400, field: "value", line: 2, column: 12},
		{body: `{"state": "completed", "value": true}`, status: 400, field: "value", line: 1, column: 33},
		{body: `{"metrics": [{"name": "a", "value": {"x": 1}}]}`, status: 400, field: "metrics.value", line: 1, column: 37},
		{body: `{"valeu": 1}`, status: 400, field: "valeu"},
		{body: `{"metrics": [{"step": 1, "value": 2}]}`, status: 400, field: "metrics[0].name"},
		{body: `{"value": 1}`, status: 400, field: "value"},
		{body: `{"state": "completed"}`, status: 400, field: "value"},
		{body: `{"metrics": [`, status: 400, field: "body", line: 1, column: 14},
		{body: `{"error": "x"}`, status: 400, field: "error"},
	} {
		ce := post(t, b, tell, tc.body)
		if ce.StatusCode != tc.status || ce.Field != tc.field || (tc.line != 0 && (ce.Line != tc.line || ce.Column != tc.column)) {
			t.Errorf("tell %s: %d %q at %d:%d (%s), want %d %q at %d:%d", tc.body, ce.StatusCode, ce.Field, ce.Line, ce.Column, ce.Message, tc.status, tc.field, tc.line, tc.column)
		}
	}
	// Nothing was recorded; the trial ends once.
	if _, err := b.c.Tell(ctx, "external", tr.Number, client.Report{State: client.TrialFailed, Error: "diverged"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.Tell(ctx, "external", tr.Number, client.Report{State: client.TrialCompleted, Value: new(1.0)})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeFinished {
		t.Fatalf("tell after the end: %v, want 409 finished", err)
	}
	got, err := b.c.GetTrial(ctx, "external", tr.Number)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != client.TrialFailed || got.Error != "diverged" || len(got.Metrics) != 0 {
		t.Fatalf("trial after bad tells: %+v", got)
	}
	// A study the server runs takes no tells, and an ask/tell one no trainer.
	if _, err := b.c.CreateStudy(ctx, []byte(tinySpace), &client.CreateOptions{NoStart: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Ask(ctx, "tiny"); !errors.As(err, &ce) || ce.Code != client.CodeWrongMode {
		t.Fatalf("ask on a run study: %v, want 409 wrong_mode", err)
	}
}

// post sends a JSON body with the bundle's token and decodes the error.
func post(t *testing.T, b *bundle, url, body string) *client.Error {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb client.ErrorBody
	if err := jsonDecode(resp.Body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("POST %s: %d, not an error body: %v", url, resp.StatusCode, err)
	}
	eb.Error.StatusCode = resp.StatusCode
	return eb.Error
}

// Requests without a valid token are refused; the token is checked
// against the hashes of a tokens file or environment variable.
func TestAuth(t *testing.T) {
	b := setup(t, nil)
	for _, tc := range []struct {
		name, header string
	}{
		{"no token", ""},
		{"wrong token", "Bearer hps_not-the-token"},
		{"the hash itself", "Bearer " + api.HashToken(b.token)},
		{"another scheme", "Basic " + b.token},
	} {
		for _, path := range []string{"/v1/studies", "/metrics", "/v1/studies/x/events"} {
			req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var eb client.ErrorBody
			err = jsonDecode(resp.Body, &eb)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || err != nil || eb.Error.Code != client.CodeUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s on %s: %d %+v, want 401 unauthorized with WWW-Authenticate", tc.name, path, resp.StatusCode, eb.Error)
			}
		}
	}
	// The client with a wrong token gets a typed error.
	bad, err := client.New(b.url, client.WithToken("hps_wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.ListStudies(context.Background()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("list with a wrong token: %v, want ErrUnauthorized", err)
	}
	// Liveness and the OpenAPI document are public; the rest takes the token.
	for path, token := range map[string]string{"/healthz": "", "/openapi.json": "", "/v1/studies": b.token, "/metrics": b.token} {
		if body, status := get(t, b.url+path, token); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
}

func TestParseTokens(t *testing.T) {
	a, b := api.HashToken("hps_a"), api.HashToken("hps_b")
	file, err := api.ParseTokens("tokens", "# team tokens\n\n"+a+" created 2025-01-01\n  "+b+"\n")
	if err != nil {
		t.Fatal(err)
	}
	env, err := api.ParseTokens("HPSEARCH_TOKENS", a+","+b)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []*api.Tokens{file, env} {
		if ts.Len() != 2 || !ts.Valid("hps_a") || !ts.Valid("hps_b") || ts.Valid("hps_c") || ts.Valid(a) || ts.Valid("") {
			t.Errorf("tokens %d: accept a %v, b %v, c %v, a's hash %v", ts.Len(), ts.Valid("hps_a"), ts.Valid("hps_b"), ts.Valid("hps_c"), ts.Valid(a))
		}
	}
	// A token in place of its hash is refused, without echoing it whole.
	_, err = api.ParseTokens("tokens", a+"\nhps_secretsecretsecret\n")
	if err == nil || !strings.Contains(err.Error(), "tokens:2:") || strings.Contains(err.Error(), "secretsecretsecret") {
		t.Fatalf("a raw token in a tokens file: %v, want an error at tokens:2 that hides the token", err)
	}
	if _, err := api.ParseTokens("tokens", "sha256:abc"); err == nil {
		t.Fatal("a short hash was accepted")
	}
	// A server needs tokens unless told to serve without.
	if _, err := api.New(api.Config{Store: setup(t, nil).state.Store, Wire: apitest.LocalWire(nil, nil)}); err == nil {
		t.Fatal("a server without tokens started")
	}
}
