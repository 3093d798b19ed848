// Package cloudrun is the executor that runs segments as executions of a
// Google Cloud Run job: one execution of one task per segment, started
// with RunJob and per-execution overrides. The job's container is the
// trainer (functions/trainer/cloudrun explains the task's side); it reads
// its SegmentRequest from the overrides, stores its SegmentResult next to
// the trial's checkpoints, and Run reads it from there when the execution
// has ended.
//
// # The overrides
//
// Each execution gets:
//
//   - the request as plain JSON in HPSEARCH_REQUEST; a request larger than
//     a Cloud Run environment variable holds (32 KiB) is written to
//     Config.Requests instead and named by HPSEARCH_REQUEST_URI;
//   - task count 1;
//   - a task timeout of the time left until the request's deadline plus
//     Config.TimeoutMargin, in whole seconds. The trainer stops itself at
//     the deadline; the timeout is the backstop that bounds the bill.
//
// # The job
//
// New reads the job and refuses one that lets Cloud Run retry a task
// (max_retries must be 0): the coordinator retries segments itself, with a
// new attempt number that names the attempt's checkpoints and result and
// fences off late results; a Cloud Run retry would repeat the same attempt
// behind its back. The coordinator's identity needs run.jobs.get,
// run.jobs.runWithOverrides, run.operations.get and run.executions.cancel
// on the job (roles/run.developer has them).
//
// # Usage and billing
//
// Cloud Run bills a task's vCPU, memory and GPU per second of its
// instance, rounded up to the nearest 100 ms
// (https://cloud.google.com/run/pricing: "Cloud Run charges you only for
// the resources you use, rounded up to the nearest 100 millisecond"). Run
// sets the result's Usage.BilledMS to the execution's time from start to
// completion rounded up to 100 ms; the coordinator prices it with the
// task's Resources. WallMS stays the trainer's own measure.
package cloudrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	taskenv "github.com/hpsearch/hpsearch/functions/trainer/cloudrun"
	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// ErrExecutionFailed is returned when an execution failed (its task exited
// non-zero, ran out of memory or time, or could not start) and its trainer
// stored no result. The error text carries Cloud Run's message.
var ErrExecutionFailed = errors.New("cloud run execution failed")

// ErrCancelled is returned when an execution was cancelled, by Run because
// its ctx ended or by someone else, and its trainer stored no result.
var ErrCancelled = errors.New("cloud run execution cancelled")

// ErrNoResult is returned when an execution succeeded but no result is in
// the checkpoint store: the trainer image is not an hpsearch trainer, or
// it cannot write to the store.
var ErrNoResult = errors.New("cloud run execution stored no result")

// billingUnit is Cloud Run's billing granularity (see the package doc).
const billingUnit = 100 * time.Millisecond

// callTimeout bounds the calls Run makes that its ctx does not cancel:
// starting the execution, reading the result after ctx ended, and deleting
// the request object.
const callTimeout = 30 * time.Second

// Results reads the results trainers store next to the checkpoints; a
// *checkpoint.Store on the coordinator's checkpoint store is one.
type Results interface {
	// Result returns the result an attempt of a segment stored under
	// prefix, or nil when there is none.
	Result(ctx context.Context, prefix string, segment, attempt int) (*hptype.SegmentResult, error)
}

