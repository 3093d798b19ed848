// Package lambda is the executor that runs segments as AWS Lambda
// invocations of the hpsearch trainer function.
//
// Each segment is one synchronous Invoke (RequestResponse) whose payload is
// the SegmentRequest as JSON and whose answer is the SegmentResult. A
// payload is at most 6 MB (Lambda's limit for synchronous invocations), so
// requests carry only parameters and locations: data, checkpoints and
// results themselves go through object storage.
//
// Billing comes from the REPORT line of the log tail the invocation returns
// (LogType Tail): its Billed Duration and Max Memory Used replace the billed
// time and peak memory the trainer measured (its wall time stays). Without
// a REPORT line, the billed time is the measured round trip, rounded up to
// the millisecond, and the result says so in its warnings.
//
// Throttles (429 TooManyRequestsException, and other throttle answers) are
// retried with full-jitter exponential backoff, honouring Retry-After, until
// the context ends or Config.MaxThrottleWait passes: a throttled segment
// never ran, so a throttle is never a trial failure. Nothing else is
// retried here (the SDK's own retries are off): an invocation that failed
// may have run the segment, and the coordinator decides whether to run it
// again from its last checkpoint. Errors are ErrInvocation (Lambda did not
// run the segment, or cannot tell), ErrFunctionError (the function ran and
// failed), ErrThrottled and ErrRequestTooLarge.
//
// A canceled context aborts the HTTP call, but Lambda cannot be asked to
// stop an invocation: the function runs on until the segment's deadline,
// and the trainer stores its result next to the trial's checkpoints, where
// a coordinator can reconcile it from.
//
// Configuration comes from the environment as the AWS CLI reads it
// (config.LoadDefaultConfig): AWS_REGION, AWS_PROFILE, the credentials, and
// AWS_ENDPOINT_URL_LAMBDA or AWS_ENDPOINT_URL for another endpoint than
// AWS's (the local stack's Lambda front, say).
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// MaxPayloadBytes is the largest request payload Lambda accepts for a
// synchronous invocation (6 MB).
const MaxPayloadBytes = 6 << 20

// deadlineSlack is how long after a segment's deadline the executor waits
// for the invocation to answer before it gives up on the connection: the
// trainer returns at its deadline, so no answer by then means that the
// connection was lost.
const deadlineSlack = time.Minute

// Invoker is the part of the Lambda API client that the executor uses;
// *lambda.Client of the AWS SDK implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

// Config configures a Lambda executor.
type Config struct {
	// Client invokes the function. Defaults to NewClient's client, which is
	// configured from the environment.
	Client Invoker
	// Region, when set, overrides the AWS configuration's region for the
	// client New builds; it is ignored when Client is set.
	Region string
	// Function is the function's name, ARN or partial ARN. Required.
	Function string
	// Qualifier is the version or alias to invoke. Defaults to none
	// ($LATEST, or what the ARN names).
	Qualifier string
	// Concurrency is the most invocations of Function in flight at once
	// from this process, across every executor (every study) that invokes
	// the same Function: they share one semaphore, and must agree on its
	// size. Defaults to 100.
	Concurrency int
	// MemoryMB is the function's memory size, as the study prices it.
	// Optional: when set and a REPORT line says another Memory Size, the
	// result gets a warning, since its cost would be priced wrong. Lambda
	// allows 128 to 10,240.
	MemoryMB int
	// ThrottleBackoff is the backoff between tries of a throttled
	// invocation. Defaults to a Base of 200 ms and a Max of 20 s.
	ThrottleBackoff Backoff
	// MaxThrottleWait is how long Run keeps retrying a throttled
	// invocation, from the first throttle, before it returns an error
	// wrapping ErrThrottled. Defaults to 15 minutes.
	MaxThrottleWait time.Duration
	// OnThrottle, when set, is called on every throttle.
	OnThrottle func()
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = 100
	}
	if c.ThrottleBackoff.Base == 0 {
		c.ThrottleBackoff.Base = 200 * time.Millisecond
	}
	if c.ThrottleBackoff.Max == 0 {
		c.ThrottleBackoff.Max = max(20*time.Second, c.ThrottleBackoff.Base)
	}
	if c.MaxThrottleWait == 0 {
		c.MaxThrottleWait = 15 * time.Minute
	}
	if c.OnThrottle == nil {
		c.OnThrottle = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Function == "":
		return errors.New("lambda: no function: set Config.Function to the trainer function's name or ARN")
	case c.Concurrency < 1:
		return fmt.Errorf("lambda: concurrency %d: want at least 1", c.Concurrency)
	case c.MemoryMB != 0 && (c.MemoryMB < 128 || c.MemoryMB > 10240):
		return fmt.Errorf("lambda: memory %d MB: Lambda functions have 128 to 10,240 MB", c.MemoryMB)
	case c.ThrottleBackoff.Base < 0 || c.ThrottleBackoff.Max < c.ThrottleBackoff.Base:
		return fmt.Errorf("lambda: throttle backoff base %s, max %s: want 0 <= base <= max", c.ThrottleBackoff.Base, c.ThrottleBackoff.Max)
	case c.MaxThrottleWait < 0:
		return fmt.Errorf("lambda: max throttle wait %s: want a positive duration", c.MaxThrottleWait)
	}
	return nil
}

