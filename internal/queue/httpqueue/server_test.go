package httpqueue_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/httpqueue"
)

// answer is a raw answer of the server.
type answer struct {
	status int
	header http.Header
	// code, message and tokens are those of an error answer.
	code    string
	message string
	tokens  []string
}

// send sends a raw request with the Authorization header auth (none when
// empty) and body (none when empty).
func send(t *testing.T, method, url, auth, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode >= 400 {
		var e struct {
			Error struct {
				Code    string   `json:"code"`
				Message string   `json:"message"`
				Tokens  []string `json:"tokens"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", method, url, resp.StatusCode, data)
		}
		a.code, a.message, a.tokens = e.Error.Code, e.Error.Message, e.Error.Tokens
	}
	return a
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	bq := openBolt(t, queue.Config{})
	if _, err := bq.Enqueue(t.Context(), queue.Job{ID: "ready"}, queue.Job{ID: "leased"}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	leases, err := bq.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: time.Hour})
	if err != nil || len(leases) != 1 {
		t.Fatalf("Lease = %+v, %v", leases, err)
	}
	held := leases[0]
	url := serve(t, bq, httpqueue.HandlerOptions{})

	for _, auth := range []string{
		"",
		"Bearer wrong-token",
		"Bearer " + testToken + "x",
		"Bearer ",
		"Basic " + testToken,
		testToken,
	} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, "/enqueue", `{"jobs": [{"id": "intruder"}]}`},
			{http.MethodPost, "/lease", `{"max": 10, "visibility": "1m"}`},
			{http.MethodPost, "/ack", `{"tokens": ["` + held.Token + `"]}`},
			{http.MethodPost, "/release", `{"token": "` + held.Token + `"}`},
			{http.MethodGet, "/stats", ""},
			{http.MethodGet, "/no-such-route", ""},
		} {
			a := send(t, r.method, url+r.path, auth, r.body)
			if a.status != http.StatusUnauthorized || a.code != "unauthorized" || a.message == "" {
				t.Errorf("%s %s with Authorization %q = %d %s %q, want 401 unauthorized with a message", r.method, r.path, auth, a.status, a.code, a.message)
			}
			if h := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer ") {
				t.Errorf("%s %s with Authorization %q: WWW-Authenticate %q, want a Bearer challenge", r.method, r.path, auth, h)
			}
		}
	}

	noToken := httpqueue.NewClient(url, httpqueue.ClientOptions{})
	t.Cleanup(func() { _ = noToken.Close() })
	for _, c := range []*httpqueue.Client{newClient(t, url, httpqueue.ClientOptions{Token: "wrong-token"}), noToken} {
		_, err := c.Enqueue(t.Context(), queue.Job{ID: "intruder"})
		var se *httpqueue.ServerError
		if !errors.Is(err, httpqueue.ErrUnauthorized) || !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
			t.Errorf("Enqueue with a wrong or no token = %v, want ErrUnauthorized from a 401", err)
		}
	}

	// Nothing changed.
	if st, err := bq.Stats(t.Context()); err != nil || st != (queue.Stats{Ready: 1, Leased: 1}) {
		t.Errorf("Stats = %+v, %v; want 1 ready and 1 leased as before", st, err)
	}
	if info, err := bq.Get(t.Context(), held.Job.ID); err != nil || info.State != queue.StateLeased || info.Token != held.Token {
		t.Errorf("Get(%s) = %+v, %v; want leased with the same token", held.Job.ID, info, err)
	}
	// The scheme is case-insensitive.
	if a := send(t, http.MethodGet, url+"/stats", "bearer "+testToken, ""); a.status != http.StatusOK {
		t.Errorf("GET /stats with a valid token = %d %s %s, want 200", a.status, a.code, a.message)
	}
}

func TestHandlerWithoutVerifyPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Handler without Verify did not panic")
		}
	}()
	httpqueue.Handler(openBolt(t, queue.Config{}), httpqueue.HandlerOptions{})
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 1024
	bq := openBolt(t, queue.Config{})
	url := serve(t, bq, httpqueue.HandlerOptions{MaxBodyBytes: limit})
	c := newClient(t, url, httpqueue.ClientOptions{})

	_, err := c.Enqueue(t.Context(), queue.Job{ID: "big", Payload: bytes.Repeat([]byte("x"), 2*limit)})
	var se *httpqueue.ServerError
	if !errors.As(err, &se) || se.Status != http.StatusRequestEntityTooLarge || se.Code != "too_large" || !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Enqueue of a body over the limit = %v; want a 413 too_large that wraps ErrInvalid", err)
	}
	if a := send(t, http.MethodPost, url+"/enqueue", "Bearer "+testToken, `{"jobs": [{"id": "`+strings.Repeat("y", 2*limit)+`"}]}`); a.status != http.StatusRequestEntityTooLarge || a.code != "too_large" {
		t.Errorf("raw POST over the limit = %d %s, want 413 too_large", a.status, a.code)
	}
	if st, err := bq.Stats(t.Context()); err != nil || st != (queue.Stats{}) {
		t.Errorf("Stats = %+v, %v; want an empty queue", st, err)
	}
	if _, err := c.Enqueue(t.Context(), queue.Job{ID: "small", Payload: bytes.Repeat([]byte("x"), limit/4)}); err != nil {
		t.Errorf("Enqueue of a body under the limit: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bq := openBolt(t, queue.Config{})
	url := serve(t, bq, httpqueue.HandlerOptions{})
	c := newClient(t, url, httpqueue.ClientOptions{})
	if _, err := c.Enqueue(ctx, queue.Job{ID: "a"}, queue.Job{ID: "b"}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	leases, err := c.Lease(ctx, queue.LeaseParams{Max: 2, Visibility: time.Hour, Wait: patience})
	if err != nil || len(leases) != 2 {
		t.Fatalf("Lease = %+v, %v; want 2 leases", leases, err)
	}
	stale, valid := leases[0].Token, leases[1].Token
	if err := c.Ack(ctx, stale); err != nil {
		t.Fatalf("Ack: %v", err)
	}

	err = c.Ack(ctx, stale, "bogus", valid)
	var lost *queue.LeaseLostError
	if !errors.Is(err, queue.ErrLeaseLost) || !errors.As(err, &lost) || !slices.Equal(lost.Tokens, []string{stale, "bogus"}) {
		t.Errorf("Ack with stale tokens = %v; want a LeaseLostError listing %s and bogus", err, stale)
	}
	if st, err := c.Stats(ctx); err != nil || st != (queue.Stats{}) {
		t.Errorf("Stats = %+v, %v; want the valid token acked", st, err)
	}

	for _, tc := range []struct {
		op   string
		call func() error
	}{
		{"extend", func() error { _, err := c.Extend(ctx, stale, time.Minute); return err }},
		{"nack", func() error { return c.Nack(ctx, stale, "boom") }},
		{"release", func() error { return c.Release(ctx, stale) }},
	} {
		err := tc.call()
		var lost *queue.LeaseLostError
		if !errors.As(err, &lost) || !slices.Equal(lost.Tokens, []string{stale}) {
			t.Errorf("%s with a stale token = %v; want a LeaseLostError listing it", tc.op, err)
		}
		if want := "httpqueue: " + tc.op + " (POST " + url + "/" + tc.op + "): server answered 409 Conflict: "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s error %q does not start with %q", tc.op, err, want)
		}
	}

	if _, err := c.Get(ctx, "nope"); !errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrInvalid) {
		t.Errorf("Get of an unknown job = %v, want ErrNotFound", err)
	}
	_, err = c.Lease(ctx, queue.LeaseParams{Max: 0, Visibility: time.Minute})
	if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "lease max 0 is less than 1") {
		t.Errorf("Lease(Max: 0) = %v, want ErrInvalid with the server's message", err)
	}
	if _, err := c.Enqueue(ctx, queue.Job{ID: "ok"}, queue.Job{ID: ""}); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "empty ID") {
		t.Errorf("Enqueue of a job without ID = %v, want ErrInvalid with the server's message", err)
	}
}

func TestServedQueueClosed(t *testing.T) {
	t.Parallel()
	bq := openBolt(t, queue.Config{})
	s := &spy{Queue: bq}
	c := newClient(t, serve(t, s, httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	res := leaseAsync(t, t.Context(), c, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
	eventually(t, "the server waits in Lease", func() bool { return len(s.began()) > 0 })
	if err := bq.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := <-res
	var se *httpqueue.ServerError
	if !errors.Is(r.err, queue.ErrClosed) || !errors.As(r.err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Errorf("Lease waiting when the served queue closed = %v, want ErrClosed from a 503", r.err)
	}
	if _, err := c.Stats(t.Context()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Stats of a closed queue = %v, want ErrClosed", err)
	}
}

func TestWrongURL(t *testing.T) {
	t.Parallel()
	url := serve(t, openBolt(t, queue.Config{}), httpqueue.HandlerOptions{})
	c := newClient(t, strings.TrimSuffix(url, "/queue")+"/elsewhere", httpqueue.ClientOptions{})
	_, err := c.Get(t.Context(), "a")
	var se *httpqueue.ServerError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound || se.Code != "no_route" || errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Get through a wrong prefix = %v; want a 404 no_route that is not ErrNotFound", err)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	c = newClient(t, down.URL+"/queue", httpqueue.ClientOptions{})
	_, err = c.Stats(t.Context())
	if want := "httpqueue: stats (GET " + down.URL + "/queue/stats): "; err == nil || !strings.HasPrefix(err.Error(), want) || errors.As(err, &se) {
		t.Errorf("Stats of a server that is down = %v; want a transport error that starts with %q", err, want)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	url := serve(t, openBolt(t, queue.Config{}), httpqueue.HandlerOptions{})
	auth := "Bearer " + testToken
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, allow        string
	}{
		{http.MethodGet, "/lease", "", http.StatusMethodNotAllowed, "method", "POST"},
		{http.MethodPost, "/stats", `{}`, http.StatusMethodNotAllowed, "method", "GET"},
		{http.MethodDelete, "/jobs/a", "", http.StatusMethodNotAllowed, "method", "GET"},
		{http.MethodGet, "/nothing", "", http.StatusNotFound, "no_route", ""},
		{http.MethodPost, "/lease", `{"max": 1, "visibility": "1m", "bogus": 1}`, http.StatusBadRequest, "invalid", ""},
		{http.MethodPost, "/lease", `{"max": 1, "visibility": 60}`, http.StatusBadRequest, "invalid", ""},
		{http.MethodPost, "/lease", `{"max": 1, "visibility": "soon"}`, http.StatusBadRequest, "invalid", ""},
		{http.MethodPost, "/ack", ``, http.StatusBadRequest, "invalid", ""},
		{http.MethodPost, "/ack", `{"tokens": []} {}`, http.StatusBadRequest, "invalid", ""},
		{http.MethodPost, "/ack", `{"tokens": []}`, http.StatusNoContent, "", ""},
		{http.MethodGet, "/stats", ``, http.StatusOK, "", ""},
	} {
		a := send(t, tc.method, url+tc.path, auth, tc.body)
		if a.status != tc.status || a.code != tc.code || a.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s %s = %d %q (Allow %q) %s; want %d %q (Allow %q)",
				tc.method, tc.path, tc.body, a.status, a.code, a.header.Get("Allow"), a.message, tc.status, tc.code, tc.allow)
		}
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, path string }{
		{"/", ""},
		{"v1/queue/", "/v1/queue"},
	} {
		bq := openBolt(t, queue.Config{})
		srv := httptest.NewServer(httpqueue.Handler(bq, httpqueue.HandlerOptions{Verify: httpqueue.SharedToken(testToken), Prefix: tc.prefix}))
		t.Cleanup(srv.Close)
		c := newClient(t, srv.URL+tc.path, httpqueue.ClientOptions{})
		if _, err := c.Enqueue(t.Context(), queue.Job{ID: "a"}); err != nil {
			t.Errorf("Prefix %q: Enqueue through %s: %v", tc.prefix, srv.URL+tc.path, err)
		}
		if info, err := bq.Get(t.Context(), "a"); err != nil || info.State != queue.StateReady {
			t.Errorf("Prefix %q: Get(a) = %+v, %v; want it ready", tc.prefix, info, err)
		}
	}
}

func TestJobIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t, serve(t, openBolt(t, queue.Config{}), httpqueue.HandlerOptions{}), httpqueue.ClientOptions{})
	ids := []string{"study-1/trial/3/segment/0", "..", ".", "a/../b", "/lead", "trail/", "x//y", "sp ace?q=1#frag%2F&", "ünïcode"}
	var jobs []queue.Job
	for i, id := range ids {
		jobs = append(jobs, queue.Job{ID: id, Payload: []byte{byte(i), 0, 255}, Delay: time.Duration(i) * time.Hour})
	}
	if res, err := c.Enqueue(ctx, jobs...); err != nil || !slices.Equal(res.Added, ids) {
		t.Fatalf("Enqueue = %+v, %v; want all added", res, err)
	}
	for _, j := range jobs {
		info, err := c.Get(ctx, j.ID)
		if err != nil || info.Job.ID != j.ID || !bytes.Equal(info.Job.Payload, j.Payload) || info.Job.Delay != j.Delay {
			t.Errorf("Get(%q) = %+v, %v; want the job as enqueued", j.ID, info.Job, err)
		}
	}
	if _, err := c.Get(ctx, ""); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Get(\"\") = %v, want ErrNotFound", err)
	}
}
