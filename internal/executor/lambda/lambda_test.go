package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// The tests in this file run the executor against protocolFake (see
// fake_test.go); front_test.go runs it against a real Lambda data plane.

func testRequest(trial int) hptype.SegmentRequest {
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "st-1",
		StudyName:  "digits",
		Trial:      trial,
		Segment:    2,
		Attempt:    1,
		Params:     hptype.Params{"hidden_units": int64(32), "epochs": int64(3)},
		Seed:       7,
		Deadline:   time.Now().Add(5 * time.Minute),
		Resource:   hptype.ResourceRange{From: 1, Unit: "epoch"},
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// functions numbers the functions of uniqueFunction.
var functions atomic.Int64

// uniqueFunction returns a function name that no other test, nor another
// run of this one (-count), uses: executors of one function share its
// concurrency limit for the whole process, and a limit made in a synctest
// bubble may be used only in that bubble.
func uniqueFunction(t testing.TB) string {
	return fmt.Sprintf("hpsearch-trainer-%s-%d", t.Name(), functions.Add(1))
}

// newTestExecutor returns an executor of a function of its own (see
// uniqueFunction) on client, with fast throttle backoff; edit changes the
// rest of its Config.
func newTestExecutor(t testing.TB, client Invoker, edit func(*Config)) *Executor {
	t.Helper()
	cfg := Config{
		Client:          client,
		Function:        uniqueFunction(t),
		ThrottleBackoff: Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond},
		Logger:          testLogger(t),
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestRunTakesBillingFromTheReportLine(t *testing.T) {
	t.Parallel()
	fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer {
		return answerResult(resultFor(c.Req), logTail(reportLine(1480, 1024, 97)))
	})
	e := newTestExecutor(t, fake.serve(t), func(c *Config) { c.Qualifier = "live"; c.MemoryMB = 1024 })
	req := testRequest(3)
	res, err := e.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != hptype.SegmentCompleted || res.Trial != 3 || len(res.Metrics) != 1 {
		t.Errorf("result %+v, want the trainer's completed result of trial 3", res)
	}
	want := hptype.Usage{WallMS: 1200, BilledMS: 1480, PeakMemoryBytes: 97 << 20}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v: billed and peak memory from the REPORT line, wall from the trainer", res.Usage, want)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings %q, want none", res.Warnings)
	}
	calls := fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
	c := calls[0]
	if c.Function != e.cfg.Function || c.Qualifier != "live" {
		t.Errorf("invoked %s qualifier %q, want the configured function and qualifier", c.Function, c.Qualifier)
	}
	if units, _ := c.Req.Params.Float("hidden_units"); c.Req.Study != req.Study || c.Req.Trial != req.Trial || c.Req.Attempt != req.Attempt || units != 32 {
		t.Errorf("payload %+v, want the request", c.Req)
	}
}

func TestRunEstimatesBillingWithoutAReportLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tail, why string
	}{
		{"no log tail", "", "the invocation returned no log tail"},
		{"no REPORT line", "START RequestId: x Version: $LATEST\nEND RequestId: x\n", "no REPORT line in the log tail"},
		{"malformed REPORT line", "REPORT RequestId: x\tDuration: 12.00 ms\tBilled Duration: soon\n", "Billed Duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer {
				return answerResult(resultFor(c.Req), tc.tail)
			})
			e := newTestExecutor(t, fake.serve(t), nil)
			res, err := e.Run(t.Context(), testRequest(1))
			if err != nil {
				t.Fatal(err)
			}
			if res.Usage.BilledMS < 1 {
				t.Errorf("billed %d ms, want the round trip, at least 1 ms", res.Usage.BilledMS)
			}
			if res.Usage.PeakMemoryBytes != 40<<20 || res.Usage.WallMS != 1200 {
				t.Errorf("usage %+v, want the trainer's wall time and peak memory", res.Usage)
			}
			if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "billed duration estimated: ") || !strings.Contains(res.Warnings[0], tc.why) {
				t.Errorf("warnings %q, want one saying the billed duration is estimated because of %q", res.Warnings, tc.why)
			}
		})
	}
}

func TestRunWarnsWhenTheFunctionHasOtherMemory(t *testing.T) {
	t.Parallel()
	fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer {
		return answerResult(resultFor(c.Req), logTail(reportLine(800, 2048, 97)))
	})
	e := newTestExecutor(t, fake.serve(t), func(c *Config) { c.MemoryMB = 1024 })
	res, err := e.Run(t.Context(), testRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "2048 MB") || !strings.Contains(res.Warnings[0], "1024 MB") {
		t.Errorf("warnings %q, want one naming both memory sizes", res.Warnings)
	}
}

func TestRunReturnsFunctionErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		answer           fakeAnswer
		kind, typ, msg   string
		billed           int64 // 0: estimated
		reportMaxMemByte int64
	}{
		{
			name:   "handler error with report",
			answer: answerFunctionError("Unhandled", "Runtime.ExitError", "RequestId: x Error: Runtime exited with error: signal: killed", logTail(reportLine(2001, 1024, 1024))),
			kind:   "Unhandled", typ: "Runtime.ExitError", msg: "signal: killed", billed: 2001, reportMaxMemByte: 1024 << 20,
		},
		{
			name:   "timeout",
			answer: answerFunctionError("Unhandled", "Sandbox.Timedout", "Task timed out after 900.00 seconds", logTail(reportLine(900000, 1024, 300))),
			kind:   "Unhandled", typ: "Sandbox.Timedout", msg: "timed out", billed: 900000, reportMaxMemByte: 300 << 20,
		},
		{
			name:   "payload not JSON, no log",
			answer: answerPayload([]byte("runtime crashed"), "Unhandled", ""),
			kind:   "Unhandled", msg: "runtime crashed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer { return tc.answer })
			e := newTestExecutor(t, fake.serve(t), nil)
			_, err := e.Run(t.Context(), testRequest(4))
			if !errors.Is(err, ErrFunctionError) || errors.Is(err, ErrInvocation) || errors.Is(err, ErrThrottled) {
				t.Fatalf("error %v, want ErrFunctionError only", err)
			}
			var fe *FunctionError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no *FunctionError", err)
			}
			if fe.Kind != tc.kind || fe.Type != tc.typ || !strings.Contains(fe.Message, tc.msg) {
				t.Errorf("function error %+v, want kind %q, type %q, message with %q", fe, tc.kind, tc.typ, tc.msg)
			}
			if !strings.Contains(err.Error(), "trial 4") || !strings.Contains(err.Error(), e.function) {
				t.Errorf("error %q does not say which trial and function", err)
			}
			switch {
			case tc.billed != 0 && (fe.Usage.BilledMS != tc.billed || fe.Usage.PeakMemoryBytes != tc.reportMaxMemByte):
				t.Errorf("usage %+v, want %d ms and %d bytes from the REPORT line", fe.Usage, tc.billed, tc.reportMaxMemByte)
			case tc.billed == 0 && fe.Usage.BilledMS < 1:
				t.Errorf("usage %+v, want the round trip, at least 1 ms", fe.Usage)
			}
			if n := len(fake.Calls()); n != 1 {
				t.Errorf("%d calls, want 1: a function error is not retried here", n)
			}
		})
	}
}

