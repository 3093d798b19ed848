package cloudrun

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	taskenv "github.com/hpsearch/hpsearch/functions/trainer/cloudrun"
)

// fakeJobs is a local Cloud Run Admin API: a gRPC server implementing the
// Jobs and Executions services, and the long-running operations service
// that RunJob's operation is polled through, as far as the executor uses
// them (GetJob, RunJob, CancelExecution, GetOperation). It records the
// requests it gets. RunJob starts an execution and hands it to play, which
// acts as Cloud Run would: runTask, the default, runs the trainer's task
// in-process with the environment the overrides carry and ends the
// execution as the task ended.
type fakeJobs struct {
	runpb.UnimplementedJobsServer
	runpb.UnimplementedExecutionsServer
	longrunningpb.UnimplementedOperationsServer

	job *runpb.Job
	// play plays an execution; it runs in its own goroutine.
	play func(x *fakeExecution)
	// taskAttempt is the CLOUD_RUN_TASK_ATTEMPT runTask gives the task.
	taskAttempt int
	// closing is closed when the test ends: running plays must return.
	closing chan struct{}

	wg sync.WaitGroup
	mu sync.Mutex
	// pollErrs are the errors the next GetOperation calls fail with.
	pollErrs []codes.Code
	runs     []*runpb.RunJobRequest
	cancels  []string
	ops      map[string]*longrunningpb.Operation
	execs    map[string]*fakeExecution
	ended    map[string]*runpb.Execution
}

const (
	fakeProject = "proj"
	fakeRegion  = "europe-west4"
	fakeJobName = "trainer-job"
	fakeJobPath = "projects/" + fakeProject + "/locations/" + fakeRegion + "/jobs/" + fakeJobName
)

// fakeJob is the job New finds: one container, no retries, 2 vCPU, 4 GiB.
func fakeJob() *runpb.Job {
	return &runpb.Job{
		Name: fakeJobPath,
		Template: &runpb.ExecutionTemplate{
			TaskCount: 1,
			Template: &runpb.TaskTemplate{
				Retries: &runpb.TaskTemplate_MaxRetries{MaxRetries: 0},
				Containers: []*runpb.Container{{
					Name:      "trainer",
					Image:     "europe-west4-docker.pkg.dev/proj/hpsearch/trainer:latest",
					Env:       []*runpb.EnvVar{envVar("HPSEARCH_FROM_JOB", "kept")},
					Resources: &runpb.ResourceRequirements{Limits: map[string]string{"cpu": "2", "memory": "4Gi"}},
				}},
			},
		},
	}
}

// startFake serves f on a random local port until the test ends and
// returns the client options that reach it.
func startFake(t *testing.T, f *fakeJobs) []option.ClientOption {
	t.Helper()
	f.closing = make(chan struct{})
	f.ops = map[string]*longrunningpb.Operation{}
	f.execs = map[string]*fakeExecution{}
	f.ended = map[string]*runpb.Execution{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runpb.RegisterJobsServer(srv, f)
	runpb.RegisterExecutionsServer(srv, f)
	longrunningpb.RegisterOperationsServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(func() {
		close(f.closing)
		srv.Stop()
		f.wg.Wait()
	})
	return []option.ClientOption{
		option.WithEndpoint(lis.Addr().String()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// fakeExecution is one execution RunJob started.
type fakeExecution struct {
	f      *fakeJobs
	req    *runpb.RunJobRequest
	name   string
	opName string
	start  time.Time
	// cancelled is closed by CancelExecution.
	cancelled  chan struct{}
	cancelOnce sync.Once
}

func (f *fakeJobs) GetJob(_ context.Context, req *runpb.GetJobRequest) (*runpb.Job, error) {
	if req.GetName() != f.job.GetName() {
		return nil, status.Errorf(codes.NotFound, "Resource '%s' of kind 'JOB' in region '%s' in project '%s' does not exist.", req.GetName(), fakeRegion, fakeProject)
	}
	return proto.Clone(f.job).(*runpb.Job), nil
}

func (f *fakeJobs) RunJob(_ context.Context, req *runpb.RunJobRequest) (*longrunningpb.Operation, error) {
	if req.GetName() != f.job.GetName() {
		return nil, status.Errorf(codes.NotFound, "job %s does not exist", req.GetName())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, proto.Clone(req).(*runpb.RunJobRequest))
	n := len(f.runs)
	x := &fakeExecution{
		f:         f,
		req:       req,
		name:      fmt.Sprintf("%s/executions/%s-%05d", fakeJobPath, fakeJobName, n),
		opName:    fmt.Sprintf("projects/%s/locations/%s/operations/op-%d", fakeProject, fakeRegion, n),
		start:     time.Now(),
		cancelled: make(chan struct{}),
	}
	op := &longrunningpb.Operation{Name: x.opName, Metadata: mustAny(x.execution())}
	f.ops[x.opName] = op
	f.execs[x.name] = x
	f.wg.Go(func() { f.play(x) })
	return proto.Clone(op).(*longrunningpb.Operation), nil
}

func (f *fakeJobs) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pollErrs) > 0 {
		code := f.pollErrs[0]
		f.pollErrs = f.pollErrs[1:]
		return nil, status.Errorf(code, "fake: GetOperation fails with %s", code)
	}
	op, ok := f.ops[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "operation %s does not exist", req.GetName())
	}
	return proto.Clone(op).(*longrunningpb.Operation), nil
}

func (f *fakeJobs) CancelExecution(_ context.Context, req *runpb.CancelExecutionRequest) (*longrunningpb.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, req.GetName())
	x, ok := f.execs[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "execution %s does not exist", req.GetName())
	}
	x.cancelOnce.Do(func() { close(x.cancelled) })
	return &longrunningpb.Operation{Name: x.opName + "-cancel", Metadata: mustAny(x.execution())}, nil
}

