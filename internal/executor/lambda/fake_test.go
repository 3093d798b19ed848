package lambda

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// protocolFake is a PROTOCOL FAKE of the Lambda Invoke API, not Lambda: it
// runs no function. It checks each request as Lambda's front end would
// (path, invocation type, log type, a JSON payload) and answers with what
// the test scripts, on the wire as Lambda answers: status codes,
// X-Amz-Function-Error, X-Amz-Log-Result, X-Amzn-ErrorType with a JSON
// body, Retry-After. It exists for speed and for answers the real data
// plane cannot be made to give (a 500, a malformed REPORT line, a result
// for another attempt); front_test.go runs the executor against a real
// one.
type protocolFake struct {
	t      testing.TB
	answer func(n int, c fakeCall) fakeAnswer // n counts calls from 0

	mu          sync.Mutex
	calls       []fakeCall
	inFlight    int
	maxInFlight int
}

// fakeCall is one Invoke the fake received.
type fakeCall struct {
	Function  string
	Qualifier string
	Req       hptype.SegmentRequest
	At        time.Time
}

// fakeAnswer is what the fake answers one Invoke with.
type fakeAnswer struct {
	Status int
	Header http.Header
	Body   []byte
	// Hold, when set, delays the answer until it is closed or the request
	// is abandoned.
	Hold <-chan struct{}
}

func newProtocolFake(t testing.TB, answer func(n int, c fakeCall) fakeAnswer) *protocolFake {
	return &protocolFake{t: t, answer: answer}
}

const invocationsPrefix, invocationsSuffix = "/2015-03-31/functions/", "/invocations"

func (f *protocolFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if r.Method != http.MethodPost || !strings.HasPrefix(path, invocationsPrefix) || !strings.HasSuffix(path, invocationsSuffix) {
		writeAnswer(w, fakeError(http.StatusNotFound, "UnknownOperationException", "unknown operation "+r.Method+" "+path))
		return
	}
	function, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(path, invocationsPrefix), invocationsSuffix))
	if err != nil {
		writeAnswer(w, fakeError(http.StatusBadRequest, "InvalidParameterValueException", err.Error()))
		return
	}
	if it := r.Header.Get("X-Amz-Invocation-Type"); it != "RequestResponse" {
		f.t.Errorf("fake: X-Amz-Invocation-Type %q, want RequestResponse", it)
	}
	if lt := r.Header.Get("X-Amz-Log-Type"); lt != "Tail" {
		f.t.Errorf("fake: X-Amz-Log-Type %q, want Tail", lt)
	}
	c := fakeCall{Function: function, Qualifier: r.URL.Query().Get("Qualifier"), At: time.Now()}
	if err := json.NewDecoder(r.Body).Decode(&c.Req); err != nil {
		writeAnswer(w, fakeError(http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json: "+err.Error()))
		return
	}
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, c)
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	a := f.answer(n, c)
	if a.Hold != nil {
		select {
		case <-a.Hold:
		case <-r.Context().Done():
			return
		}
	}
	writeAnswer(w, a)
}

func writeAnswer(w http.ResponseWriter, a fakeAnswer) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// Calls returns the calls received so far.
func (f *protocolFake) Calls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

// InFlight returns how many calls are being answered now, and the most
// there were at once.
func (f *protocolFake) InFlight() (now, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight, f.maxInFlight
}

// serve starts an HTTP server for f and returns a client of it.
func (f *protocolFake) serve(t testing.TB) *awslambda.Client { return serveHTTP(t, f) }

// serveHTTP starts an HTTP server for h and returns a Lambda client of it.
func serveHTTP(t testing.TB, h http.Handler) *awslambda.Client {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fakeClient(srv.URL, srv.Client())
}

// inProcess returns a client whose requests f answers in the caller's
// goroutine, with no network: for tests in a synctest bubble, whose fake
// clock moves only while every goroutine is blocked on the bubble's own
// channels and timers.
func (f *protocolFake) inProcess() *awslambda.Client {
	return fakeClient("http://lambda.fake", handlerClient{f})
}

func fakeClient(endpoint string, hc awslambda.HTTPClient) *awslambda.Client {
	return awslambda.New(awslambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  aws.AnonymousCredentials{},
		HTTPClient:   hc,
	})
}

// handlerClient is an HTTP client that hands each request to a handler.
type handlerClient struct{ h http.Handler }

func (c handlerClient) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// reportLine is a REPORT line as Lambda logs it, for an invocation billed
// billedMS that used maxMemMB of memorySizeMB.
func reportLine(billedMS, memorySizeMB, maxMemMB int) string {
	return fmt.Sprintf("REPORT RequestId: 6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55\tDuration: %d.37 ms\tBilled Duration: %d ms\tMemory Size: %d MB\tMax Memory Used: %d MB\t\n",
		billedMS-1, billedMS, memorySizeMB, maxMemMB)
}

// logTail is a log tail ending with report, as LogType Tail returns it.
func logTail(report string) string {
	return "START RequestId: 6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55 Version: $LATEST\n" +
		`{"level":"INFO","msg":"segment done"}` + "\n" +
		"END RequestId: 6f3c1ab2-8f0e-4c47-9d1b-2f0a6a7e1c55\n" + report
}

// resultFor is a completed result that answers req.
func resultFor(req hptype.SegmentRequest) hptype.SegmentResult {
	return hptype.SegmentResult{
		APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Segment: req.Segment, Attempt: req.Attempt,
		Status: hptype.SegmentCompleted, ResourceReached: 3,
		Metrics: []hptype.Metric{{Step: 3, Name: "val_accuracy", Value: 0.9}},
		Usage:   hptype.Usage{WallMS: 1200, BilledMS: 1201, PeakMemoryBytes: 40 << 20},
	}
}

// answerResult answers 200 with res and, unless tail is "", the log tail.
func answerResult(res hptype.SegmentResult, tail string) fakeAnswer {
	body, _ := json.Marshal(res)
	return answerPayload(body, "", tail)
}

// answerFunctionError answers 200 with a function error as the Go runtime
// reports one.
func answerFunctionError(kind, errType, message, tail string) fakeAnswer {
	body, _ := json.Marshal(map[string]string{"errorType": errType, "errorMessage": message})
	return answerPayload(body, kind, tail)
}

func answerPayload(body []byte, functionError, tail string) fakeAnswer {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Amz-Executed-Version", "$LATEST")
	if functionError != "" {
		h.Set("X-Amz-Function-Error", functionError)
	}
	if tail != "" {
		h.Set("X-Amz-Log-Result", base64.StdEncoding.EncodeToString([]byte(tail)))
	}
	return fakeAnswer{Status: http.StatusOK, Header: h, Body: body}
}

// fakeError is an error answer of the Invoke API.
func fakeError(status int, code, message string) fakeAnswer {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", code)
	h.Set("X-Amzn-RequestId", "0c3b2f1e-5d4a-4b3c-8a2b-1c0d9e8f7a6b")
	body, _ := json.Marshal(map[string]string{"Type": "User", "message": message})
	return fakeAnswer{Status: status, Header: h, Body: body}
}

// tooManyRequests is Lambda's throttle; retryAfter is "" for none.
func tooManyRequests(reason, retryAfter string) fakeAnswer {
	a := fakeError(http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded.")
	a.Body, _ = json.Marshal(map[string]string{"Type": "User", "message": "Rate Exceeded.", "Reason": reason})
	if retryAfter != "" {
		a.Header.Set("Retry-After", retryAfter)
	}
	return a
}
