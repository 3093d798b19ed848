package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hpsearch/hpsearch/client"
)

// Follow reconnects after a broken stream with the ID of the last event
// it saw, and stops at study_finished.
func TestFollowResumes(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if r.URL.Path != "/v1/studies/s/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.Header.Get("Last-Event-ID") {
		case "":
			fmt.Fprint(w, ": keep-alive\n\nid: 1\ndata: {\"kind\": \"study_started\"}\n\nid: 2\ndata: {\"kind\": \"trial_started\",\n")
			w.(http.Flusher).Flush()
			// Break the connection in the middle of event 2.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "1":
			fmt.Fprint(w, "id: 2\ndata: {\"kind\": \"trial_started\"}\n\nid: 3\ndata: {\"kind\": \"study_finished\", \"state\": \"completed\"}\n\nid: 4\ndata: {\"kind\": \"trial_started\"}\n\n")
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	err = c.Follow(context.Background(), "s", 0, func(e *client.Event) error {
		got = append(got, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 3]" || fmt.Sprint(asked) != "[ 1]" {
		t.Fatalf("events %v after requests with Last-Event-ID %q; want [1 2 3] after \"\" and \"1\"", got, asked)
	}
}

// Error answers become *Error, matched by status with errors.Is.
func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/studies/taken/resume":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error": {"code": "cancelled", "message": "study \"taken\" was cancelled"}}`)
		case "/v1/studies":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": {"code": "invalid_space", "message": "s.yaml:2:3: bad", "line": 2, "column": 3, "problems": [{"file": "s.yaml", "line": 2, "column": 3, "message": "bad"}]}}`)
		default:
			http.Error(w, "gateway trouble", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.ResumeStudy(ctx, "taken", nil, "")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeCancelled || !errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrNotFound) || err.Error() != `study "taken" was cancelled` {
		t.Fatalf("409: %#v", err)
	}
	_, err = c.CreateStudy(ctx, []byte("name: x\n"), nil)
	if !errors.As(err, &ce) || !errors.Is(err, client.ErrInvalid) || len(ce.Problems) != 1 || ce.Line != 2 || ce.Column != 3 || ce.Problems[0].File != "s.yaml" {
		t.Fatalf("400: %#v", err)
	}
	_, err = c.GetStudy(ctx, "x")
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadGateway || ce.Message != "502 Bad Gateway: gateway trouble" {
		t.Fatalf("502: %#v", err)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}
