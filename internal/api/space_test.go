package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// manyParams declares n float parameters.
func manyParams(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  p%d: {type: float, min: 0, max: 1}\n", i)
	}
	return b.String()
}

// Malformed space documents get 400 with every problem at its line and
// column, as the CLI prints them, and create nothing.
func TestMalformedSpace(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name, doc string
		mode      client.Mode
		// want are the problems' "file:line:col: " prefixes.
		want []string
		// same says the problems are exactly those `hpsearch validate`
		// prints for the document.
		same bool
	}{
		{name: "YAML syntax", doc: "name: x\nobjective: {metric: loss, goal: minimize\nmax_trials: 3\n", want: []string{"bad.yaml:3:1: YAML syntax error"}, same: true},
		{name: "several problems", same: true, doc: `name: broken
objective:
  metrc: loss
parameters:
  inverted: {type: float, min: 5, max: 1}
trainer: {builtin: digits-mlp}
max_trials: 3
`, want: []string{"bad.yaml:3:3: unknown key \"metrc\"", "bad.yaml:3:3: objective is missing required key \"goal\"", "bad.yaml:5:32: "}},
		{name: "JSON", same: true, doc: "{\n  \"name\": \"j\",\n  \"objective\": {\"metric\": \"loss\", \"goal\": \"minimize\"},\n  \"parameters\": {\"x\": {\"type\": \"float\", \"min\": 0, \"max\": 1}},\n  \"trainer\": {\"builtin\": \"digits-mlp\"},\n  \"max_trials\": \"many\"\n}\n",
			want: []string{"bad.yaml:6:17: "}},
		{name: "no trainer in run mode", same: true, doc: "name: x\nobjective: {metric: loss, goal: minimize}\nparameters: {x: {type: float, min: 0, max: 1}}\nmax_trials: 3\n", want: []string{"bad.yaml:1:1: "}},
		{name: "a trainer in ask/tell mode", mode: client.ModeAskTell, doc: "name: x\nobjective: {metric: loss, goal: minimize}\nparameters: {x: {type: float, min: 0, max: 1}}\ntrainer: {builtin: digits-mlp}\nmax_trials: 3\n",
			want: []string{"bad.yaml:4:1: an ask/tell study runs no trainer"}},
		{name: "ask/tell keeps positions", mode: client.ModeAskTell, doc: "name: x\nobjective: {metric: loss, goal: minimize}\nparameters: {x: {type: float, min: 1, max: 0}}\nmax_trials: 3",
			want: []string{"bad.yaml:3:"}},
		{name: "ask/tell JSON keeps positions", mode: client.ModeAskTell, doc: `{"name": "x", "objective": {"metric": "loss", "goal": "sideways"}, "parameters": {"x": {"type": "float", "min": 0, "max": 1}}, "max_trials": 3}`,
			want: []string{"bad.yaml:1:55: "}},
		{name: "command trainer", doc: "name: x\nobjective: {metric: loss, goal: minimize}\nparameters: {x: {type: float, min: 0, max: 1}}\ntrainer:\n  command: [python3, train.py]\nmax_trials: 3\n",
			want: []string{"bad.yaml:5:3: this server runs no command trainers"}},
		{name: "sampler that cannot run", doc: "name: x\nobjective: {metric: loss, goal: minimize}\ntrainer: {builtin: digits-mlp}\nsampler: {type: sobol}\nmax_trials: 3\nparameters:\n" + manyParams(65),
			want: []string{"bad.yaml:4:1: sobol sampler: the space has 65 non-constant parameters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.c.CreateStudy(ctx, []byte(tc.doc), &client.CreateOptions{Mode: tc.mode, Filename: "bad.yaml"})
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("create: %v, want 400 invalid_space", err)
			}
			if ce.StatusCode != http.StatusBadRequest || ce.Code != client.CodeInvalidSpace || len(ce.Problems) == 0 || ce.Line != ce.Problems[0].Line || ce.Column != ce.Problems[0].Column {
				t.Fatalf("create: %d %s at %d:%d with %d problems", ce.StatusCode, ce.Code, ce.Line, ce.Column, len(ce.Problems))
			}
			var texts []string
			for _, p := range ce.Problems {
				texts = append(texts, (&spec.Error{File: p.File, Line: p.Line, Col: p.Column, Msg: p.Message}).Error())
			}
			if ce.Message != strings.Join(texts, "\n") {
				t.Errorf("message %q is not the problems %q", ce.Message, texts)
			}
			for i, w := range tc.want {
				if i >= len(texts) || !strings.HasPrefix(texts[i], w) {
					t.Errorf("problems %q, want problem %d to start %q", texts, i, w)
				}
			}
			if tc.same {
				_, derr := spec.Decode("bad.yaml", []byte(tc.doc))
				if derr == nil || derr.Error() != ce.Message {
					t.Errorf("the API says\n%s\nthe CLI says\n%v", ce.Message, derr)
				}
			}
		})
	}
	list, err := b.c.ListStudies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("malformed documents created %d studies", len(list))
	}
}

// Other bad requests name the parameter or field at fault.
func TestBadRequests(t *testing.T) {
	b := setup(t, func(c *api.Config) { c.MaxBodyBytes = 256 })
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, field        string
	}{
		{"POST", "/v1/studies?mode=batch", tinySpace, 400, client.CodeInvalid, "mode"},
		{"POST", "/v1/studies?start=maybe", tinySpace, 400, client.CodeInvalid, "start"},
		{"POST", "/v1/studies", "", 400, client.CodeInvalid, "body"},
		{"POST", "/v1/studies", strings.Repeat("#", 300), 413, client.CodeTooLarge, ""},
		{"GET", "/v1/studies/nosuch", "", 404, client.CodeNotFound, ""},
		{"GET", "/v1/studies/nosuch/trials?limit=0", "", 400, client.CodeInvalid, "limit"},
		{"GET", "/v1/studies/nosuch/trials?state=done", "", 400, client.CodeInvalid, "state"},
		{"GET", "/v1/studies/nosuch/trials?sort=name", "", 400, client.CodeInvalid, "sort"},
		{"GET", "/v1/studies/nosuch/trials?metrics=no", "", 400, client.CodeInvalid, "metrics"},
		{"GET", "/v1/studies/nosuch/trials/x", "", 400, client.CodeInvalid, "number"},
		{"GET", "/v1/studies/nosuch/events?last_event_id=x", "", 400, client.CodeInvalid, "last_event_id"},
		{"DELETE", "/v1/studies", "", 405, client.CodeMethod, ""},
		{"GET", "/v2/studies", "", 404, client.CodeNoRoute, ""},
	} {
		req, err := http.NewRequest(tc.method, b.url+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb client.ErrorBody
		err = jsonDecode(resp.Body, &eb)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || eb.Error.Code != tc.code || eb.Error.Field != tc.field {
			t.Errorf("%s %s: %d %+v (%v), want %d %s field %q", tc.method, tc.path, resp.StatusCode, eb.Error, err, tc.status, tc.code, tc.field)
		}
	}
}
