package lambda

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// The tests in this file run the executor against a real Lambda data plane:
// the local stack's front over aws-lambda-rie processes running the trainer
// (`localstack/stack up`, then `eval "$(localstack/stack env)"`), or AWS or
// LocalStack itself. They find it in the environment:
//
//	AWS_ENDPOINT_URL_LAMBDA (or AWS_ENDPOINT_URL)  the Lambda endpoint
//	HPSEARCH_LAMBDA_FUNCTION                        the trainer function
//
// Without them they skip, except under CI or HPSEARCH_REQUIRE_LAMBDA, where
// they fail.

// realFunction returns the trainer function of the real data plane, or
// skips the test (fails it under CI or HPSEARCH_REQUIRE_LAMBDA).
func realFunction(t testing.TB) string {
	t.Helper()
	endpoint := os.Getenv("AWS_ENDPOINT_URL_LAMBDA")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	function := os.Getenv("HPSEARCH_LAMBDA_FUNCTION")
	if endpoint != "" && function != "" {
		return function
	}
	const how = "no Lambda data plane: set AWS_ENDPOINT_URL_LAMBDA and HPSEARCH_LAMBDA_FUNCTION " +
		"(`localstack/stack up && eval \"$(localstack/stack env)\"` starts the local one and sets them)"
	for _, name := range []string{"CI", "HPSEARCH_REQUIRE_LAMBDA"} {
		if v := os.Getenv(name); v != "" && v != "0" && v != "false" {
			t.Fatalf("%s (Lambda tests may not be skipped: %s=%s)", how, name, v)
		}
	}
	t.Skip(how)
	return ""
}

// recordingInvoker passes invocations to the real client, counts them and
// keeps what they returned.
type recordingInvoker struct {
	client  *awslambda.Client
	calls   atomic.Int64 // made
	pending atomic.Int64 // made and not answered yet
	mu      sync.Mutex
	outs    []*awslambda.InvokeOutput
}

func (r *recordingInvoker) Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	r.calls.Add(1)
	r.pending.Add(1)
	defer r.pending.Add(-1)
	out, err := r.client.Invoke(ctx, in, optFns...)
	if err == nil {
		r.mu.Lock()
		r.outs = append(r.outs, out)
		r.mu.Unlock()
	}
	return out, err
}

func newRecordingInvoker(t testing.TB) *recordingInvoker {
	t.Helper()
	client, err := NewClient(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return &recordingInvoker{client: client}
}

// digitsRequest is a short segment of the built-in digits-mlp workload.
func digitsRequest(t testing.TB, trial int) hptype.SegmentRequest {
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "lambda-test-" + strings.ReplaceAll(t.Name(), "/", "-"),
		StudyName:  "lambda-test",
		Trial:      trial,
		Segment:    0,
		Attempt:    1,
		Params:     hptype.Params{"hidden_units": int64(16), "epochs": int64(2)},
		Seed:       int64(trial),
		Deadline:   time.Now().Add(20 * time.Second),
		Resource:   hptype.ResourceRange{Unit: "epoch"},
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
	}
}