// Config configures the Cloud Run executor.
type Config struct {
	// Project, Region and Job name the Cloud Run job that runs the trainer:
	// projects/PROJECT/locations/REGION/jobs/JOB. Required.
	Project, Region, Job string
	// Container is the name of the trainer's container in the job. Needed
	// only when the job has several containers (sidecars); defaults to the
	// job's only container.
	Container string
	// ClientOptions configure the Cloud Run Admin API clients, e.g.
	// option.WithCredentialsFile, or option.WithEndpoint with
	// option.WithoutAuthentication for a local server. Defaults to none:
	// run.googleapis.com with Application Default Credentials.
	ClientOptions []option.ClientOption
	// VCPU, MemoryMB (mebibytes) and GPUs are what each task is given, which
	// the coordinator prices usage with. Each defaults to the job
	// container's limit (Cloud Run's own defaults, 1 vCPU and 512 MiB, when
	// the job sets none); a value that differs from the job's is an error,
	// since every segment would be mispriced.
	VCPU     float64
	MemoryMB int
	GPUs     int
	// Checkpoints is where results are read from: the store of the
	// requests' checkpoint policy. Required.
	Checkpoints Results
	// Requests is where a request too large for an environment variable is
	// written for its task to read; the task must be able to read it, so
	// it is usually the checkpoint store. Objects go under the trial's
	// checkpoint prefix, in requests/, and are deleted when the execution
	// has ended. Defaults to nil: such a request is an error.
	Requests blob.Store
	// PollInterval is how often Run asks whether an execution has ended.
	// Defaults to 10 seconds: each poll is one read request against the
	// Cloud Run Admin API's per-minute quota.
	PollInterval time.Duration
	// TimeoutMargin is added to the time left until a request's deadline
	// to make the task timeout: it covers the container's start and the
	// writing of the last checkpoint and the result. Run gives up waiting
	// (and cancels the execution) a second margin after the timeout.
	// Defaults to 1 minute.
	TimeoutMargin time.Duration
	// StopWait is how long Run waits, after it cancelled an execution
	// because its ctx ended, for the trainer to store its last result
	// (Cloud Run sends SIGTERM, and SIGKILL 10 seconds later). Defaults to
	// 30 seconds.
	StopWait time.Duration
	// Logger receives warnings (a failed poll, a request object left
	// behind) and debug records of each execution. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	for _, f := range []struct{ name, v string }{{"Project", c.Project}, {"Region", c.Region}, {"Job", c.Job}} {
		if f.v == "" || strings.Contains(f.v, "/") {
			return c, fmt.Errorf("cloudrun executor: Config.%s is %q; give the bare name (the job is projects/PROJECT/locations/REGION/jobs/JOB)", f.name, f.v)
		}
	}
	if c.Checkpoints == nil {
		return c, errors.New("cloudrun executor: Config.Checkpoints is nil; give the checkpoint store the trainers write their results to")
	}
	if c.VCPU < 0 || c.MemoryMB < 0 || c.GPUs < 0 {
		return c, fmt.Errorf("cloudrun executor: negative resources (VCPU %g, MemoryMB %d, GPUs %d); leave them 0 to take the job's", c.VCPU, c.MemoryMB, c.GPUs)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 10 * time.Second
	}
	if c.TimeoutMargin <= 0 {
		c.TimeoutMargin = time.Minute
	}
	if c.StopWait <= 0 {
		c.StopWait = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Executor runs segments as Cloud Run job executions. It is safe for
// concurrent use; Close releases its connections.
type Executor struct {
	cfg        Config
	job        string // projects/P/locations/R/jobs/J
	container  string // the trainer container's name in the job
	res        Resources
	jobs       *run.JobsClient
	executions *run.ExecutionsClient
	now        func() time.Time
}

// New connects to the Cloud Run Admin API and checks the job: it must
// exist, let no task retry (max_retries 0), and have the resources Config
// gives, if it gives any.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Executor{
		cfg: cfg,
		job: fmt.Sprintf("projects/%s/locations/%s/jobs/%s", cfg.Project, cfg.Region, cfg.Job),
		now: time.Now,
	}
	if e.jobs, err = run.NewJobsClient(ctx, cfg.ClientOptions...); err != nil {
		return nil, fmt.Errorf("cloudrun executor: connect to the Cloud Run Admin API: %w", err)
	}
	if e.executions, err = run.NewExecutionsClient(ctx, cfg.ClientOptions...); err != nil {
		e.jobs.Close()
		return nil, fmt.Errorf("cloudrun executor: connect to the Cloud Run Admin API: %w", err)
	}
	if err := e.checkJob(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// checkJob reads the job and takes its container and resources.
func (e *Executor) checkJob(ctx context.Context) error {
	job, err := e.jobs.GetJob(ctx, &runpb.GetJobRequest{Name: e.job})
	if err != nil {
		return fmt.Errorf("cloudrun executor: read Cloud Run job %s: %w (check that the job exists, e.g. with `gcloud run jobs describe %s --region %s`, and that this identity may get and run it)", e.job, err, e.cfg.Job, e.cfg.Region)
	}
	tt := job.GetTemplate().GetTemplate()
	if tt.GetRetries() == nil || tt.GetMaxRetries() != 0 {
		retries := "3 (Cloud Run's default)"
		if tt.GetRetries() != nil {
			retries = fmt.Sprint(tt.GetMaxRetries())
		}
		return fmt.Errorf("cloudrun executor: Cloud Run job %s lets a failed task retry %s times; hpsearch retries segments itself with a new attempt number, and a Cloud Run retry would repeat an attempt behind its back: set max_retries = 0 (gcloud run jobs update %s --region %s --max-retries 0)", e.job, retries, e.cfg.Job, e.cfg.Region)
	}
	cs := tt.GetContainers()
	var c *runpb.Container
	switch {
	case e.cfg.Container != "":
		i := slices.IndexFunc(cs, func(c *runpb.Container) bool { return c.GetName() == e.cfg.Container })
		if i < 0 {
			return fmt.Errorf("cloudrun executor: Cloud Run job %s has no container %q (Config.Container); it has %s", e.job, e.cfg.Container, containerNames(cs))
		}
		c = cs[i]
	case len(cs) == 1:
		c = cs[0]
	default:
		return fmt.Errorf("cloudrun executor: Cloud Run job %s has %d containers (%s); set Config.Container to the trainer's", e.job, len(cs), containerNames(cs))
	}
	e.container = c.GetName()
	r, err := jobResources(c.GetResources().GetLimits())
	if err != nil {
		return fmt.Errorf("cloudrun executor: Cloud Run job %s, container %q: %w", e.job, c.GetName(), err)
	}
	mismatch := func(field string, cfg, job any) error {
		return fmt.Errorf("cloudrun executor: Config.%s is %v but Cloud Run job %s gives each task %v, so every segment would be mispriced; leave Config.%s 0 to take the job's, or change the job", field, cfg, e.job, job, field)
	}
	switch {
	case e.cfg.VCPU != 0 && e.cfg.VCPU != r.VCPU:
		return mismatch("VCPU", e.cfg.VCPU, r.VCPU)
	case e.cfg.MemoryMB != 0 && e.cfg.MemoryMB != r.MemoryMB:
		return mismatch("MemoryMB", e.cfg.MemoryMB, r.MemoryMB)
	case e.cfg.GPUs != 0 && e.cfg.GPUs != r.GPUs:
		return mismatch("GPUs", e.cfg.GPUs, r.GPUs)
	}
	e.res = r
	return nil
}

func containerNames(cs []*runpb.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = fmt.Sprintf("%q", c.GetName())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Resources returns what each task of the job is given, for pricing.
func (e *Executor) Resources() Resources { return e.res }

// Close closes the connections to the Cloud Run Admin API.
func (e *Executor) Close() error {
	return errors.Join(e.jobs.Close(), e.executions.Close())
}

// Run implements executor.Executor: it starts an execution of the job for
// the segment, waits for it to end and returns the result the trainer
// stored. The request must have a checkpoint policy, since the result
// comes back through the checkpoint store.
//
// A result the trainer stored is returned whatever the execution's end:
// it is the attempt's own (attempts are never retried by Cloud Run), and
// the trainer stores it last. Without one, the error wraps
// ErrExecutionFailed, ErrCancelled or ErrNoResult. When ctx ends, Run
// cancels the execution, which gives the trainer SIGTERM, and waits up to
// StopWait for the result it then stores, usually a suspended one.
func (e *Executor) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	seg := fmt.Sprintf("trial %d segment %d attempt %d", req.Trial, req.Segment, req.Attempt)
	if req.Checkpoint == nil {
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: the request for %s has no checkpoint policy; a Cloud Run task returns its result through the checkpoint store, so give one", seg)
	}
	env, cleanup, err := e.requestEnv(ctx, req)
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: %s: %w", seg, err)
	}
	defer cleanup()

	overrides := &runpb.RunJobRequest_Overrides{
		ContainerOverrides: []*runpb.RunJobRequest_Overrides_ContainerOverride{{Name: e.container, Env: []*runpb.EnvVar{env}}},
		TaskCount:          1,
	}
	waitCtx := ctx
	if !req.Deadline.IsZero() {
		now := e.now()
		timeout := taskTimeout(req.Deadline.Sub(now), e.cfg.TimeoutMargin)
		overrides.Timeout = durationpb.New(timeout)
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadlineCause(ctx, now.Add(timeout+e.cfg.TimeoutMargin),
			fmt.Errorf("the execution was still running %s after its task timeout of %s", e.cfg.TimeoutMargin, timeout))
		defer cancel()
	}
	op, err := e.start(waitCtx, overrides)
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: %s: %w", seg, err)
	}
	e.cfg.Logger.DebugContext(ctx, "cloud run execution started", slog.String("job", e.job), slog.String("execution", executionName(op)), slog.Int("trial", req.Trial), slog.Int("segment", req.Segment), slog.Int("attempt", req.Attempt))
	end, err := e.wait(waitCtx, op)
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: %s: %w", seg, err)
	}

	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
	}
	cp := req.Checkpoint
	res, err := e.cfg.Checkpoints.Result(ctx, cp.Prefix, req.Segment, req.Attempt)
	switch {
	case err != nil:
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: read the result of %s (execution %s) from the checkpoint store %s: %w", seg, end.name, cp.Store, err)
	case res == nil:
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: %s: %w", seg, end.err())
	case res.Study != req.Study || res.Trial != req.Trial || res.Segment != req.Segment || res.Attempt != req.Attempt:
		return hptype.SegmentResult{}, fmt.Errorf("cloudrun executor: the result stored for %s of study %s is for study %s trial %d segment %d attempt %d", seg, req.Study, res.Study, res.Trial, res.Segment, res.Attempt)
	}
	res.Usage.BilledMS = billedMS(end.exec, res.Usage.WallMS)
	return *res, nil
}

