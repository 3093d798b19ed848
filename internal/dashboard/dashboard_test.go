package dashboard_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/dashboard"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

func ptr[T any](v T) *T { return &v }

// sampleData is a small study with what every plot draws: values, rung
// decisions, metrics, placements and wasted cost, and strings that must
// not end the page's script element.
func sampleData() dashboard.ReportData {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return dashboard.ReportData{
		Study: &client.Study{
			ID: "7d6f", Name: "sample", Mode: client.ModeRun, State: client.StudyCompleted,
			Objective: client.Objective{Metric: "val_accuracy", Goal: "maximize"}, Sampler: "random", Backend: "lambda",
			Spec:      "name: sample\nobjective:\n  metric: val_accuracy\n  goal: maximize\n",
			CreatedAt: at, UpdatedAt: at, Progress: client.Progress{MaxTrials: 2, Completed: 1, CostUSD: 0.003},
			Cost: client.Cost{Backend: "lambda", TotalUSD: 0.003, ByTrialState: map[string]float64{"completed": 0.002, "pruned": 0.001}},
		},
		Trials: []*client.Trial{
			{
				Study: "sample", Number: 0, State: client.TrialCompleted, Value: ptr(0.93),
				Params:    client.Params{"optimizer": "</script><script>alert(1)</script>", "learning_rate": 0.01},
				Metrics:   []client.Metric{{Step: 1, Name: "val_accuracy", Value: 0.8}, {Step: 3, Name: "val_accuracy", Value: 0.93}},
				Rungs:     []hptype.RungDecision{{Seq: 1, Rung: 0, Resource: 1, Value: 0.8, Action: "continue", DecidedAt: at}},
				Attempts:  []hptype.Attempt{{Number: 1, CostUSD: 0.002, WastedCostUSD: 0.0005, StartedAt: at}},
				CreatedAt: at,
			},
			{
				Study: "sample", Number: 1, State: client.TrialPruned, Params: client.Params{"optimizer": "sgd", "learning_rate": 0.2},
				Metrics:   []client.Metric{{Step: 1, Name: "val_accuracy", Value: 0.5}},
				Rungs:     []hptype.RungDecision{{Seq: 2, Rung: 0, Resource: 1, Value: 0.5, Action: "stop", Reason: "ranked 2 of 2", DecidedAt: at}},
				Attempts:  []hptype.Attempt{{Number: 1, CostUSD: 0.001, StartedAt: at}},
				Placement: &hptype.Placement{Pool: "gpu", Reason: "long trial"},
				CreatedAt: at,
			},
		},
		GeneratedAt: at,
	}
}

// dataScript finds the report's JSON data element.
var dataScript = regexp.MustCompile(`(?s)<script type="application/json" id="hps-data">(.*?)</script>`)

// A report is one HTML file: its data decodes back to what was given,
// its script and style are inline, and it refers to nothing outside it.
func TestReport(t *testing.T) {
	data := sampleData()
	var buf bytes.Buffer
	if err := dashboard.Report(&buf, data); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if !strings.HasPrefix(page, "<!doctype html>") || !strings.Contains(page, "</html>") {
		t.Fatalf("the report is not an HTML document:\n%.300s", page)
	}
	m := dataScript.FindAllStringSubmatch(page, -1)
	if len(m) != 1 {
		t.Fatalf("the report has %d data script elements, want 1", len(m))
	}
	var got dashboard.ReportData
	if err := json.Unmarshal([]byte(m[0][1]), &got); err != nil {
		t.Fatalf("the report's data is not JSON: %v", err)
	}
	if !reflect.DeepEqual(got, data) {
		t.Errorf("the report's data decodes to\n%+v\nwant\n%+v", got, data)
	}
	// Two script elements close, the data's and the app's: none is
	// smuggled in by a parameter's value.
	if n := strings.Count(strings.ToLower(page), "</script"); n != 2 {
		t.Errorf("the report closes %d script elements, want 2 (the data and the app)", n)
	}
	if !strings.Contains(page, "<title>sample · hpsearch report</title>") {
		t.Errorf("the report's title does not name the study")
	}
	checkSelfContained(t, page)
}

