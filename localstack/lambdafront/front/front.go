// Package front is a Docker-free AWS Lambda data plane for tests: an HTTP
// server that implements Lambda's Invoke API in front of pools of
// aws-lambda-rie processes, each running a function's real bootstrap.
//
// aws-lambda-rie is the real Lambda runtime API around a bootstrap, but it
// is not Lambda: it serves one path (/2015-03-31/functions/function/
// invocations), crashes on a second concurrent invocation, answers a
// timeout 200 with a plain-text body, a crashed runtime 502 and a function
// error 200 with no header, and returns no log tail. The front turns that
// into what Lambda does:
//
//   - POST /2015-03-31/functions/{FunctionName}/invocations, where
//     FunctionName is a name, "NAME:QUALIFIER", a partial ARN
//     ("ACCOUNT:function:NAME") or an ARN; the qualifier may also come as
//     ?Qualifier=, and only $LATEST exists. An unknown function is 404
//     ResourceNotFoundException.
//   - Each function has Concurrency execution environments, each its own
//     aws-lambda-rie process that takes one invocation at a time. When all
//     are busy the invocation is throttled: 429 TooManyRequestsException
//     with Reason ReservedFunctionConcurrentInvocationLimitExceeded, which
//     the AWS SDKs report as such.
//   - A function error (returned error, panic, crash, timeout) is 200 with
//     X-Amz-Function-Error: Unhandled and Lambda's error payload, never a
//     5xx that an SDK would retry, running the function again.
//   - With X-Amz-Log-Type: Tail, X-Amz-Log-Result holds the last 4 KB of
//     the invocation's log: START, the function's output, END and a REPORT
//     line whose Duration and Billed Duration the front measured around the
//     invocation, and whose Max Memory Used is the peak resident memory of
//     the runtime's processes.
//   - An environment whose runtime timed out, crashed or exited is stopped
//     and replaced (a cold start) before it takes another invocation. An
//     invocation that found no environment able to start did not run: it
//     is 500 ServiceException, which an SDK may retry.
//
// Other Lambda API requests (the control plane) go to Config.ControlPlane,
// moto_server say, when it is set. The front does not check signatures,
// enforce memory limits, or emulate asynchronous (Event) invocations.
package front

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Config configures a Front.
type Config struct {
	// Functions are the functions the front serves. At least one is
	// required; names must be unique.
	Functions []Function
	// RIE is the aws-lambda-rie executable. Defaults to the one on PATH.
	RIE string
	// Region is the region in ARNs and the runtime's AWS_REGION. Defaults
	// to us-east-1.
	Region string
	// Account is the account in ARNs. Defaults to moto's, 123456789012.
	Account string
	// ControlPlane is the base URL that every request other than Invoke
	// is proxied to (moto_server's Lambda control plane, say). Defaults to
	// none: such requests get 404 UnknownOperationException.
	ControlPlane string
	// Logger receives the front's log and, at Info, the functions' output
	// (aws-lambda-rie's own log at Debug). Defaults to discarding it.
	Logger *slog.Logger
}

// Front serves the Lambda Invoke API; see the package doc.
type Front struct {
	cfg    Config
	log    *slog.Logger
	pools  map[string]*pool
	proxy  http.Handler
	mux    *http.ServeMux
	client *http.Client
	done   chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup // invocations in progress
}

// errClosed is the cause of invocations cut short by Close.
var errClosed = errors.New("the Lambda front is shutting down")

// New returns a front for cfg. It starts no process: an environment
// starts its aws-lambda-rie at its first invocation, as Lambda starts an
// execution environment on demand (a cold start).
func New(cfg Config) (*Front, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Account == "" {
		cfg.Account = "123456789012"
	}
	if cfg.RIE == "" {
		cfg.RIE = "aws-lambda-rie"
	}
	rie, err := exec.LookPath(cfg.RIE)
	if err != nil {
		return nil, fmt.Errorf("find aws-lambda-rie: %w; install it with: go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest, and put $(go env GOPATH)/bin on PATH", err)
	}
	if len(cfg.Functions) == 0 {
		return nil, errors.New("no function to serve: give at least one")
	}
	f := &Front{
		cfg:   cfg,
		log:   cfg.Logger,
		pools: map[string]*pool{},
		// Proxy nil: never through HTTP_PROXY to 127.0.0.1.
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}},
		done:   make(chan struct{}),
	}
	for _, fn := range cfg.Functions {
		fn = fn.withDefaults()
		if err := fn.validate(); err != nil {
			return nil, err
		}
		if fn.Bootstrap, err = filepath.Abs(fn.Bootstrap); err != nil {
			return nil, fmt.Errorf("function %s: bootstrap: %w", fn.Name, err)
		}
		if _, dup := f.pools[fn.Name]; dup {
			return nil, fmt.Errorf("function %s is given twice", fn.Name)
		}
		p := &pool{fn: fn}
		for i := range fn.Concurrency {
			p.idle = append(p.idle, &environment{fn: fn, index: i, rie: rie, region: cfg.Region, log: f.log})
		}
		p.all = append(p.all, p.idle...)
		f.pools[fn.Name] = p
	}
	if cfg.ControlPlane != "" {
		u, err := url.Parse(cfg.ControlPlane)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("control plane %q: want a base URL like http://127.0.0.1:4566", cfg.ControlPlane)
		}
		f.proxy = httputil.NewSingleHostReverseProxy(u)
	}
	f.mux = http.NewServeMux()
	f.mux.HandleFunc("POST /2015-03-31/functions/{function}/invocations", f.invoke)
	f.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	f.mux.HandleFunc("/", f.other)
	return f, nil
}