// execution is the execution as the API shows it while it runs.
func (x *fakeExecution) execution() *runpb.Execution {
	return &runpb.Execution{
		Name:      x.name,
		Job:       fakeJobPath,
		TaskCount: 1,
		StartTime: timestamppb.New(x.start),
		LogUri:    "https://console.cloud.google.com/logs/viewer?execution=" + x.name,
	}
}

// env is the task's environment: what Cloud Run sets, and the overridden
// container's variables with the overrides' merged in.
func (x *fakeExecution) env() map[string]string {
	env := map[string]string{
		"CLOUD_RUN_JOB":        fakeJobName,
		"CLOUD_RUN_EXECUTION":  x.name,
		"CLOUD_RUN_TASK_COUNT": "1",
		taskenv.EnvTaskIndex:   "0",
		taskenv.EnvTaskAttempt: fmt.Sprint(x.f.taskAttempt),
	}
	for _, o := range x.req.GetOverrides().GetContainerOverrides() {
		for _, c := range x.f.job.GetTemplate().GetTemplate().GetContainers() {
			if c.GetName() == o.GetName() {
				for _, v := range c.GetEnv() {
					env[v.GetName()] = v.GetValue()
				}
			}
		}
		for _, v := range o.GetEnv() {
			env[v.GetName()] = v.GetValue()
		}
	}
	return env
}

// finish ends the execution: edit sets its counts and conditions; with
// failure the operation completes with that error.
func (x *fakeExecution) finish(edit func(*runpb.Execution), failure *status.Status) {
	exec := x.execution()
	exec.CompletionTime = timestamppb.Now()
	edit(exec)
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	op := x.f.ops[x.opName]
	op.Done, op.Metadata = true, mustAny(exec)
	if failure != nil {
		op.Result = &longrunningpb.Operation_Error{Error: failure.Proto()}
	} else {
		op.Result = &longrunningpb.Operation_Response{Response: mustAny(exec)}
	}
	x.f.ended[x.name] = exec
}

// succeed ends the execution with its task succeeded.
func (x *fakeExecution) succeed() {
	x.finish(func(e *runpb.Execution) { e.SucceededCount = 1 }, nil)
}

// fail ends the execution with its task failed, saying msg.
func (x *fakeExecution) fail(msg string) {
	x.finish(func(e *runpb.Execution) {
		e.FailedCount = 1
		e.Conditions = []*runpb.Condition{{Type: "Completed", State: runpb.Condition_CONDITION_FAILED, Message: msg}}
	}, status.New(codes.Unknown, msg))
}

// cancel ends the execution as cancelled.
func (x *fakeExecution) cancel() {
	msg := fmt.Sprintf("Execution %s was cancelled.", x.name)
	x.finish(func(e *runpb.Execution) {
		e.CancelledCount = 1
		e.Conditions = []*runpb.Condition{{Type: "Completed", State: runpb.Condition_CONDITION_FAILED, Message: msg}}
	}, status.New(codes.Canceled, msg))
}

// runTask plays an execution as Cloud Run does: it runs the trainer's task
// with the execution's environment, cancels it (as SIGTERM would) when the
// execution is cancelled, and ends the execution as the task ended.
func runTask(x *fakeExecution) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-x.cancelled:
		case <-x.f.closing:
		case <-ctx.Done():
		}
		stop()
	}()
	env := x.env()
	err := taskenv.Run(ctx, func(k string) string { return env[k] }, io.Discard)
	select {
	case <-x.cancelled:
		x.cancel()
	default:
		if err != nil {
			x.fail(fmt.Sprintf("Task %s-task0 failed with message: %v", x.name, err))
			return
		}
		x.succeed()
	}
}

// endedExecution is the execution named as it ended.
func (f *fakeJobs) endedExecution(name string) *runpb.Execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended[name]
}

// recorded returns the RunJob and CancelExecution requests so far.
func (f *fakeJobs) recorded() ([]*runpb.RunJobRequest, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runpb.RunJobRequest(nil), f.runs...), append([]string(nil), f.cancels...)
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}
