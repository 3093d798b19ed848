package front

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// executable writes an executable file for a function's bootstrap.
func executable(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseFunction(t *testing.T) {
	t.Parallel()
	bs := executable(t)
	f, err := ParseFunction("name=hpsearch-trainer,bootstrap=" + bs + ",memory=1024,timeout=30s,concurrency=4,env=AWS_ENDPOINT_URL=http://127.0.0.1:4566;AWS_REGION=us-east-1,env=X=a=b")
	if err != nil {
		t.Fatalf("ParseFunction: %v", err)
	}
	if f.Name != "hpsearch-trainer" || f.Bootstrap != bs || f.MemoryMB != 1024 || time.Duration(f.Timeout) != 30*time.Second || f.Concurrency != 4 {
		t.Errorf("ParseFunction = %+v", f)
	}
	if f.Env["AWS_ENDPOINT_URL"] != "http://127.0.0.1:4566" || f.Env["AWS_REGION"] != "us-east-1" || f.Env["X"] != "a=b" || len(f.Env) != 3 {
		t.Errorf("env = %v", f.Env)
	}

	f, err = ParseFunction("name=f,bootstrap=" + bs)
	if err != nil {
		t.Fatalf("ParseFunction with defaults: %v", err)
	}
	if f.MemoryMB != 128 || time.Duration(f.Timeout) != 3*time.Second || f.Concurrency != 1 {
		t.Errorf("defaults: %+v, want Lambda's 128 MB and 3 s, and one environment", f)
	}

	for _, tc := range []struct{ spec, want string }{
		{"name=f", "bootstrap: required"},
		{"name=f,bootstrap=/no/such/file", "no such file"},
		{"name=f,bootstrap=" + filepath.Dir(bs), "not an executable file"},
		{"name=bad/name,bootstrap=" + bs, "letters, digits"},
		{"name=f,bootstrap=" + bs + ",memory=64", "memory 64 MB"},
		{"name=f,bootstrap=" + bs + ",memory=lots", "memory"},
		{"name=f,bootstrap=" + bs + ",timeout=1500ms", "whole number of seconds"},
		{"name=f,bootstrap=" + bs + ",timeout=901s", "whole number of seconds"},
		{"name=f,bootstrap=" + bs + ",concurrency=-1", "at least 1"},
		{"name=f,bootstrap=" + bs + ",env=NOVALUE", "not NAME=VALUE"},
		{"name=f,bootstrap=" + bs + ",colour=blue", `unknown key "colour"`},
		{"name=f,bootstrap", "not key=value"},
	} {
		if _, err := ParseFunction(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFunction(%q) = %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	bs := executable(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"functions": [{"name": "a", "bootstrap": "`+bs+`", "memory_mb": 512, "timeout": "10s", "env": {"K": "v,;w"}}, {"name": "b", "bootstrap": "`+bs+`"}]}`)
	fns, err := LoadConfig(good)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if len(fns) != 2 || fns[0].MemoryMB != 512 || time.Duration(fns[0].Timeout) != 10*time.Second || fns[0].Env["K"] != "v,;w" || fns[1].MemoryMB != 128 {
		t.Errorf("LoadConfig = %+v", fns)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"unknown.json": {`{"functions": [{"name": "a", "bootstrap": "` + bs + `", "memory": 512}]}`, `unknown field "memory"`},
		"invalid.json": {`{"functions": [{"name": "a", "bootstrap": "` + bs + `", "timeout": "soon"}]}`, "soon"},
		"bad.json":     {`{"functions": [{"name": "a"}]}`, "bootstrap: required"},
	} {
		if _, err := LoadConfig(write(name, tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%s) = %v, want an error with %q", name, err, tc.want)
		}
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.json")); err == nil {
		t.Errorf("LoadConfig of a missing file: no error")
	}
}

func TestParseFunctionName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, name, qualifier string }{
		{"f", "f", ""},
		{"my-function_2", "my-function_2", ""},
		{"f:$LATEST", "f", "$LATEST"},
		{"f:live", "f", "live"},
		{"123456789012:function:f", "f", ""},
		{"123456789012:function:f:7", "f", "7"},
		{"arn:aws:lambda:eu-west-1:000000000000:function:f", "f", ""},
		{"arn:aws:lambda:eu-west-1:000000000000:function:f:$LATEST", "f", "$LATEST"},
	} {
		name, q, err := parseFunctionName(tc.in)
		if err != nil || name != tc.name || q != tc.qualifier {
			t.Errorf("parseFunctionName(%q) = %q, %q, %v; want %q, %q", tc.in, name, q, err, tc.name, tc.qualifier)
		}
	}
	for _, in := range []string{"", "f:", "a:b:c", "arn:aws:s3:eu-west-1:1:function:f", "arn:aws:lambda:r:a:layer:f", "f/g", strings.Repeat("f", 65), "1:function:f:v:w"} {
		if _, _, err := parseFunctionName(in); err == nil {
			t.Errorf("parseFunctionName(%q): no error", in)
		}
	}
}