// NewClient returns a Lambda client configured from the environment
// (config.LoadDefaultConfig), with an HTTP client that honours
// AWS_CA_BUNDLE and with the SDK's retries off. A non-empty region
// overrides the configured one.
func NewClient(ctx context.Context, region string) (*awslambda.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient()),
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("lambda: load the AWS configuration: %w (check AWS_PROFILE, AWS_CONFIG_FILE and AWS_CA_BUNDLE)", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("lambda: no AWS region configured: set AWS_REGION (or a region in the AWS profile)")
	}
	return awslambda.NewFromConfig(cfg), nil
}

// Executor runs segments as Lambda invocations. It is safe for concurrent
// use.
type Executor struct {
	cfg      Config
	function string // Function and Qualifier, for messages
	endpoint string // where requests go, for messages
	slots    chan struct{}
}

var _ executor.Executor = (*Executor)(nil)

// New returns an executor of cfg.Function. It sends no request: a missing
// function or bad credentials show in the first Run's error.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		client, err := NewClient(ctx, cfg.Region)
		if err != nil {
			return nil, err
		}
		cfg.Client = client
	}
	slots, err := limitFor(cfg.Function, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg, function: cfg.Function, endpoint: "the Lambda endpoint", slots: slots}
	if cfg.Qualifier != "" {
		e.function += ":" + cfg.Qualifier
	}
	if c, ok := cfg.Client.(interface{ Options() awslambda.Options }); ok {
		if o := c.Options(); o.BaseEndpoint != nil {
			e.endpoint = *o.BaseEndpoint
		} else {
			e.endpoint = "the AWS Lambda endpoint of region " + o.Region
		}
	}
	return e, nil
}