// start starts an execution with the overrides, unless ctx has ended.
// The call itself is not abandoned when ctx ends meanwhile: the execution
// it starts would run, unnamed, until its timeout; wait stops it instead.
func (e *Executor) start(ctx context.Context, overrides *runpb.RunJobRequest_Overrides) (*run.RunJobOperation, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	op, err := e.jobs.RunJob(cctx, &runpb.RunJobRequest{Name: e.job, Overrides: overrides})
	if err != nil {
		return nil, fmt.Errorf("run Cloud Run job %s: %w", e.job, err)
	}
	return op, nil
}

// requestEnv returns the variable that gives the task its request: the
// JSON itself, or the URI of an object in Config.Requests holding it, which
// cleanup deletes.
func (e *Executor) requestEnv(ctx context.Context, req hptype.SegmentRequest) (env *runpb.EnvVar, cleanup func(), err error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the segment request: %w", err)
	}
	if len(payload) <= taskenv.MaxEnvRequest {
		return envVar(taskenv.EnvRequest, string(payload)), func() {}, nil
	}
	if e.cfg.Requests == nil {
		return nil, nil, fmt.Errorf("the request is %d bytes, more than the %d a Cloud Run environment variable holds; set Config.Requests to pass it through object storage, or shorten the workload's environment", len(payload), taskenv.MaxEnvRequest)
	}
	key := fmt.Sprintf("%s/requests/%06d.%03d.json", req.Checkpoint.Prefix, req.Segment, req.Attempt)
	if err := e.cfg.Requests.Put(ctx, key, bytes.NewReader(payload), int64(len(payload)), blob.PutOptions{}); err != nil {
		return nil, nil, fmt.Errorf("write the request for its task to read: %w", err)
	}
	cleanup = func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if err := e.cfg.Requests.Delete(dctx, key); err != nil {
			e.cfg.Logger.WarnContext(ctx, "cloud run executor: could not delete a request object", slog.String("key", key), slog.Any("error", err))
		}
	}
	return envVar(taskenv.EnvRequestURI, objectURI(e.cfg.Requests.URI(), key)), cleanup, nil
}

