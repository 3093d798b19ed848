package front

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	fn := Function{Name: "f", Timeout: Duration(30 * time.Second)}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const id = "6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55"
	for _, tc := range []struct {
		name string
		out  rawOutcome
		// want: the answer's function error, reset, REPORT status and
		// error type, and the payload's errorType ("" for the function's
		// own payload, passed through).
		functionError, reset bool
		status, errorType    string
		payloadType          string
	}{
		{name: "success", out: rawOutcome{status: 200, body: []byte(`{"status":"completed"}`)}},
		{name: "empty response", out: rawOutcome{status: 200, body: []byte(`null`)}},
		{name: "returned error", out: rawOutcome{status: 200, body: []byte(`{"errorMessage":"no luck","errorType":"errorString"}`)}, functionError: true, payloadType: "errorString"},
		{name: "rie timeout", out: rawOutcome{status: 200, body: []byte("Task timed out after 30.00 seconds")}, functionError: true, reset: true, status: "timeout", payloadType: "Sandbox.Timedout"},
		{name: "front timeout", out: rawOutcome{err: errInvokeTimeout, timedOut: true}, functionError: true, reset: true, status: "timeout", payloadType: "Sandbox.Timedout"},
		{name: "panic", out: rawOutcome{status: 502, body: []byte(`{"errorMessage":"boom","errorType":"string","stackTrace":[]}`)}, functionError: true, reset: true, status: "error", errorType: "string", payloadType: "string"},
		{name: "exit", out: rawOutcome{status: 502}, functionError: true, reset: true, status: "error", errorType: "Runtime.ExitError", payloadType: "Runtime.ExitError"},
		{name: "rie crashed", out: rawOutcome{err: errors.New("connection reset"), exited: true}, functionError: true, reset: true, status: "error", errorType: "Runtime.ExitError", payloadType: "Runtime.ExitError"},
		{name: "rie confused", out: rawOutcome{status: 504}, functionError: true, reset: true, status: "error", errorType: "Runtime.ExitError", payloadType: "Runtime.ExitError"},
		{name: "rie exited after answering", out: rawOutcome{status: 200, body: []byte(`{}`), exited: true}, reset: true},
		{name: "response too large", out: rawOutcome{status: 200, body: make([]byte, maxResponseBytes+1)}, functionError: true, payloadType: "Function.ResponseSizeTooLarge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := decide(tc.out, fn, id, now)
			if a.functionError != tc.functionError || a.reset != tc.reset || a.status != tc.status || a.errorType != tc.errorType {
				t.Errorf("decide = function error %v, reset %v, status %q, error type %q; want %v, %v, %q, %q",
					a.functionError, a.reset, a.status, a.errorType, tc.functionError, tc.reset, tc.status, tc.errorType)
			}
			if tc.payloadType == "" {
				if string(a.payload) != string(tc.out.body) {
					t.Errorf("payload %q, want the function's %q", a.payload, tc.out.body)
				}
				return
			}
			var p struct{ ErrorMessage, ErrorType string }
			if err := json.Unmarshal(a.payload, &p); err != nil || p.ErrorType != tc.payloadType || p.ErrorMessage == "" {
				t.Errorf("payload %s (%v), want an error payload of type %s", a.payload, err, tc.payloadType)
			}
		})
	}
	a := decide(rawOutcome{status: 200, body: []byte("Task timed out after 30.00 seconds")}, fn, id, now)
	if want := `{"errorMessage":"RequestId: ` + id + ` Error: Task timed out after 30.00 seconds","errorType":"Sandbox.Timedout"}`; string(a.payload) != want {
		t.Errorf("timeout payload %s, want %s", a.payload, want)
	}
	if want := "2026-03-01T12:00:00.000Z " + id + " Task timed out after 30.00 seconds"; a.logLine != want {
		t.Errorf("timeout log line %q, want %q", a.logLine, want)
	}
}

func TestIsErrorPayload(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"errorMessage":"m","errorType":"T"}`:                   true,
		`{"errorType":"T","stackTrace":[{"path":"x"}]}`:          true,
		`{"errorMessage":"m"}`:                                   false,
		`{"errorMessage":"m","errorType":""}`:                    false,
		`{"errorMessage":"m","errorType":"T","status":"failed"}`: false,
		`{"status":"failed","error":"x"}`:                        false,
		`"errorType"`:                                            false,
		`Task timed out`:                                         false,
	} {
		if got := isErrorPayload([]byte(body)); got != want {
			t.Errorf("isErrorPayload(%s) = %v, want %v", body, got, want)
		}
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	const id = "6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55"
	for _, tc := range []struct {
		r    report
		want string
	}{
		{
			report{requestID: id, duration: 1234560 * time.Microsecond, memoryMB: 1024, maxMemoryBytes: 87 << 20},
			"REPORT RequestId: " + id + "\tDuration: 1234.56 ms\tBilled Duration: 1235 ms\tMemory Size: 1024 MB\tMax Memory Used: 87 MB\t",
		},
		{
			// The billed duration includes the init phase; memory rounds up.
			report{requestID: id, duration: 2 * time.Millisecond, init: 40500 * time.Microsecond, memoryMB: 128, maxMemoryBytes: 20<<20 + 1},
			"REPORT RequestId: " + id + "\tDuration: 2.00 ms\tBilled Duration: 43 ms\tMemory Size: 128 MB\tMax Memory Used: 21 MB\tInit Duration: 40.50 ms\t",
		},
		{
			report{requestID: id, duration: 3 * time.Second, memoryMB: 128, maxMemoryBytes: 1 << 20, status: "error", errorType: "Runtime.ExitError"},
			"REPORT RequestId: " + id + "\tDuration: 3000.00 ms\tBilled Duration: 3000 ms\tMemory Size: 128 MB\tMax Memory Used: 1 MB\tStatus: error\tError Type: Runtime.ExitError\t",
		},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("report:\n got %q\nwant %q", got, tc.want)
		}
	}
}

func TestLogTail(t *testing.T) {
	t.Parallel()
	const id = "6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55"
	r := report{requestID: id, duration: time.Millisecond, memoryMB: 128}
	tail := string(logTail(id, []string{"hello", "world"}, "", r))
	want := "START RequestId: " + id + " Version: $LATEST\nhello\nworld\nEND RequestId: " + id + "\n" + r.String() + "\n"
	if tail != want {
		t.Errorf("logTail:\n got %q\nwant %q", tail, want)
	}
	long := strings.Repeat("x", 100)
	var lines []string
	for range 100 {
		lines = append(lines, long)
	}
	tail = string(logTail(id, lines, "timed out", r))
	if len(tail) != tailBytes || !strings.HasSuffix(tail, "timed out\nEND RequestId: "+id+"\n"+r.String()+"\n") {
		t.Errorf("a long log's tail is %d bytes, ending %q; want the last %d bytes, with END and REPORT", len(tail), tail[max(0, len(tail)-300):], tailBytes)
	}
}
