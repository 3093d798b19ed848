package dashboard_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/api/apitest"
	"github.com/hpsearch/hpsearch/internal/dashboard"
)

// browserSpace is a study of the built-in digits workload small enough
// for the test, with data for every plot: the median rule lets the first
// three trials complete and judges the others at epochs 1, 3, 5 and 7, so
// there are values, learning curves, and decisions to continue and to
// stop.
const browserSpace = `name: browser
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.01, max: 0.5, log: true}
  hidden_units: {type: int, min: 16, max: 64, step: 16}
  batch_size: {type: categorical, values: [32, 64]}
  epochs: {type: constant, value: 9}
trainer: {builtin: digits-mlp, timeout: 2m}
sampler: {type: random, seed: 2}
scheduler: {type: median, min: 1, max: 9, interval: 2, min_trials: 3}
max_trials: 6
max_concurrency: 2
`

// The dashboard in a real browser: headless Chromium loads a study's page
// from the API server with the dashboard mounted beside it, and the dumped
// DOM has one table row per trial and every plot drawn from real data.
// The first load follows the study's events while it runs; later loads
// read the finished study, the studies list, the token form, and a
// report file.
func TestBrowser(t *testing.T) {
	bin := findChromium(t)
	srv := startServer(t)
	ctx := t.Context()
	created, err := srv.c.CreateStudy(ctx, []byte(browserSpace), &client.CreateOptions{NoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.live.study = created.Name
	page := srv.url + "/#token=" + srv.token + "&study=" + created.Name

	// The page opens the event stream of a study that has not started;
	// the stream's first request starts it, and the page draws the study
	// as its events come.
	dom := chromium(t, bin, "--dump-dom", page)
	st, err := srv.c.GetStudy(ctx, created.Name)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != client.StudyCompleted {
		t.Fatalf("study %s after the page followed it, want completed", st.State)
	}
	trials, err := srv.c.AllTrials(ctx, st.Name, client.TrialQuery{})
	if err != nil {
		t.Fatal(err)
	}
	checkStudyPage(t, dom, st, trials)
	sent := srv.live.sent()
	status := startTags(dom, "span", "id", "status")
	if len(status) != 1 || sent == 0 || status[0]["data-events"] != strconv.Itoa(sent) {
		t.Errorf("the page's status is %v; the server sent %d events", status, sent)
	}
	t.Logf("the page followed %d events of study %s", sent, st.Name)

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(t.ArtifactDir(), "dashboard.png")
		chromium(t, bin, "--screenshot="+shot, "--window-size=1400,1800", page)
		f, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg, err := png.DecodeConfig(f)
		if err != nil || cfg.Width != 1400 || cfg.Height != 1800 {
			t.Fatalf("screenshot %s: %dx%d, %v; want a 1400x1800 PNG", shot, cfg.Width, cfg.Height, err)
		}
		t.Logf("screenshot: %s", shot)
	})

	t.Run("finished", func(t *testing.T) {
		checkStudyPage(t, chromium(t, bin, "--dump-dom", page), st, trials)
	})

	t.Run("studies", func(t *testing.T) {
		dom := chromium(t, bin, "--dump-dom", srv.url+"/#token="+srv.token)
		if rows := startTags(dom, "tr", "data-study", ""); len(rows) != 1 || rows[0]["data-study"] != st.Name {
			t.Errorf("the studies list has rows %v, want one of study %s", rows, st.Name)
		}
		noErrors(t, dom)
	})

	t.Run("token", func(t *testing.T) {
		dom := chromium(t, bin, "--dump-dom", srv.url+"/#study="+st.Name)
		if len(startTags(dom, "form", "id", "token-form")) != 1 || len(startTags(dom, "tr", "data-trial", "")) != 0 {
			t.Errorf("without a token the page does not ask for one:\n%s", dom)
		}
	})

	t.Run("report", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.html")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := dashboard.Report(f, dashboard.ReportData{Study: st, Trials: trials, GeneratedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		checkStudyPage(t, chromium(t, bin, "--dump-dom", "file://"+path), st, trials)
	})
}

// checkStudyPage checks a dumped study page against the study: one table
// row per trial, each plot drawn with the trials it should draw, the best
// trial marked, and no error shown.
func checkStudyPage(t *testing.T, dom string, st *client.Study, trials []*client.Trial) {
	t.Helper()
	var rows, want []int
	for _, tag := range startTags(dom, "tr", "data-trial", "") {
		n, err := strconv.Atoi(tag["data-trial"])
		if err != nil {
			t.Fatalf("row %v: %v", tag, err)
		}
		rows = append(rows, n)
	}
	completed, curves, rungs := 0, 0, 0
	for _, tr := range trials {
		want = append(want, tr.Number)
		if tr.State == client.TrialCompleted {
			completed++
		}
		if slices.ContainsFunc(tr.Metrics, func(m client.Metric) bool { return m.Name == st.Objective.Metric }) {
			curves++
		}
		rungs += len(tr.Rungs)
	}
	slices.Sort(rows)
	if len(want) == 0 || !slices.Equal(rows, want) {
		t.Errorf("the trials table has rows %v, want one per trial %v", rows, want)
	}
	if st.Progress.Best == nil || completed == 0 || rungs == 0 {
		t.Fatalf("the study has %d completed trials (best %v) and %d rung decisions: too little to draw", completed, st.Progress.Best, rungs)
	}
	plots := map[string]map[string]string{}
	for _, tag := range startTags(dom, "svg", "data-plot", "") {
		plots[tag["data-plot"]] = tag
		if n, err := strconv.Atoi(tag["data-points"]); err != nil || n <= 0 {
			t.Errorf("plot %s has data-points %q, want some", tag["data-plot"], tag["data-points"])
		}
	}
	for kind, attr := range map[string]map[string]string{
		"history":  {"data-points": strconv.Itoa(completed), "data-best": strconv.Itoa(st.Progress.Best.Number)},
		"parallel": {"data-points": strconv.Itoa(len(trials))},
		"curves":   {"data-points": strconv.Itoa(curves), "data-rungs": strconv.Itoa(rungs)},
		"cost":     {},
	} {
		got, ok := plots[kind]
		if !ok {
			t.Errorf("no %s plot; plots: %v", kind, plots)
			continue
		}
		for k, v := range attr {
			if got[k] != v {
				t.Errorf("plot %s has %s=%q, want %q", kind, k, got[k], v)
			}
		}
	}
	noErrors(t, dom)
}