func envVar(name, value string) *runpb.EnvVar {
	return &runpb.EnvVar{Name: name, Values: &runpb.EnvVar_Value{Value: value}}
}

// objectURI names key in the store at storeURI, each element
// percent-escaped, as the task's URI parsing expects.
func objectURI(storeURI, key string) string {
	elems := strings.Split(key, "/")
	for i, el := range elems {
		elems[i] = url.PathEscape(el)
	}
	return storeURI + "/" + strings.Join(elems, "/")
}

// taskTimeout is the time left until the deadline (none when it has
// passed) plus margin, rounded up to whole seconds as Cloud Run takes it.
func taskTimeout(left, margin time.Duration) time.Duration {
	return (max(left, 0) + margin + time.Second - 1).Truncate(time.Second)
}

// billedMS is the execution's billed time: start to completion, rounded up
// to Cloud Run's 100 ms. Without both times (the execution never ran to
// its end as far as Run saw) the trainer's wall time stands in.
func billedMS(exec *runpb.Execution, wallMS int64) int64 {
	d := time.Duration(wallMS) * time.Millisecond
	if s, c := exec.GetStartTime(), exec.GetCompletionTime(); s != nil && c != nil && !c.AsTime().Before(s.AsTime()) {
		d = c.AsTime().Sub(s.AsTime())
	}
	return ((d + billingUnit - 1) / billingUnit * billingUnit).Milliseconds()
}

