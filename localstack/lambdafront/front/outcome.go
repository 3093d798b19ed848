package front

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Payload limits of a synchronous invocation, as Lambda has them.
const (
	maxRequestBytes  = 6 << 20
	maxResponseBytes = 6<<20 + 100
)

// tailBytes is how much of the end of an invocation's log Lambda returns
// as its log tail.
const tailBytes = 4096

// timedOutPrefix starts aws-lambda-rie's plain-text answer to an
// invocation that timed out.
const timedOutPrefix = "Task timed out after"

// answer is what the front answers an invocation with, decided from what
// aws-lambda-rie answered (rawOutcome) by decide.
type answer struct {
	// payload is the response body: the function's response or, with
	// functionError, the error payload.
	payload []byte
	// functionError says the function failed: X-Amz-Function-Error is
	// Unhandled.
	functionError bool
	// status and errorType are the REPORT line's Status ("timeout",
	// "error") and Error Type, when the runtime failed.
	status, errorType string
	// logLine is a line Lambda adds to the log, before END.
	logLine string
	// reset says the environment must be replaced before it takes
	// another invocation: its runtime timed out, crashed or exited.
	reset bool
}

// decide turns what aws-lambda-rie made of invocation requestID of fn
// into Lambda's answer. It has no side effects.
func decide(out rawOutcome, fn Function, requestID string, now time.Time) answer {
	timeoutSecs := time.Duration(fn.Timeout).Seconds()
	var a answer
	switch {
	case out.timedOut || (out.status == 200 && strings.HasPrefix(string(out.body), timedOutPrefix)):
		msg := fmt.Sprintf("Task timed out after %.2f seconds", timeoutSecs)
		a = answer{
			payload:       errorPayload(fmt.Sprintf("RequestId: %s Error: %s", requestID, msg), "Sandbox.Timedout"),
			functionError: true,
			status:        "timeout",
			logLine:       fmt.Sprintf("%s %s %s", now.UTC().Format("2006-01-02T15:04:05.000Z"), requestID, msg),
			reset:         true,
		}
	case out.status == 0:
		a = crashed(requestID, fmt.Sprintf("the execution environment failed: %v", out.err))
	case out.status == 200 && len(out.body) > maxResponseBytes:
		a = answer{
			payload:       errorPayload(fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", maxResponseBytes), "Function.ResponseSizeTooLarge"),
			functionError: true,
		}
	case out.status == 200:
		a = answer{payload: out.body, functionError: isErrorPayload(out.body)}
	case out.status == 502 && isErrorPayload(out.body):
		// The runtime reported an error and exited (a Go handler's panic).
		a = answer{payload: out.body, functionError: true, status: "error", errorType: errorType(out.body), reset: true}
	case out.status == 502:
		a = crashed(requestID, "Runtime exited without providing a reason")
	default:
		a = crashed(requestID, fmt.Sprintf("aws-lambda-rie answered %d %q", out.status, truncate(out.body, 200)))
	}
	if out.exited {
		a.reset = true
	}
	return a
}

// crashed is the answer to an invocation whose runtime failed without an
// error payload.
func crashed(requestID, reason string) answer {
	return answer{
		payload:       errorPayload(fmt.Sprintf("RequestId: %s Error: %s", requestID, reason), "Runtime.ExitError"),
		functionError: true,
		status:        "error",
		errorType:     "Runtime.ExitError",
		reset:         true,
	}
}

// errorPayload is a function error as Lambda's runtimes report it.
func errorPayload(message, errType string) []byte {
	raw, _ := json.Marshal(struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}{message, errType})
	return raw
}

// errorKeys are the fields of a runtime's error payload.
var errorKeys = map[string]bool{"errorMessage": true, "errorType": true, "stackTrace": true, "cause": true, "requestId": true}

// isErrorPayload reports whether body is an error payload that a runtime
// posted (to /runtime/invocation/ID/error): a JSON object with a string
// errorType and no fields but errorKeys. aws-lambda-rie answers such an
// invocation 200 without saying it failed, so the front tells by shape:
// a function that returns an object of that shape looks failed here.
func isErrorPayload(body []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	for k := range fields {
		if !errorKeys[k] {
			return false
		}
	}
	var t string
	return json.Unmarshal(fields["errorType"], &t) == nil && t != ""
}

// errorType is the errorType of an error payload.
func errorType(body []byte) string {
	var p struct {
		ErrorType string `json:"errorType"`
	}
	json.Unmarshal(body, &p)
	return p.ErrorType
}

// truncate returns at most n bytes of b as a string.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// report is the REPORT line Lambda logs at the end of an invocation.
type report struct {
	requestID         string
	duration, init    time.Duration // init is zero on a warm start
	memoryMB          int
	maxMemoryBytes    int64
	status, errorType string
}

// String formats the line as Lambda does, e.g.
//
//	REPORT RequestId: 8f5b…	Duration: 1021.53 ms	Billed Duration: 1022 ms	Memory Size: 1024 MB	Max Memory Used: 61 MB	Init Duration: 84.09 ms
//
// The duration excludes the init phase; the billed duration, as for every
// custom runtime, includes it, rounded up to the millisecond.
func (r report) String() string {
	var b strings.Builder
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Fprintf(&b, "REPORT RequestId: %s\tDuration: %.2f ms\tBilled Duration: %d ms\tMemory Size: %d MB\tMax Memory Used: %d MB\t",
		r.requestID, ms(r.duration), int64(math.Ceil(ms(r.duration+r.init))), r.memoryMB, (r.maxMemoryBytes+1<<20-1)>>20)
	if r.init > 0 {
		fmt.Fprintf(&b, "Init Duration: %.2f ms\t", ms(r.init))
	}
	if r.status != "" {
		fmt.Fprintf(&b, "Status: %s\t", r.status)
	}
	if r.errorType != "" {
		fmt.Fprintf(&b, "Error Type: %s\t", r.errorType)
	}
	return b.String()
}

// logTail is the end of an invocation's log as Lambda returns it (LogType
// Tail): START, the function's output, END and REPORT, cut to the last
// tailBytes bytes.
func logTail(requestID string, lines []string, logLine string, r report) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "START RequestId: %s Version: $LATEST\n", requestID)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if logLine != "" {
		b.WriteString(logLine)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "END RequestId: %s\n%s\n", requestID, r)
	s := b.String()
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	return []byte(s)
}