// Run implements executor.Executor: it invokes the function with req and
// returns the trainer's result.
//
// Run waits for a slot of the function's concurrency limit, and retries
// throttled invocations; the time req waits so moves its deadline by as
// much, so a segment gets all its run time however long it waited.
//
// When ctx ends, Run aborts the HTTP call and returns ctx's cause. Lambda
// cannot be asked to stop an invocation: the function runs on until the
// segment's deadline (or the function's timeout) and writes its result next
// to the trial's checkpoints, where the coordinator finds it.
func (e *Executor) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	log := e.cfg.Logger.With(slog.String("function", e.function), slog.String("study", req.Study),
		slog.Int("trial", req.Trial), slog.Int("segment", req.Segment), slog.Int("attempt", req.Attempt))
	payload, err := e.payload(req)
	if err != nil {
		return hptype.SegmentResult{}, err
	}
	runStart, deadline := time.Now(), req.Deadline
	var throttles int
	var throttledSince time.Time
	for {
		if err := acquire(ctx, e.slots); err != nil {
			return hptype.SegmentResult{}, fmt.Errorf("lambda: %s trial %d attempt %d: wait for a slot of function %s's concurrency limit (%d): %w", req.Study, req.Trial, req.Attempt, e.function, e.cfg.Concurrency, err)
		}
		if !deadline.IsZero() {
			// Everything so far was waiting: queued behind the limit or
			// throttled.
			req.Deadline = deadline.Add(time.Since(runStart))
			if payload, err = e.payload(req); err != nil {
				release(e.slots)
				return hptype.SegmentResult{}, err
			}
		}
		start := time.Now()
		out, err := e.invoke(ctx, req, payload)
		rtt := time.Since(start)
		release(e.slots)
		if err == nil {
			res, err := e.result(log, req, out, rtt)
			res.Usage.Throttles = throttles
			return res, err
		}
		if ctx.Err() != nil {
			return hptype.SegmentResult{}, fmt.Errorf("lambda: %s trial %d attempt %d: invocation of function %s abandoned: %w (Lambda cannot stop it: the function runs on until the segment's deadline, and stores its result next to the trial's checkpoints)", req.Study, req.Trial, req.Attempt, e.function, context.Cause(ctx))
		}
		th, ok := asThrottle(err)
		if !ok {
			code, hint := describeInvokeError(err)
			return hptype.SegmentResult{}, fmt.Errorf("%w: %s trial %d attempt %d: invoke function %s at %s: %s: %w; %s", ErrInvocation, req.Study, req.Trial, req.Attempt, e.function, e.endpoint, code, err, hint)
		}
		now := time.Now()
		if throttles == 0 {
			throttledSince = now
		}
		throttles++
		e.cfg.OnThrottle()
		throttledFor := now.Sub(throttledSince)
		if throttledFor >= e.cfg.MaxThrottleWait {
			log.Warn("lambda: giving up on a throttled invocation", slog.Int("throttles", throttles), slog.Duration("throttled_for", throttledFor))
			return hptype.SegmentResult{}, fmt.Errorf("%w: %s trial %d attempt %d: function %s throttled %d times over %s (%s): %w; raise the function's reserved concurrency or the account's concurrency quota, or lower the study's parallelism", ErrThrottled, req.Study, req.Trial, req.Attempt, e.function, throttles, throttledFor.Round(time.Millisecond), th.reason, err)
		}
		wait := min(e.cfg.ThrottleBackoff.wait(throttles-1, th.retryAfter, rand.Int64N), e.cfg.MaxThrottleWait-throttledFor)
		log.Debug("lambda: throttled; retrying", slog.String("reason", th.reason), slog.Int("throttles", throttles), slog.Duration("retry_after", th.retryAfter), slog.Duration("wait", wait))
		if err := sleep(ctx, wait); err != nil {
			return hptype.SegmentResult{}, fmt.Errorf("lambda: %s trial %d attempt %d: stopped while function %s was throttled (%d times): %w", req.Study, req.Trial, req.Attempt, e.function, throttles, err)
		}
	}
}

// payload encodes req, refusing one over Lambda's limit.
func (e *Executor) payload(req hptype.SegmentRequest) ([]byte, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("lambda: encode the request of %s trial %d attempt %d: %w", req.Study, req.Trial, req.Attempt, err)
	}
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("%w: %s trial %d attempt %d: the request is %d bytes, over Lambda's limit of %d; pass large data through object storage, not in parameters or the environment", ErrRequestTooLarge, req.Study, req.Trial, req.Attempt, len(payload), MaxPayloadBytes)
	}
	return payload, nil
}

// invoke makes one synchronous invocation, with the SDK's retries off and,
// when the segment has a deadline, a backstop deadlineSlack after it.
func (e *Executor) invoke(ctx context.Context, req hptype.SegmentRequest, payload []byte) (*awslambda.InvokeOutput, error) {
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, req.Deadline.Add(deadlineSlack),
			fmt.Errorf("no answer %s after the segment's deadline: the connection was probably lost", deadlineSlack))
		defer cancel()
	}
	in := &awslambda.InvokeInput{
		FunctionName:   aws.String(e.cfg.Function),
		InvocationType: types.InvocationTypeRequestResponse,
		LogType:        types.LogTypeTail,
		Payload:        payload,
	}
	if e.cfg.Qualifier != "" {
		in.Qualifier = aws.String(e.cfg.Qualifier)
	}
	out, err := e.cfg.Client.Invoke(ctx, in, func(o *awslambda.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return out, err
}

// result reads a successful Invoke's answer.
func (e *Executor) result(log *slog.Logger, req hptype.SegmentRequest, out *awslambda.InvokeOutput, rtt time.Duration) (hptype.SegmentResult, error) {
	b := e.billing(log, out, rtt)
	if out.FunctionError != nil {
		fe := &FunctionError{Function: e.function, Kind: *out.FunctionError, Usage: b.usage()}
		var payload struct {
			Type    string `json:"errorType"`
			Message string `json:"errorMessage"`
		}
		if err := json.Unmarshal(out.Payload, &payload); err == nil && (payload.Type != "" || payload.Message != "") {
			fe.Type, fe.Message = payload.Type, payload.Message
		} else {
			fe.Message = truncate(string(out.Payload), 1024)
		}
		return hptype.SegmentResult{}, fmt.Errorf("%w: %s trial %d attempt %d: %w; the function's log (CloudWatch Logs) says more", ErrFunctionError, req.Study, req.Trial, req.Attempt, fe)
	}
	var res hptype.SegmentResult
	if err := json.Unmarshal(out.Payload, &res); err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("%w: %s trial %d attempt %d: function %s answered with no valid segment result (%v): %q; check that the function runs the hpsearch trainer", ErrFunctionError, req.Study, req.Trial, req.Attempt, e.function, err, truncate(string(out.Payload), 256))
	}
	switch res.Status {
	case hptype.SegmentCompleted, hptype.SegmentSuspended, hptype.SegmentFailed:
	default:
		return hptype.SegmentResult{}, fmt.Errorf("%w: %s trial %d attempt %d: function %s answered with status %q; check that the function runs the hpsearch trainer of this release", ErrFunctionError, req.Study, req.Trial, req.Attempt, e.function, res.Status)
	}
	if res.Study != req.Study || res.Trial != req.Trial || res.Segment != req.Segment || res.Attempt != req.Attempt {
		return hptype.SegmentResult{}, fmt.Errorf("%w: function %s answered for %s trial %d segment %d attempt %d, asked for %s trial %d segment %d attempt %d", ErrFunctionError, e.function, res.Study, res.Trial, res.Segment, res.Attempt, req.Study, req.Trial, req.Segment, req.Attempt)
	}
	b.apply(&res)
	if e.cfg.MemoryMB != 0 && b.memorySizeMB != 0 && b.memorySizeMB != int64(e.cfg.MemoryMB) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("function %s has %d MB of memory (REPORT line), but the study prices it at %d MB: set the study's memory to match the function", e.function, b.memorySizeMB, e.cfg.MemoryMB))
	}
	return res, nil
}