func TestRealDigitsSegmentIsBilledFromTheReportLine(t *testing.T) {
	function := realFunction(t)
	inv := newRecordingInvoker(t)
	e, err := New(t.Context(), Config{Client: inv, Function: function, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(t.Context(), digitsRequest(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != hptype.SegmentCompleted || res.ResourceReached != 2 || len(res.Metrics) == 0 {
		t.Fatalf("result %+v, want completed at epoch 2 with metrics", res)
	}
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, "billed duration estimated") {
			t.Errorf("warning %q: want billing from the REPORT line", w)
		}
	}
	if len(inv.outs) != 1 || inv.outs[0].LogResult == nil {
		t.Fatalf("%d answers recorded, want 1 with a log tail", len(inv.outs))
	}
	tail, err := decodeLogTail(*inv.outs[0].LogResult)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := parseReport(tail)
	if err != nil {
		t.Fatalf("the data plane's log tail: %v\n%s", err, tail)
	}
	t.Logf("REPORT: %+v", rep)
	if res.Usage.BilledMS != rep.totalBilledMS() || res.Usage.BilledMS < 1 {
		t.Errorf("billed %d ms, want the REPORT line's %d", res.Usage.BilledMS, rep.totalBilledMS())
	}
	if rep.maxMemoryUsedMB > 0 && res.Usage.PeakMemoryBytes != rep.maxMemoryUsedMB<<20 {
		t.Errorf("peak memory %d bytes, want the REPORT line's %d MB", res.Usage.PeakMemoryBytes, rep.maxMemoryUsedMB)
	}
}

func TestRealRequestTheTrainerRejectsIsAFailedResult(t *testing.T) {
	function := realFunction(t)
	e, err := New(t.Context(), Config{Client: newRecordingInvoker(t), Function: function, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	req := digitsRequest(t, 2)
	req.APIVersion = "hpsearch/v0"
	res, err := e.Run(t.Context(), req)
	if err != nil {
		t.Fatalf("Run: %v; want a failed result, not an error", err)
	}
	if res.Status != hptype.SegmentFailed || !strings.Contains(res.Error, "api_version") {
		t.Errorf("result %+v, want failed saying the api_version is wrong", res)
	}
}

func TestRealUnknownFunctionIsAnInvocationError(t *testing.T) {
	realFunction(t)
	e, err := New(t.Context(), Config{Client: newRecordingInvoker(t), Function: "hpsearch-no-such-function", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(t.Context(), digitsRequest(t, 3))
	if !errors.Is(err, ErrInvocation) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("error %v, want ErrInvocation with ResourceNotFoundException", err)
	}
}

// TestRealThrottlesAreRetriedUntilTheSegmentsRun starts segments that each
// hold an execution environment for a few seconds (they train until their
// deadline), one more at a time, until the data plane has throttled one
// and at least three run: with a function of concurrency C, the (C+1)th
// is throttled (with C = 1, the 2nd and the 3rd). The executor's own limit
// is far above, so the throttles come from Lambda. Every segment must then
// run, however often it was throttled.
func TestRealThrottlesAreRetriedUntilTheSegmentsRun(t *testing.T) {
	function := realFunction(t)
	inv := newRecordingInvoker(t)
	var throttles atomic.Int64
	e, err := New(t.Context(), Config{
		Client: inv, Function: function, Logger: testLogger(t),
		ThrottleBackoff: Backoff{Base: 100 * time.Millisecond, Max: time.Second},
		OnThrottle:      func() { throttles.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	const most = 16 // the most segments started: a function of concurrency 15 or less is throttled
	type outcome struct {
		res hptype.SegmentResult
		err error
	}
	outcomes := make([]outcome, most)
	var wg sync.WaitGroup
	started := 0
	for started < most && (throttles.Load() == 0 || started < 3) {
		i := started
		req := digitsRequest(t, 100+i)
		// More epochs than fit before the deadline: each segment holds
		// its environment until then, and stops there.
		req.Params = hptype.Params{"hidden_units": int64(64), "epochs": int64(1000)}
		req.Deadline = time.Now().Add(4 * time.Second)
		wg.Go(func() {
			outcomes[i].res, outcomes[i].err = e.Run(t.Context(), req)
		})
		started++
		waitFor(t, func() bool { return throttles.Load() > 0 || inv.pending.Load() == int64(started) })
	}
	wg.Wait()
	if throttles.Load() == 0 {
		t.Fatalf("no throttle with %d segments in flight at once: the function's concurrency must be under %d for this test", started, most)
	}
	t.Logf("%d segments, %d throttles, %d invocations", started, throttles.Load(), inv.calls.Load())
	for i, o := range outcomes[:started] {
		if o.err != nil {
			t.Errorf("segment %d: %v", i, o.err)
			continue
		}
		if o.res.Status == hptype.SegmentFailed {
			t.Errorf("segment %d failed: %s", i, o.res.Error)
		}
	}
	if got, want := inv.calls.Load(), int64(started)+throttles.Load(); got != want {
		t.Errorf("%d invocations, want one per segment and one per throttle (%d)", got, want)
	}
}

func TestRealCrashedRuntimeIsAFunctionError(t *testing.T) {
	function := realFunction(t)
	e, err := New(t.Context(), Config{Client: newRecordingInvoker(t), Function: function, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	req := digitsRequest(t, 4)
	// The workload kills the trainer that runs it: the runtime dies
	// mid-invocation.
	req.Workload = hptype.Workload{Command: []string{"sh", "-c", "kill -9 $PPID"}}
	_, err = e.Run(t.Context(), req)
	var fe *FunctionError
	if !errors.Is(err, ErrFunctionError) || !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *FunctionError", err)
	}
	t.Logf("function error: %+v", fe)
	if fe.Kind != "Unhandled" || fe.Usage.BilledMS < 1 {
		t.Errorf("function error %+v, want Unhandled with the billed time", fe)
	}
}