// ending is how an execution ended, as far as Run saw.
type ending struct {
	name string
	// exec is the execution as last seen; nil if never seen.
	exec *runpb.Execution
	// opErr is the error the operation completed with.
	opErr error
	// stopped is why Run cancelled the execution, when it did.
	stopped error
	// running: the execution had not ended when Run stopped waiting.
	running bool
}

// err says why an execution that stored no result ended.
func (d ending) err() error {
	switch {
	case d.stopped != nil && d.running:
		return fmt.Errorf("%w: Run cancelled execution %s (%w), which had not ended when Run stopped waiting", ErrCancelled, d.name, d.stopped)
	case d.stopped != nil:
		return fmt.Errorf("%w: Run cancelled execution %s (%w) and its trainer stored no result", ErrCancelled, d.name, d.stopped)
	case d.exec.GetCancelledCount() > 0:
		return fmt.Errorf("%w: execution %s was cancelled (not by hpsearch) before its trainer stored a result", ErrCancelled, d.name)
	case d.opErr != nil || d.exec.GetFailedCount() > 0:
		return fmt.Errorf("%w: execution %s: %s%s", ErrExecutionFailed, d.name, d.message(), d.logs())
	}
	return fmt.Errorf("%w: execution %s succeeded but no result is in the checkpoint store; is the job's image an hpsearch trainer, and may it write to the store?%s", ErrNoResult, d.name, d.logs())
}

// message joins the operation's error and the execution's failed
// conditions.
func (d ending) message() string {
	var msgs []string
	if d.opErr != nil {
		msgs = append(msgs, status.Convert(d.opErr).Message())
	}
	for _, c := range d.exec.GetConditions() {
		if c.GetState() == runpb.Condition_CONDITION_FAILED && c.GetMessage() != "" && !slices.Contains(msgs, c.GetMessage()) {
			msgs = append(msgs, c.GetMessage())
		}
	}
	if len(msgs) == 0 {
		return fmt.Sprintf("%d task(s) failed", d.exec.GetFailedCount())
	}
	return strings.Join(msgs, "; ")
}

