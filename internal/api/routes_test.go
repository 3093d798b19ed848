package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// openAPIDoc is the part of the OpenAPI document the test checks.
type openAPIDoc struct {
	OpenAPI  string                                 `json:"openapi"`
	Security []map[string][]string                  `json:"security"`
	Paths    map[string]map[string]openAPIOperation `json:"paths"`
}

type openAPIOperation struct {
	OperationID string                 `json:"operationId"`
	Security    *[]map[string][]string `json:"security"`
	Responses   map[string]any         `json:"responses"`
}

// The OpenAPI document describes exactly the server's routes, public
// routes are marked as needing no token, and every documented operation
// reaches its handler.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Fatalf("openapi.json: version %q, security %v; want 3.x with bearer security by default", doc.OpenAPI, doc.Security)
	}
	st, err := localstate.Open(t.TempDir(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Store: st.Store, NoAuth: true, Wire: func(context.Context, *spec.Spec) (coordinator.Config, func(), error) {
		return coordinator.Config{}, nil, errors.New("no backend in this test")
	}})
	if err != nil {
		t.Fatal(err)
	}

	documented := map[string]openAPIOperation{}
	ids := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			documented[key] = op
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s: operationId %q is empty or used twice", key, op.OperationID)
			}
			ids[op.OperationID] = true
			if len(op.Responses) == 0 {
				t.Errorf("%s documents no response", key)
			}
		}
	}
	var served []string
	for _, rt := range s.routeTable() {
		key := rt.method + " " + rt.path
		served = append(served, key)
		op, ok := documented[key]
		if !ok {
			t.Errorf("route %s is not in openapi.json", key)
			continue
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != rt.public {
			t.Errorf("%s: public in openapi.json %v, in the server %v", key, public, rt.public)
		}
		if !rt.public && op.Responses["401"] == nil {
			t.Errorf("%s needs a token but documents no 401", key)
		}
	}
	for key := range documented {
		if !slices.Contains(served, key) {
			t.Errorf("openapi.json documents %s, which the server does not serve", key)
		}
	}

	// Every route reaches a handler: whatever it answers, it is not the
	// answer to a path or method no route has.
	h := s.Handler()
	for _, key := range served {
		method, path, _ := strings.Cut(key, " ")
		path = strings.NewReplacer("{study}", "nosuch", "{number}", "0").Replace(path)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		var eb client.ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &eb)
		if rec.Code == http.StatusMethodNotAllowed || (eb.Error != nil && eb.Error.Code == client.CodeNoRoute) {
			t.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/v1/studies/x/stop", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodPost {
		t.Errorf("PUT on a POST route: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}
