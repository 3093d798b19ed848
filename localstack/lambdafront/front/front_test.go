package front

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// reportLine matches a REPORT line as Lambda logs it.
var reportLine = regexp.MustCompile(`(?m)^REPORT RequestId: [0-9a-f-]{36}\tDuration: \d+\.\d\d ms\tBilled Duration: \d+ ms\tMemory Size: (\d+) MB\tMax Memory Used: (\d+) MB\t(Init Duration: \d+\.\d\d ms\t)?(Status: (\w+)\t)?`)

// startFront serves fns with the aws-lambda-rie on PATH on a test server,
// and returns the front and a Lambda client of the AWS SDK pointed at it.
func startFront(t *testing.T, fns ...Function) (*Front, *lambda.Client) {
	t.Helper()
	requireRIE(t)
	f, client, _ := serveFront(t, Config{Functions: fns})
	return f, client
}

// serveFront serves a front for cfg on a test server, and returns it, a
// Lambda client of the AWS SDK pointed at it (without retries) and its
// URL. The front is closed when the test ends.
func serveFront(t *testing.T, cfg Config) (*Front, *lambda.Client, string) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		f.Close()
	})
	client := lambda.New(lambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		HTTPClient: awshttp.NewBuildableClient(),
		Retryer:    aws.NopRetryer{},
	})
	return f, client, srv.URL
}

// tWriter sends a log to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// invoke invokes a function with a log tail and returns the answer and the
// decoded tail.
func invoke(t *testing.T, client *lambda.Client, name string, payload any) (*lambda.InvokeOutput, string) {
	t.Helper()
	out, err := tryInvoke(t, client, name, payload)
	if err != nil {
		t.Fatalf("Invoke %s: %v", name, err)
	}
	tail, err := base64.StdEncoding.DecodeString(aws.ToString(out.LogResult))
	if err != nil {
		t.Fatalf("decode the log tail: %v", err)
	}
	return out, string(tail)
}

func tryInvoke(t *testing.T, client *lambda.Client, name string, payload any) (*lambda.InvokeOutput, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String(name), Payload: raw, LogType: types.LogTypeTail})
}

// The trainer's real bootstrap answers a segment with its result, under
// every form of the function's name, with a log tail ending in a REPORT
// line.
func TestInvokeTrainer(t *testing.T) {
	requireRIE(t)
	_, client := startFront(t, Function{Name: "hpsearch-trainer", Bootstrap: trainerBootstrap(t), MemoryMB: 1024, Timeout: Duration(30 * time.Second), Concurrency: 2})
	req := hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "s1",
		Trial:      4,
		Params:     hptype.Params{"hidden_units": int64(16), "epochs": int64(2)},
		Deadline:   time.Now().Add(time.Minute),
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
	}
	for _, name := range []string{
		"hpsearch-trainer",
		"hpsearch-trainer:$LATEST",
		"123456789012:function:hpsearch-trainer",
		"arn:aws:lambda:us-east-1:123456789012:function:hpsearch-trainer",
		"arn:aws:lambda:us-east-1:123456789012:function:hpsearch-trainer:$LATEST",
	} {
		out, tail := invoke(t, client, name, req)
		if out.FunctionError != nil {
			t.Fatalf("%s: function error %q: %s", name, *out.FunctionError, out.Payload)
		}
		if v := aws.ToString(out.ExecutedVersion); v != "$LATEST" {
			t.Errorf("%s: executed version %q, want $LATEST", name, v)
		}
		var res hptype.SegmentResult
		if err := json.Unmarshal(out.Payload, &res); err != nil {
			t.Fatalf("%s: payload %s: %v", name, out.Payload, err)
		}
		if res.Status != hptype.SegmentCompleted || res.Study != "s1" || res.Trial != 4 || res.ResourceReached != 2 {
			t.Errorf("%s: result %+v, want trial s1/4 completed at epoch 2", name, res)
		}
		m := reportLine.FindStringSubmatch(tail)
		if m == nil || !strings.HasSuffix(strings.TrimRight(tail, "\n"), strings.TrimRight(m[0], "\n")) {
			t.Fatalf("%s: log tail does not end with a REPORT line:\n%s", name, tail)
		}
		if m[1] != "1024" || m[2] == "0" {
			t.Errorf("%s: REPORT line says Memory Size %s MB, Max Memory Used %s MB; want 1024 and the runtime's peak", name, m[1], m[2])
		}
		if !strings.HasPrefix(tail, "START RequestId: ") {
			t.Errorf("%s: log tail does not start with START:\n%s", name, tail)
		}
	}
}