func noErrors(t *testing.T, dom string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`<p data-error="">([^<]*)`).FindAllStringSubmatch(dom, -1) {
		t.Errorf("the page shows an error: %s", m[1])
	}
}

var attrPattern = regexp.MustCompile(`([a-zA-Z_:][-a-zA-Z0-9_:.]*)(?:="([^"]*)")?`)

// startTags returns the attributes of the start tags of element name that
// have attribute attr (with value, unless value is empty).
func startTags(dom, name, attr, value string) []map[string]string {
	var out []map[string]string
	for _, m := range regexp.MustCompile(`<`+name+`\b([^>]*)>`).FindAllStringSubmatch(dom, -1) {
		attrs := map[string]string{}
		for _, a := range attrPattern.FindAllStringSubmatch(m[1], -1) {
			attrs[a[1]] = a[2]
		}
		if v, ok := attrs[attr]; ok && (value == "" || v == value) {
			out = append(out, attrs)
		}
	}
	return out
}

// findChromium finds a headless-capable Chromium. Without one the test
// is skipped, unless CI is set.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the dashboard's browser test needs chromium, chromium-browser or google-chrome in PATH; .ci/run installs it with apt-get install chromium")
	}
	t.Skip("no chromium, chromium-browser or google-chrome in PATH (apt-get install chromium)")
	return ""
}

// consoleLine is a message of a page's console in Chromium's log: the
// page's own, a failed request, or a violation of its security policy.
var consoleLine = regexp.MustCompile(`(?m):CONSOLE[^\]]*\] (.*)$`)

// chromium runs headless Chromium with a fresh profile on the last
// argument's page and returns what it printed; the page must write
// nothing to its console. Virtual time runs the page's timers ahead, but
// waits for responses that have not come yet. The browser's processes are
// killed if they outlast the timeout.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	args = append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0",
	}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	for _, m := range consoleLine.FindAllStringSubmatch(stderr.String(), -1) {
		t.Errorf("the page %s wrote to its console: %s", args[len(args)-1], m[1])
	}
	return stdout.String()
}

// testServer is the API server on 127.0.0.1 over a fresh state directory,
// with the dashboard mounted beside it, and a client with a valid token.
type testServer struct {
	url   string
	token string
	c     *client.Client
	live  *liveEvents
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	cfg, token, _ := apitest.Config(t)
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	live := &liveEvents{api: srv.Handler()}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/studies/{study}/events", live)
	mux.Handle("/", dashboard.Mount(srv.Handler()))
	url := apitest.Serve(t, srv, mux)
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	live.c = c
	return &testServer{url: url, token: token, c: c, live: live}
}

// liveEvents serves the API's event streams. The first request resumes
// the study, so the stream has the whole run; each stream is sent when it
// ends, because headless Chromium's virtual time waits for a response
// that has not begun but not for one still streaming: the DOM it dumps
// has then seen every event.
type liveEvents struct {
	api   http.Handler
	c     *client.Client
	study string

	once     sync.Once
	startErr error
	mu       sync.Mutex
	events   int
}

func (h *liveEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() {
		_, h.startErr = h.c.ResumeStudy(context.WithoutCancel(r.Context()), h.study, nil, "")
	})
	if h.startErr != nil {
		http.Error(w, "start the study: "+h.startErr.Error(), http.StatusInternalServerError)
		return
	}
	rec := &wholeStream{header: http.Header{}, status: http.StatusOK}
	h.api.ServeHTTP(rec, r)
	h.mu.Lock()
	h.events += len(regexp.MustCompile(`(?m)^data: `).FindAll(rec.body.Bytes(), -1))
	h.mu.Unlock()
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// sent counts the events the streams sent.
func (h *liveEvents) sent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events
}

// wholeStream keeps a response until its handler returns.
type wholeStream struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (s *wholeStream) Header() http.Header                { return s.header }
func (s *wholeStream) Write(b []byte) (int, error)        { return s.body.Write(b) }
func (s *wholeStream) WriteHeader(status int)             { s.status = status }
func (s *wholeStream) Flush()                             {}
func (s *wholeStream) SetWriteDeadline(_ time.Time) error { return nil }