// ServeHTTP implements http.Handler.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// InFlight returns how many invocations of the named function are running.
func (f *Front) InFlight(function string) int {
	p, ok := f.pools[function]
	if !ok {
		return 0
	}
	return p.busy()
}

// Close stops every aws-lambda-rie process (and the runtimes they run),
// SIGTERM first; invocations in progress end with a function error. It
// returns when they have all ended.
func (f *Front) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range f.pools {
		for _, e := range p.all {
			wg.Go(e.shutdown)
		}
	}
	wg.Wait()
	f.running.Wait()
	return nil
}

// other answers a request that is not an Invoke.
func (f *Front) other(w http.ResponseWriter, r *http.Request) {
	if f.proxy != nil {
		f.proxy.ServeHTTP(w, r)
		return
	}
	writeError(w, http.StatusNotFound, "UnknownOperationException", "message",
		fmt.Sprintf("%s %s: this Lambda front serves only Invoke (POST /2015-03-31/functions/NAME/invocations); start it with a control plane (-control-plane URL) for the rest of the Lambda API", r.Method, r.URL.Path))
}

// invocation is one invocation on its way to an environment.
type invocation struct {
	requestID     string
	payload       []byte
	clientContext string
}

// invoke serves Invoke.
func (f *Front) invoke(w http.ResponseWriter, r *http.Request) {
	requestID := uuid.NewString()
	w.Header().Set("X-Amzn-RequestId", requestID)
	name, qualifier, err := parseFunctionName(r.PathValue("function"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "ValidationException", "message", err.Error())
		return
	}
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		if qualifier != "" && qualifier != q {
			writeError(w, http.StatusBadRequest, "InvalidParameterValueException", "message", "The derived qualifier from the function name does not match the specified qualifier.")
			return
		}
		qualifier = q
	}
	p, ok := f.pools[name]
	if !ok || (qualifier != "" && qualifier != "$LATEST") {
		arn := f.arn(name)
		if qualifier != "" {
			arn += ":" + qualifier
		}
		writeError(w, http.StatusNotFound, "ResourceNotFoundException", "Message", "Function not found: "+arn)
		return
	}
	switch t := r.Header.Get("X-Amz-Invocation-Type"); t {
	case "", "RequestResponse":
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		writeError(w, http.StatusBadRequest, "InvalidParameterValueException", "message",
			fmt.Sprintf("InvocationType %q: this Lambda front runs only synchronous invocations (RequestResponse) and DryRun", t))
		return
	}
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", "message",
			fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", maxRequestBytes))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "InvalidRequestContentException", "message", fmt.Sprintf("read the request body: %v", err))
		return
	case len(payload) > 0 && !json.Valid(payload):
		writeError(w, http.StatusBadRequest, "InvalidRequestContentException", "message", "Could not parse request body into json: the payload is not valid JSON")
		return
	}

	env, ok := p.acquire()
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, "TooManyRequestsException", map[string]string{
			"Type":    "User",
			"message": "Rate Exceeded.",
			"Reason":  "ReservedFunctionConcurrentInvocationLimitExceeded",
		})
		return
	}
	inv := invocation{requestID: requestID, payload: payload, clientContext: r.Header.Get("X-Amz-Client-Context")}
	ctx, cancel := f.invocationContext(r)
	defer cancel()
	a, tail, err := f.run(ctx, p, env, inv)
	if err != nil {
		// The function did not run: Lambda's answer is a ServiceException,
		// which an SDK may retry.
		writeError(w, http.StatusInternalServerError, "ServiceException", "Message", fmt.Sprintf("the function could not run: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if a.functionError {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	if r.Header.Get("X-Amz-Log-Type") == "Tail" {
		w.Header().Set("X-Amz-Log-Result", base64.StdEncoding.EncodeToString(tail))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(a.payload)
}

// run runs inv in env, taken from p, and returns the answer and the log
// tail, or an error when the function could not run: the front is
// closing, or the environment could not start. It gives env back to p
// before it returns, so that a caller that has the answer finds env free.
func (f *Front) run(ctx context.Context, p *pool, env *environment, inv invocation) (answer, []byte, error) {
	defer p.release(env)
	fn := p.fn
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return answer{}, nil, errClosed
	}
	f.running.Add(1)
	defer f.running.Done()
	f.mu.Unlock()
	proc, err := env.process(ctx)
	if err != nil {
		f.log.Error("cannot start an execution environment", "function", fn.Name, "env", env.index, "err", err)
		return answer{}, nil, err
	}
	out := proc.invoke(ctx, f.client, fn, inv)
	a := decide(out, fn, inv.requestID, time.Now())
	if a.reset {
		f.log.Warn("replacing the execution environment", "function", fn.Name, "env", env.index, "request_id", inv.requestID,
			"status", a.status, "error_type", a.errorType, "rie_status", out.status, "err", out.err)
		env.reset()
	}
	rep := report{
		requestID:      inv.requestID,
		duration:       max(out.duration-out.init, 0),
		init:           out.init,
		memoryMB:       fn.MemoryMB,
		maxMemoryBytes: out.peak,
		status:         a.status,
		errorType:      a.errorType,
	}
	f.log.Info("invoked", "function", fn.Name, "env", env.index, "request_id", inv.requestID, "function_error", a.functionError, "report", rep.String())
	return a, logTail(inv.requestID, out.lines, a.logLine, rep), nil
}

// invocationContext returns the context of an invocation that r asked
// for: it ends when the front closes (with cause errClosed), not when the
// caller goes away, as Lambda runs an invocation to its end whether or not
// its caller still waits.
func (f *Front) invocationContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	stop := make(chan struct{})
	go func() {
		select {
		case <-f.done:
			cancel(errClosed)
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		cancel(nil)
	}
}

// arn returns the ARN of the named function.
func (f *Front) arn(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", f.cfg.Region, f.cfg.Account, name)
}

// parseFunctionName splits an Invoke's FunctionName into the function's
// name and the qualifier it carries, if any. It accepts a name
// ("my-function"), a name with a qualifier ("my-function:v1"), a partial
// ARN ("123456789012:function:my-function[:v1]") and an ARN
// ("arn:aws:lambda:us-east-1:123456789012:function:my-function[:v1]"); the
// ARN's region and account are not checked.
func parseFunctionName(s string) (name, qualifier string, err error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) <= 2:
		name = parts[0]
	case (len(parts) == 3 || len(parts) == 4) && parts[1] == "function":
		name = parts[2]
	case (len(parts) == 7 || len(parts) == 8) && parts[0] == "arn" && parts[2] == "lambda" && parts[5] == "function":
		name = parts[6]
	default:
		return "", "", fmt.Errorf("FunctionName %q: want a name, NAME:QUALIFIER, ACCOUNT:function:NAME or arn:aws:lambda:REGION:ACCOUNT:function:NAME, each with an optional :QUALIFIER", s)
	}
	if len(parts) == 2 || len(parts) == 4 || len(parts) == 8 {
		qualifier = parts[len(parts)-1]
		if qualifier == "" {
			return "", "", fmt.Errorf("FunctionName %q: empty qualifier after ':'", s)
		}
	}
	if !validName(name) {
		return "", "", fmt.Errorf("FunctionName %q: the name %q is not 1 to 64 letters, digits, '-' and '_'", s, name)
	}
	return name, qualifier, nil
}

// writeError writes a Lambda API error whose message is under key
// messageKey ("message" for most errors, "Message" for
// ResourceNotFoundException).
func writeError(w http.ResponseWriter, status int, errType, messageKey, message string) {
	writeJSON(w, status, errType, map[string]string{"Type": "User", messageKey: message})
}

// writeJSON writes an error body with Lambda's error headers.
func writeJSON(w http.ResponseWriter, status int, errType string, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", errType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// pool is a function's execution environments.
type pool struct {
	fn  Function
	all []*environment

	mu   sync.Mutex
	idle []*environment // the most recently used last
}

// acquire takes an idle environment, the most recently used (warm) one
// first, as Lambda does; false when every one is busy.
func (p *pool) acquire() (*environment, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil, false
	}
	e := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return e, true
}

// release gives back an environment taken with acquire.
func (p *pool) release(e *environment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, e)
}

// busy returns how many environments are taken.
func (p *pool) busy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all) - len(p.idle)
}