// billing is what one invocation was billed.
type billing struct {
	wallMS       int64 // the measured round trip
	billedMS     int64
	peakBytes    int64 // 0 when unknown
	memorySizeMB int64 // 0 when unknown
	// estimated, when set, says why billedMS is the round trip and not
	// the REPORT line's.
	estimated string
}

// billing reads out's REPORT line, or estimates from the round trip.
func (e *Executor) billing(log *slog.Logger, out *awslambda.InvokeOutput, rtt time.Duration) billing {
	b := billing{wallMS: rtt.Milliseconds()}
	var rep report
	var err error
	if out.LogResult == nil {
		err = errors.New("no REPORT line: the invocation returned no log tail")
	} else {
		var tail string
		if tail, err = decodeLogTail(*out.LogResult); err == nil {
			rep, err = parseReport(tail)
		}
	}
	if err != nil {
		// Lambda bills at least 1 ms, in whole milliseconds.
		b.billedMS = max(1, (rtt + time.Millisecond - 1).Milliseconds())
		b.estimated = fmt.Sprintf("%v; billed the measured round trip of %d ms", err, b.billedMS)
		log.Warn("lambda: billed duration estimated", slog.String("reason", err.Error()), slog.Int64("billed_ms", b.billedMS))
		return b
	}
	b.billedMS = rep.totalBilledMS()
	b.peakBytes = rep.maxMemoryUsedMB << 20
	b.memorySizeMB = rep.memorySizeMB
	log.Debug("lambda: invocation report", slog.String("request_id", rep.requestID),
		slog.Duration("duration", rep.duration), slog.Int64("billed_ms", b.billedMS),
		slog.Duration("init", rep.initDuration), slog.Duration("restore", rep.restoreDuration),
		slog.Int64("max_memory_mb", rep.maxMemoryUsedMB), slog.Duration("round_trip", rtt))
	return b
}

// usage is the invocation's usage.
func (b billing) usage() hptype.Usage {
	return hptype.Usage{WallMS: b.wallMS, BilledMS: b.billedMS, PeakMemoryBytes: b.peakBytes, Estimated: b.estimated != ""}
}

// apply puts the invocation's billing into the trainer's result: it keeps
// the trainer's wall time, and its peak memory when Lambda did not say.
func (b billing) apply(res *hptype.SegmentResult) {
	u := b.usage()
	u.WallMS = res.Usage.WallMS
	if u.PeakMemoryBytes == 0 {
		u.PeakMemoryBytes = res.Usage.PeakMemoryBytes
	}
	res.Usage = u
	if b.estimated != "" {
		estimated(res, b.estimated)
	}
}

// estimated marks res's billed duration as estimated.
func estimated(res *hptype.SegmentResult, why string) {
	res.Warnings = append(res.Warnings, "billed duration estimated: "+why)
}

// sleep waits for d, or returns ctx's cause when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// truncate shortens s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
