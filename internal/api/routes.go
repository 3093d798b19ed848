package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hpsearch/hpsearch/client"
)

// route is one operation of the API. Path is in the form both
// http.ServeMux and OpenAPI use: /v1/studies/{study}.
type route struct {
	method, path string
	// public routes need no token.
	public  bool
	handler func(http.ResponseWriter, *http.Request) error
}

// routeTable lists every route; the OpenAPI document must describe exactly
// these.
func (s *Server) routeTable() []route {
	return []route{
		{method: http.MethodGet, path: "/healthz", public: true, handler: s.health},
		{method: http.MethodGet, path: "/openapi.json", public: true, handler: serveOpenAPI},
		{method: http.MethodGet, path: "/metrics", handler: s.serveMetrics},
		{method: http.MethodGet, path: "/v1/studies", handler: s.listStudies},
		{method: http.MethodPost, path: "/v1/studies", handler: s.createStudy},
		{method: http.MethodGet, path: "/v1/studies/{study}", handler: s.getStudy},
		{method: http.MethodPost, path: "/v1/studies/{study}/stop", handler: s.stopStudy},
		{method: http.MethodPost, path: "/v1/studies/{study}/resume", handler: s.resumeStudy},
		{method: http.MethodPost, path: "/v1/studies/{study}/cancel", handler: s.cancelStudy},
		{method: http.MethodGet, path: "/v1/studies/{study}/trials", handler: s.listTrials},
		{method: http.MethodGet, path: "/v1/studies/{study}/trials/{number}", handler: s.getTrial},
		{method: http.MethodGet, path: "/v1/studies/{study}/best", handler: s.best},
		{method: http.MethodGet, path: "/v1/studies/{study}/events", handler: s.events},
		{method: http.MethodPost, path: "/v1/studies/{study}/ask", handler: s.ask},
		{method: http.MethodPost, path: "/v1/studies/{study}/trials/{number}/tell", handler: s.tell},
	}
}

// routes returns the handler of every route, behind authentication, the
// body limit and the request counter. Requests no route matches get a
// JSON 404, or 405 when the path has routes for other methods.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	table := s.routeTable()
	for _, rt := range table {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	mux.Handle("/", s.wrap(route{path: "unmatched", public: true, handler: func(w http.ResponseWriter, r *http.Request) error {
		var allow []string
		for _, rt := range table {
			probe := r.Clone(r.Context())
			probe.Method = rt.method
			if _, pattern := mux.Handler(probe); pattern == rt.method+" "+rt.path {
				allow = append(allow, rt.method)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return errorf(http.StatusMethodNotAllowed, client.CodeMethod, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return errorf(http.StatusNotFound, client.CodeNoRoute, "no route %s %s; GET /openapi.json lists them", r.Method, r.URL.Path)
	}}))
	return mux
}

// wrap adds authentication, the body limit, error responses and the
// request counter to a route's handler.
func (s *Server) wrap(rt route) http.Handler {
	label := strings.TrimSpace(rt.method + " " + rt.path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { s.metrics.request(label, sw.status) }()
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		err := error(nil)
		if !rt.public {
			err = s.authenticate(r)
		}
		if err == nil {
			err = rt.handler(sw, r)
		}
		if err == nil {
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			s.cfg.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
			ae = errorf(http.StatusInternalServerError, client.CodeInternal, "%v", err)
		}
		if sw.wrote {
			return
		}
		writeError(sw, ae)
	})
}

// statusWriter remembers the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// pathNumber reads a trial number from the path.
func pathNumber(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n < 0 {
		return 0, invalid("number", "trial number %q is not a number of 0 or more", r.PathValue("number"))
	}
	return n, nil
}