// checkSelfContained fails if a report loads anything: every src and
// href is inline data or a fragment, and a policy forbids loading.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`(?i)\b(src|href)\s*=\s*["']?([^"'\s>]*)`).FindAllStringSubmatch(page, -1) {
		if v := m[2]; !strings.HasPrefix(v, "data:") && !strings.HasPrefix(v, "#") {
			t.Errorf("the report refers to %s=%q", m[1], v)
		}
	}
	checkNoRemote(t, page)
	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]+)">`).FindStringSubmatch(page)
	if csp == nil || !strings.Contains(csp[1], "default-src &#39;none&#39;") || !strings.Contains(csp[1], "script-src &#39;sha256-") {
		t.Errorf("the report has no policy that forbids loading: %q", csp)
	}
}

// checkNoRemote fails if a page names anything on another site.
func checkNoRemote(t *testing.T, page string) {
	t.Helper()
	if m := regexp.MustCompile(`(?i)\b(src|href)\s*=\s*["']?(https?:|//)[^"'\s>]*|@import|url\(\s*["']?(https?:|//)`).FindString(page); m != "" {
		t.Errorf("the page names something on another site: %s", m)
	}
}

// The script and style are inlined in reports, so they must not end
// their own elements.
func TestAssetsInline(t *testing.T) {
	h := dashboard.Handler()
	for path, end := range map[string]string{"/assets/app.js": "</script", "/assets/style.css": "</style"} {
		body := get(t, h, path, http.StatusOK)
		if strings.Contains(strings.ToLower(body), end) {
			t.Errorf("%s contains %q and cannot be inlined", path, end)
		}
	}
}

func TestReportNeedsAStudy(t *testing.T) {
	if err := dashboard.Report(io.Discard, dashboard.ReportData{}); err == nil {
		t.Fatal("a report without a study was written")
	}
}

// The handler serves the page and its assets with their types and a
// policy that keeps the page to its own origin, and nothing else.
func TestHandler(t *testing.T) {
	h := dashboard.Handler()
	for _, c := range []struct{ path, contentType, contains string }{
		{"/", "text/html; charset=utf-8", `<script src="assets/app.js" defer></script>`},
		{"/assets/app.js", "text/javascript; charset=utf-8", "'use strict';"},
		{"/assets/style.css", "text/css; charset=utf-8", ":root"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != c.contentType || !strings.Contains(rec.Body.String(), c.contains) {
			t.Errorf("GET %s: %d %q, body without %q", c.path, rec.Code, rec.Header().Get("Content-Type"), c.contains)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: policy %q", c.path, csp)
		}
		etag := rec.Header().Get("ETag")
		again := httptest.NewRequest(http.MethodGet, c.path, nil)
		again.Header.Set("If-None-Match", etag)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, again)
		if etag == "" || rec.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %s: %d, want 304", c.path, etag, rec.Code)
		}
	}
	get(t, h, "/assets/missing.js", http.StatusNotFound)
	get(t, h, "/index.html", http.StatusNotFound)
	checkNoRemote(t, get(t, h, "/", http.StatusOK))
}

// Mount sends the API's paths to the API and the rest to the dashboard.
func TestMount(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api "+r.URL.Path) })
	h := dashboard.Mount(api)
	for _, p := range []string{"/v1/studies", "/v1/studies/x/events", "/openapi.json", "/metrics", "/healthz"} {
		if body := get(t, h, p, http.StatusOK); body != "api "+p {
			t.Errorf("GET %s went to the dashboard: %.80q", p, body)
		}
	}
	if body := get(t, h, "/", http.StatusOK); !strings.Contains(body, "<!doctype html>") {
		t.Errorf("GET / is not the dashboard: %.80q", body)
	}
}

func get(t *testing.T, h http.Handler, path string, status int) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != status {
		t.Errorf("GET %s: %d, want %d", path, rec.Code, status)
	}
	return rec.Body.String()
}
