// Package dashboard is the web dashboard of hpsearch serve and the
// self-contained HTML report of hpsearch report. Both are the same page:
// hand-written JavaScript that draws inline SVG plots (assets/app.js),
// with no framework, no build step and nothing loaded from another site.
//
// Served by Handler, the page reads the HTTP API with the bearer token it
// is given and follows a study's events as they happen. Written by Report,
// it carries its style, script and data inside it and reads the data from
// a JSON script element.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"time"

	"github.com/hpsearch/hpsearch/client"
)

//go:embed assets/index.html assets/app.js assets/style.css
var assetFiles embed.FS

//go:embed report.html
var reportHTML string

// asset is a file the dashboard serves.
type asset struct {
	name        string
	contentType string
	body        []byte
	etag        string
}

func mustAsset(name, contentType string) *asset {
	body, err := assetFiles.ReadFile("assets/" + name)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(body)
	return &asset{name: name, contentType: contentType, body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

var (
	index  = mustAsset("index.html", "text/html; charset=utf-8")
	script = mustAsset("app.js", "text/javascript; charset=utf-8")
	style  = mustAsset("style.css", "text/css; charset=utf-8")
	// assets are the files under /assets/, by name.
	assets = map[string]*asset{script.name: script, style.name: style}
)

// servedPolicy lets the served page run its own script and style, and
// talk to its own origin only.
const servedPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard: the page at / and its script and style
// under /assets/. Mount it beside the API, whose routes the page calls
// with paths relative to it (v1/studies, ...): see Mount.
//
// The page takes the bearer token from its URL's fragment
// (/#token=TOKEN&study=NAME; a fragment is never sent to the server),
// else asks for one when the API refuses a request, and keeps it in the
// tab's session storage.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", index)
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.PathValue("name")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		a.ServeHTTP(w, r)
	})
	return mux
}

// Mount returns a handler that sends the API's paths (/v1/, /openapi.json,
// /metrics, /healthz) to api and every other path to the dashboard.
func Mount(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/v1/", "/openapi.json", "/metrics", "/healthz"} {
		mux.Handle(p, api)
	}
	mux.Handle("/", Handler())
	return mux
}

func (a *asset) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Security-Policy", servedPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Revalidate every time: a new binary serves new assets at the same
	// paths.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}

// ReportData is what a report shows.
type ReportData struct {
	// Study is the study as the API shows it (GET /v1/studies/{study}).
	Study *client.Study `json:"study"`
	// Trials are the study's trials with their metric histories.
	Trials []*client.Trial `json:"trials"`
	// GeneratedAt is when the data was read.
	GeneratedAt time.Time `json:"generated_at"`
}

// reportPage fills report.html.
type reportPage struct {
	Title  string
	Policy string
	Style  template.CSS
	Script template.JS
	Data   template.JS
}

var reportTemplate = template.Must(template.New("report.html").Parse(reportHTML))

// reportPolicy lets a report run the script and style inside it and
// nothing else: it loads nothing, and sends nothing anywhere.
var reportPolicy = fmt.Sprintf("default-src 'none'; script-src %s; style-src %s; img-src data:; base-uri 'none'; form-action 'none'", cspHash(script.body), cspHash(style.body))

// cspHash is the Content-Security-Policy source that allows one inline
// element with this content.
func cspHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Report writes the dashboard of one study as a single HTML file that
// needs nothing else: the style, the script and data (as JSON in a
// <script type="application/json" id="hps-data"> element) are inside it.
func Report(w io.Writer, data ReportData) error {
	if data.Study == nil {
		return errors.New("dashboard: a report needs a study")
	}
	if data.Trials == nil {
		data.Trials = []*client.Trial{}
	}
	// json.Marshal escapes <, > and &, so the data cannot end its script
	// element.
	js, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("dashboard: encode the report's data: %w", err)
	}
	return reportTemplate.Execute(w, reportPage{
		Title:  data.Study.Name + " · hpsearch report",
		Policy: reportPolicy,
		Style:  template.CSS(style.body),
		Script: template.JS(script.body),
		Data:   template.JS(js),
	})
}
