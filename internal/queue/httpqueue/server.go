package httpqueue

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// Defaults of HandlerOptions and, for MaxWait, of ClientOptions.
const (
	DefaultPrefix       = "/queue"
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxWait      = 20 * time.Second
)

// releaseTimeout bounds the release of the leases of a client that went
// away.
const releaseTimeout = 10 * time.Second

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// Verify reports whether a bearer token is valid. Required: Handler
	// panics without it. SharedToken makes one for a single token; the
	// Valid method of api.Tokens (the token hashes of hpsearch serve) fits
	// too.
	Verify func(token string) bool
	// Prefix is the path the routes are under. Defaults to "/queue"; "/"
	// serves them at the root.
	Prefix string
	// MaxBodyBytes limits request bodies; a larger one is refused with 413.
	// Defaults to 4 MiB.
	MaxBodyBytes int64
	// MaxWait caps the wait of one lease request; the client spends a
	// longer wait in several requests. The http.Server's WriteTimeout, and
	// the idle timeout of any proxy in between, must be longer. Defaults to
	// 20 seconds.
	MaxWait time.Duration
	// Logger logs what the client does not see: failures of the queue
	// (answered with 500), refused tokens, leases released because their
	// client went away. Defaults to slog.Default().
	Logger *slog.Logger
}

func (o HandlerOptions) withDefaults() HandlerOptions {
	if o.Verify == nil {
		panic("httpqueue: HandlerOptions.Verify is nil: the queue must not be served without authentication")
	}
	switch p := strings.Trim(o.Prefix, "/"); {
	case o.Prefix == "":
		o.Prefix = DefaultPrefix
	case p == "":
		o.Prefix = ""
	default:
		o.Prefix = "/" + p
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// SharedToken returns a HandlerOptions.Verify that accepts token and no
// other. It compares SHA-256 digests with subtle.ConstantTimeCompare, so
// the time it takes tells nothing of how close a guess was. An empty token
// accepts nothing.
func SharedToken(token string) func(string) bool {
	want := sha256.Sum256([]byte(token))
	return func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
}

// Handler serves q over HTTP under opts.Prefix, as the package doc
// describes. Every request needs a bearer token that opts.Verify accepts.
func Handler(q queue.Queue, opts HandlerOptions) http.Handler {
	h := &handler{q: q, opts: opts.withDefaults(), mux: http.NewServeMux()}
	p := h.opts.Prefix
	for _, rt := range []struct {
		pattern string
		serve   func(*http.Request) (any, error)
	}{
		{"POST " + p + "/enqueue", h.enqueue},
		{"POST " + p + "/lease", h.lease},
		{"POST " + p + "/extend", h.extend},
		{"POST " + p + "/ack", h.ack},
		{"POST " + p + "/nack", h.nack},
		{"POST " + p + "/release", h.release},
		{"GET " + p + "/jobs/{id...}", h.get},
		{"GET " + p + "/stats", h.stats},
		{"GET " + p + "/dead", h.dead},
	} {
		h.mux.Handle(rt.pattern, h.route(rt.serve))
	}
	h.mux.HandleFunc("/", h.unmatched)
	return h
}

type handler struct {
	q    queue.Queue
	opts HandlerOptions
	mux  *http.ServeMux
}

// ServeHTTP limits the body and authenticates the request before it is
// routed, so that a client without a valid token learns nothing.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	if err := h.authenticate(r); err != nil {
		h.opts.Logger.Warn("httpqueue: refused a request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.body.Message)
		writeError(w, err)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// httpError is an error answer.
type httpError struct {
	status int
	body   wireError
}

func (e *httpError) Error() string { return e.body.Message }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, body: wireError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func (h *handler) authenticate(r *http.Request) *httpError {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	switch {
	case scheme == "" && token == "":
		return errorf(http.StatusUnauthorized, codeUnauthorized, "this request needs the queue's bearer token: send the header Authorization: Bearer TOKEN")
	case !strings.EqualFold(scheme, "Bearer") || token == "":
		return errorf(http.StatusUnauthorized, codeUnauthorized, "the Authorization header must be Bearer TOKEN")
	case !h.opts.Verify(token):
		return errorf(http.StatusUnauthorized, codeUnauthorized, "the bearer token is not one this queue accepts: give the worker the token of this coordinator")
	}
	return nil
}

// route turns serve into a handler: a nil result is answered with 204, any
// other with 200 and its JSON, an error with its error answer. Nothing is
// written to a client that went away.
func (h *handler) route(serve func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := serve(r)
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			writeError(w, h.answer(r, err))
			return
		}
		if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// answer maps err to its error answer.
func (h *handler) answer(r *http.Request, err error) *httpError {
	var he *httpError
	var lost *queue.LeaseLostError
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &lost):
		e := errorf(http.StatusConflict, codeLeaseLost, "%v", err)
		e.body.Tokens = lost.Tokens
		return e
	case errors.Is(err, queue.ErrLeaseLost):
		return errorf(http.StatusConflict, codeLeaseLost, "%v", err)
	case errors.Is(err, queue.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "%v", err)
	case errors.Is(err, queue.ErrInvalid):
		return errorf(http.StatusBadRequest, codeInvalid, "%v", err)
	case errors.Is(err, queue.ErrClosed):
		return errorf(http.StatusServiceUnavailable, codeClosed, "%v", err)
	}
	h.opts.Logger.Error("httpqueue: queue call failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return errorf(http.StatusInternalServerError, codeInternal, "%v", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *httpError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hpsearch-queue"`)
	}
	writeJSON(w, e.status, errorBody{Error: e.body})
}

// decode reads the JSON body of r into v, refusing unknown fields and
// bodies over the limit.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, codeTooLarge,
			"the request body is larger than the queue server's limit of %d bytes: send fewer or smaller jobs per call", tooLarge.Limit)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, codeInvalid, "read the request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errorf(http.StatusBadRequest, codeInvalid, "the request body is empty: send a JSON object")
		}
		return errorf(http.StatusBadRequest, codeInvalid, "the request body is not a valid request of %s: %v", r.URL.Path, err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, codeInvalid, "the request body has data after its JSON object")
	}
	return nil
}

// staleToken makes the error of a call that names one token list that
// token when it is stale: the queue's error need not list it.
func staleToken(err error, token string) error {
	var lost *queue.LeaseLostError
	if !errors.Is(err, queue.ErrLeaseLost) || errors.As(err, &lost) {
		return err
	}
	e := errorf(http.StatusConflict, codeLeaseLost, "%v: %s", err, token)
	e.body.Tokens = []string{token}
	return e
}