// A function has as many execution environments as its concurrency: one
// more invocation is throttled as Lambda throttles it. An invocation that
// outlives the timeout is a function error (Sandbox.Timedout), and its
// environment is replaced before the next invocation.
func TestThrottleAndTimeout(t *testing.T) {
	f, client := startFront(t, testFunctionConfig(t, "slow", 2*time.Second, 1))
	type result struct {
		out  *lambda.InvokeOutput
		tail string
	}
	done := make(chan result, 1)
	go func() {
		out, tail := invoke(t, client, "slow", testEvent{Sleep: "1h"})
		done <- result{out, tail}
	}()
	waitFor(t, 30*time.Second, "the slow invocation in flight", func() bool { return f.InFlight("slow") == 1 })

	_, err := tryInvoke(t, client, "slow", testEvent{Echo: "hi"})
	var throttled *types.TooManyRequestsException
	if !errors.As(err, &throttled) {
		t.Fatalf("second concurrent invocation: %v, want TooManyRequestsException", err)
	}
	if throttled.Reason != types.ThrottleReasonReservedFunctionConcurrentInvocationLimitExceeded || aws.ToString(throttled.Message) != "Rate Exceeded." {
		t.Errorf("throttle reason %q message %q, want ReservedFunctionConcurrentInvocationLimitExceeded, \"Rate Exceeded.\"", throttled.Reason, aws.ToString(throttled.Message))
	}

	r := <-done
	if aws.ToString(r.out.FunctionError) != "Unhandled" {
		t.Fatalf("timed-out invocation: function error %q, payload %s; want Unhandled", aws.ToString(r.out.FunctionError), r.out.Payload)
	}
	var payload struct{ ErrorMessage, ErrorType string }
	json.Unmarshal(r.out.Payload, &payload)
	if payload.ErrorType != "Sandbox.Timedout" || !strings.Contains(payload.ErrorMessage, "Task timed out after 2.00 seconds") {
		t.Errorf("timed-out invocation's payload %s, want Sandbox.Timedout after 2.00 seconds", r.out.Payload)
	}
	if m := reportLine.FindStringSubmatch(r.tail); m == nil || m[5] != "timeout" {
		t.Errorf("timed-out invocation's log tail has no REPORT line with Status: timeout:\n%s", r.tail)
	}

	out, _ := invoke(t, client, "slow", testEvent{Echo: "again"})
	if out.FunctionError != nil || string(out.Payload) != `{"echo":"again"}` {
		t.Errorf("invocation after the timeout: function error %v, payload %s; want a fresh environment's answer", aws.ToString(out.FunctionError), out.Payload)
	}
}

// An error, a panic or an exit of the runtime is a function error: 200
// with X-Amz-Function-Error, which the SDK does not retry. The function
// keeps serving afterwards, and its output is in the log tail.
func TestFunctionErrors(t *testing.T) {
	_, client := startFront(t, testFunctionConfig(t, "faulty", 30*time.Second, 1))
	for _, tc := range []struct {
		name      string
		ev        testEvent
		errorType string // of the payload; "" for any
		message   string // in the payload
	}{
		{name: "returned error", ev: testEvent{Print: "about to fail", Error: "no luck"}, errorType: "errorString", message: "no luck"},
		{name: "panic", ev: testEvent{Panic: "boom"}, message: "boom"},
		{name: "exit", ev: testEvent{Exit: 3}, errorType: "Runtime.ExitError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, tail := invoke(t, client, "faulty", tc.ev)
			if aws.ToString(out.FunctionError) != "Unhandled" {
				t.Fatalf("function error %q, payload %s; want Unhandled", aws.ToString(out.FunctionError), out.Payload)
			}
			var payload struct{ ErrorMessage, ErrorType string }
			if err := json.Unmarshal(out.Payload, &payload); err != nil {
				t.Fatalf("payload %s: %v", out.Payload, err)
			}
			if (tc.errorType != "" && payload.ErrorType != tc.errorType) || !strings.Contains(payload.ErrorMessage, tc.message) {
				t.Errorf("payload %s, want errorType %q and a message with %q", out.Payload, tc.errorType, tc.message)
			}
			if tc.ev.Print != "" && !strings.Contains(tail, tc.ev.Print+"\n") {
				t.Errorf("log tail lacks the function's output %q:\n%s", tc.ev.Print, tail)
			}
			if reportLine.FindString(tail) == "" {
				t.Errorf("log tail has no REPORT line:\n%s", tail)
			}
			out, _ = invoke(t, client, "faulty", testEvent{Echo: tc.name})
			if out.FunctionError != nil || !strings.Contains(string(out.Payload), tc.name) {
				t.Errorf("next invocation: function error %v, payload %s; want an echo", aws.ToString(out.FunctionError), out.Payload)
			}
		})
	}
}