func (d ending) logs() string {
	if u := d.exec.GetLogUri(); u != "" {
		return "; logs: " + u
	}
	return ""
}

// executionName is the name of the operation's execution, from its
// metadata, or "" before the server gave it.
func executionName(op *run.RunJobOperation) string {
	exec, err := op.Metadata()
	if err != nil {
		return ""
	}
	return exec.GetName()
}

// wait polls op every PollInterval until it is done. When ctx ends first,
// it cancels the execution and waits up to StopWait for it to end.
func (e *Executor) wait(ctx context.Context, op *run.RunJobOperation) (ending, error) {
	tick := time.NewTicker(e.cfg.PollInterval)
	defer tick.Stop()
	for !op.Done() {
		select {
		case <-ctx.Done():
			return e.stop(ctx, op, tick)
		case <-tick.C:
		}
		if err := e.poll(ctx, op); err != nil {
			if ctx.Err() != nil {
				return e.stop(ctx, op, tick)
			}
			return ending{}, err
		}
	}
	return ended(ctx, op), nil
}

// poll refreshes op. A failure the API marks as passing is logged and
// waited out; another is returned.
func (e *Executor) poll(ctx context.Context, op *run.RunJobOperation) error {
	_, err := op.Poll(ctx)
	if err == nil || op.Done() {
		return nil
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Internal, codes.Aborted:
		e.cfg.Logger.WarnContext(ctx, "cloud run executor: polling an execution failed; retrying", slog.String("execution", executionName(op)), slog.Any("error", err))
		return nil
	}
	return fmt.Errorf("poll execution %s of job %s: %w", executionName(op), e.job, err)
}

// ended reads a done operation: the execution it returned or, when it
// completed with an error, the execution of its metadata.
func ended(ctx context.Context, op *run.RunJobOperation) ending {
	exec, opErr := op.Poll(ctx) // done: answered from op itself
	if exec == nil {
		exec, _ = op.Metadata()
	}
	return ending{name: exec.GetName(), exec: exec, opErr: opErr}
}

// stop cancels the execution because ctx ended and waits up to StopWait
// for it to end, so that the trainer's last result can be read.
func (e *Executor) stop(ctx context.Context, op *run.RunJobOperation, tick *time.Ticker) (ending, error) {
	cause := context.Cause(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopWait)
	defer cancel()
	name := executionName(op)
	if name == "" {
		// The server has not said yet which execution it started.
		if _, err := op.Poll(sctx); err != nil && !op.Done() {
			return ending{}, fmt.Errorf("stopped (%w), but the execution of job %s is unknown, so it runs until its task timeout: %w", cause, e.job, err)
		}
		if name = executionName(op); name == "" && !op.Done() {
			return ending{}, fmt.Errorf("stopped (%w), but the server has not named the execution of job %s, so it runs until its task timeout", cause, e.job)
		}
	}
	if !op.Done() {
		if _, err := e.executions.CancelExecution(sctx, &runpb.CancelExecutionRequest{Name: name}); err != nil {
			// It may have ended meanwhile; otherwise it goes on running.
			if _, perr := op.Poll(sctx); !op.Done() {
				err = errors.Join(err, perr)
				return ending{}, fmt.Errorf("stopped (%w), but cancelling execution %s failed, so it runs until its task timeout: %w", cause, name, err)
			}
		}
	}
	for !op.Done() {
		select {
		case <-sctx.Done():
			exec, _ := op.Metadata()
			return ending{name: name, exec: exec, stopped: cause, running: true}, nil
		case <-tick.C:
		}
		if err := e.poll(sctx, op); err != nil && sctx.Err() == nil {
			return ending{}, fmt.Errorf("stopped (%w) and cancelled execution %s: %w", cause, name, err)
		}
	}
	d := ended(sctx, op)
	d.stopped = cause
	return d, nil
}