func TestRunRejectsAnswersThatAreNotTheResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(req hptype.SegmentRequest) fakeAnswer
		want   string
	}{
		{"another attempt", func(req hptype.SegmentRequest) fakeAnswer {
			res := resultFor(req)
			res.Attempt++
			return answerResult(res, "")
		}, "attempt 2, asked for st-1 trial 5 segment 2 attempt 1"},
		{"another study", func(req hptype.SegmentRequest) fakeAnswer {
			res := resultFor(req)
			res.Study = "st-0"
			return answerResult(res, "")
		}, "answered for st-0"},
		{"not JSON", func(hptype.SegmentRequest) fakeAnswer { return answerPayload([]byte("ok"), "", "") }, "no valid segment result"},
		{"no status", func(hptype.SegmentRequest) fakeAnswer { return answerPayload([]byte("{}"), "", "") }, `status ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer { return tc.answer(c.Req) })
			e := newTestExecutor(t, fake.serve(t), nil)
			_, err := e.Run(t.Context(), testRequest(5))
			if !errors.Is(err, ErrFunctionError) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrFunctionError saying %q", err, tc.want)
			}
		})
	}
}

func TestRunReturnsInvocationErrorsWithoutRetrying(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer fakeAnswer
		want   []string
	}{
		{"not found", fakeError(http.StatusNotFound, "ResourceNotFoundException", "Function not found: arn:aws:lambda:us-east-1:000000000000:function:nope"),
			[]string{"ResourceNotFoundException", "check the function name"}},
		{"access denied", fakeError(http.StatusForbidden, "AccessDeniedException", "not authorized to perform: lambda:InvokeFunction"),
			[]string{"AccessDeniedException", "lambda:InvokeFunction"}},
		{"service error", fakeError(http.StatusInternalServerError, "ServiceException", "internal error"),
			[]string{"ServiceException", "may have run"}},
		{"not ready", fakeError(http.StatusBadGateway, "ResourceNotReadyException", "function is pending"),
			[]string{"ResourceNotReadyException", "Active"}},
		{"VPC", fakeError(http.StatusBadGateway, "ENILimitReachedException", "no ENI"),
			[]string{"ENILimitReachedException", "VPC"}},
		{"bad gateway without a body", fakeAnswer{Status: http.StatusBadGateway, Body: []byte("<html>502 Bad Gateway</html>")},
			[]string{"502", "may have run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer { return tc.answer })
			var throttles atomic.Int64
			e := newTestExecutor(t, fake.serve(t), func(c *Config) { c.OnThrottle = func() { throttles.Add(1) } })
			_, err := e.Run(t.Context(), testRequest(6))
			if !errors.Is(err, ErrInvocation) || errors.Is(err, ErrFunctionError) || errors.Is(err, ErrThrottled) {
				t.Fatalf("error %v, want ErrInvocation only", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n := len(fake.Calls()); n != 1 {
				t.Errorf("%d calls, want 1: neither the SDK nor the executor may retry (the segment may have run)", n)
			}
			if n := throttles.Load(); n != 0 {
				t.Errorf("%d throttles counted, want 0", n)
			}
		})
	}
}

func TestRunReportsAnUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	// Port 1 of the loopback interface has nothing listening.
	e := newTestExecutor(t, fakeClient("http://127.0.0.1:1", http.DefaultClient), nil)
	_, err := e.Run(t.Context(), testRequest(1))
	if !errors.Is(err, ErrInvocation) || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL_LAMBDA") {
		t.Errorf("error %v, want ErrInvocation saying which endpoint setting to check", err)
	}
}

func TestRunRetriesThrottles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		throttle fakeAnswer
	}{
		{"TooManyRequestsException", tooManyRequests("ReservedFunctionConcurrentInvocationLimitExceeded", "")},
		{"TooManyRequestsException without a reason", tooManyRequests("", "")},
		{"HTTP 429 of another code", fakeError(http.StatusTooManyRequests, "SomethingNewException", "slow down")},
		{"ThrottlingException", fakeError(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")},
		{"EC2ThrottledException", fakeError(http.StatusBadGateway, "EC2ThrottledException", "EC2 throttled the ENI creation")},
		{"HTTP 503 Rate exceeded", fakeError(http.StatusServiceUnavailable, "ServiceUnavailableException", "Rate exceeded")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newProtocolFake(t, func(n int, c fakeCall) fakeAnswer {
				if n < 3 {
					return tc.throttle
				}
				return answerResult(resultFor(c.Req), logTail(reportLine(90, 512, 60)))
			})
			var throttles atomic.Int64
			e := newTestExecutor(t, fake.serve(t), func(c *Config) { c.OnThrottle = func() { throttles.Add(1) } })
			res, err := e.Run(t.Context(), testRequest(7))
			if err != nil {
				t.Fatalf("Run: %v; want the result after the throttles", err)
			}
			if res.Status != hptype.SegmentCompleted || res.Usage.BilledMS != 90 {
				t.Errorf("result %+v, want the completed one billed 90 ms", res)
			}
			if n := throttles.Load(); n != 3 {
				t.Errorf("OnThrottle called %d times, want 3", n)
			}
			if n := len(fake.Calls()); n != 4 {
				t.Errorf("%d calls, want 4", n)
			}
		})
	}
}

func TestRunHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := newProtocolFake(t, func(n int, c fakeCall) fakeAnswer {
			if n == 0 {
				return tooManyRequests("ConcurrentInvocationLimitExceeded", "30")
			}
			return answerResult(resultFor(c.Req), logTail(reportLine(90, 512, 60)))
		})
		e := newTestExecutor(t, fake.inProcess(), func(c *Config) {
			c.ThrottleBackoff = Backoff{Base: time.Second, Max: 2 * time.Second}
		})
		req := testRequest(8)
		if _, err := e.Run(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		calls := fake.Calls()
		if len(calls) != 2 {
			t.Fatalf("%d calls, want 2", len(calls))
		}
		// Time in the bubble is the fake clock's: exact.
		gap := calls[1].At.Sub(calls[0].At)
		if gap < 30*time.Second || gap > 31*time.Second {
			t.Errorf("retried after %s, want Retry-After's 30 s plus at most the 1 s base of jitter (not Max's 2 s)", gap)
		}
		if moved := calls[1].Req.Deadline.Sub(req.Deadline); moved != gap {
			t.Errorf("the retry's deadline moved by %s, want by the %s it waited", moved, gap)
		}
	})
}

func TestRunGivesUpAfterMaxThrottleWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer {
			return tooManyRequests("ReservedFunctionConcurrentInvocationLimitExceeded", "")
		})
		var throttles atomic.Int64
		e := newTestExecutor(t, fake.inProcess(), func(c *Config) {
			c.ThrottleBackoff = Backoff{Base: time.Second, Max: 10 * time.Second}
			c.MaxThrottleWait = 2 * time.Minute
			c.OnThrottle = func() { throttles.Add(1) }
		})
		start := time.Now()
		_, err := e.Run(t.Context(), testRequest(9))
		if !errors.Is(err, ErrThrottled) || errors.Is(err, ErrInvocation) {
			t.Fatalf("error %v, want ErrThrottled", err)
		}
		if !strings.Contains(err.Error(), "ReservedFunctionConcurrentInvocationLimitExceeded") || !strings.Contains(err.Error(), "reserved concurrency") {
			t.Errorf("error %q does not say which limit was hit and what to raise", err)
		}
		if took := time.Since(start); took != 2*time.Minute {
			t.Errorf("gave up after %s, want exactly MaxThrottleWait (2m0s) on the fake clock", took)
		}
		if calls := len(fake.Calls()); int64(calls) != throttles.Load() || calls < 13 {
			t.Errorf("%d calls, %d throttles: want every call throttled and counted, at least 12 waits of at most 10 s in 2 min", calls, throttles.Load())
		}
	})
}

func TestRunStopsWhileThrottled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer { return tooManyRequests("", "60") })
		e := newTestExecutor(t, fake.inProcess(), nil)
		ctx, cancel := context.WithCancelCause(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := e.Run(ctx, testRequest(10))
			errc <- err
		}()
		synctest.Wait() // throttled once, waiting its 60 s
		stop := errors.New("study stopped")
		cancel(stop)
		if err := <-errc; !errors.Is(err, stop) || errors.Is(err, ErrThrottled) {
			t.Errorf("error %v, want the context's cause", err)
		}
		if n := len(fake.Calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
}

func TestRunCancelAbortsTheInvocation(t *testing.T) {
	t.Parallel()
	aborted := make(chan struct{})
	hold := make(chan struct{}) // never closed
	fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer { return fakeAnswer{Hold: hold} })
	noticing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fake.ServeHTTP(w, r)
		close(aborted)
	})
	e := newTestExecutor(t, serveHTTP(t, noticing), nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, testRequest(11))
		errc <- err
	}()
	waitFor(t, func() bool { now, _ := fake.InFlight(); return now == 1 })
	stop := errors.New("coordinator shutting down")
	cancel(stop)
	err := <-errc
	if !errors.Is(err, stop) || errors.Is(err, ErrInvocation) {
		t.Errorf("error %v, want the context's cause", err)
	}
	if !strings.Contains(err.Error(), "runs on") {
		t.Errorf("error %q does not say that the function runs on", err)
	}
	<-aborted // the server saw the request end
}

func TestRunGivesUpOnAnInvocationLongPastItsDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{}) // never closed: a lost connection
		fake := newProtocolFake(t, func(int, fakeCall) fakeAnswer { return fakeAnswer{Hold: hold} })
		e := newTestExecutor(t, fake.inProcess(), nil)
		req := testRequest(12)
		req.Deadline = time.Now().Add(10 * time.Minute)
		_, err := e.Run(t.Context(), req)
		if !errors.Is(err, ErrInvocation) || !strings.Contains(err.Error(), "after the segment's deadline") {
			t.Errorf("error %v, want ErrInvocation saying no answer came after the deadline", err)
		}
		if got, want := time.Now(), req.Deadline.Add(deadlineSlack); !got.Equal(want) {
			t.Errorf("gave up at %s, want %s (deadline + slack)", got, want)
		}
	})
}

func TestRunRefusesARequestOverThePayloadLimit(t *testing.T) {
	t.Parallel()
	fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer { return answerResult(resultFor(c.Req), "") })
	e := newTestExecutor(t, fake.serve(t), nil)
	req := testRequest(13)
	req.Params["data"] = strings.Repeat("x", MaxPayloadBytes)
	_, err := e.Run(t.Context(), req)
	if !errors.Is(err, ErrRequestTooLarge) || !strings.Contains(err.Error(), "object storage") {
		t.Errorf("error %v, want ErrRequestTooLarge pointing at object storage", err)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("%d calls, want none", n)
	}
	// Just under the limit goes through.
	req = testRequest(13)
	payload, err := e.payload(req)
	if err != nil {
		t.Fatal(err)
	}
	req.Params["data"] = strings.Repeat("x", MaxPayloadBytes-len(payload)-len(`,"data":""`)-64)
	if _, err := e.Run(t.Context(), req); err != nil {
		t.Errorf("a request under the limit: %v", err)
	}
}

func TestConcurrencyLimitIsSharedByTheExecutorsOfAFunction(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fake := newProtocolFake(t, func(_ int, c fakeCall) fakeAnswer {
			a := answerResult(resultFor(c.Req), logTail(reportLine(10, 128, 20)))
			a.Hold = release
			return a
		})
		client := fake.inProcess()
		function := uniqueFunction(t)
		edit := func(c *Config) { c.Function, c.Concurrency = function, 2 }
		a := newTestExecutor(t, client, edit)
		b := newTestExecutor(t, client, edit)
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for i := range 5 {
			e := a
			if i%2 == 1 {
				e = b
			}
			wg.Go(func() {
				_, err := e.Run(t.Context(), testRequest(20+i))
				errs <- err
			})
		}
		synctest.Wait()
		if now, _ := fake.InFlight(); now != 2 {
			t.Errorf("%d invocations in flight, want the limit of 2 across both executors", now)
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if _, most := fake.InFlight(); most != 2 {
			t.Errorf("at most %d in flight, want 2", most)
		}
		if n := len(fake.Calls()); n != 5 {
			t.Errorf("%d calls, want 5", n)
		}
	})
}

func TestQueuedRequestsKeepTheirRunTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := newProtocolFake(t, func(n int, c fakeCall) fakeAnswer {
			a := answerResult(resultFor(c.Req), "")
			if n == 0 {
				hold := make(chan struct{})
				time.AfterFunc(40*time.Second, func() { close(hold) })
				a.Hold = hold
			}
			return a
		})
		e := newTestExecutor(t, fake.inProcess(), func(c *Config) { c.Concurrency = 1 })
		first, second := testRequest(30), testRequest(31)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := e.Run(t.Context(), first); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the first holds the only slot
		if _, err := e.Run(t.Context(), second); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		calls := fake.Calls()
		if moved := calls[1].Req.Deadline.Sub(second.Deadline); moved != 40*time.Second {
			t.Errorf("the queued request's deadline moved by %s, want by the 40 s it waited", moved)
		}
		if !calls[0].Req.Deadline.Equal(first.Deadline) {
			t.Errorf("the first request's deadline moved to %s from %s, want unchanged", calls[0].Req.Deadline, first.Deadline)
		}
	})
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	fake := newProtocolFake(t, nil).inProcess()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no function", Config{Client: fake}, "Config.Function"},
		{"negative concurrency", Config{Client: fake, Function: "f", Concurrency: -1}, "concurrency -1"},
		{"memory too small", Config{Client: fake, Function: "f", MemoryMB: 64}, "128 to 10,240"},
		{"backoff max under base", Config{Client: fake, Function: "f", ThrottleBackoff: Backoff{Base: time.Second, Max: time.Millisecond}}, "base <= max"},
		{"negative throttle wait", Config{Client: fake, Function: "f", MaxThrottleWait: -time.Second}, "max throttle wait"},
	} {
		if _, err := New(t.Context(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	name := uniqueFunction(t)
	if _, err := New(t.Context(), Config{Client: fake, Function: name, Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Config{Client: fake, Function: name, Concurrency: 4}); err == nil || !strings.Contains(err.Error(), "same Concurrency") {
		t.Errorf("a second executor with another concurrency: error %v, want a refusal", err)
	}
}

func TestNewClientReadsTheEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:9")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_PROFILE", "")
	e, err := New(t.Context(), Config{Function: uniqueFunction(t)})
	if err != nil {
		t.Fatal(err)
	}
	if e.endpoint != "http://127.0.0.1:9" {
		t.Errorf("endpoint %q, want AWS_ENDPOINT_URL_LAMBDA's", e.endpoint)
	}
	client, err := NewClient(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if o := client.Options(); o.Region != "eu-west-3" || aws.ToString(o.BaseEndpoint) != "http://127.0.0.1:9" {
		t.Errorf("region %q, endpoint %q: want the environment's", o.Region, aws.ToString(o.BaseEndpoint))
	}
	if _, ok := client.Options().Retryer.(aws.NopRetryer); !ok {
		t.Errorf("retryer %T, want aws.NopRetryer: the executor decides what is retried", client.Options().Retryer)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
