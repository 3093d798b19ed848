package cloudrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	taskenv "github.com/hpsearch/hpsearch/functions/trainer/cloudrun"
	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

var _ executor.Executor = (*Executor)(nil)

const prefix = "study/trial-3"

// testBundle is what a test needs besides the executor.
type testBundle struct {
	fake  *fakeJobs
	root  string // the file:// checkpoint store's directory
	blobs blob.Store
	store *checkpoint.Store
}

// setup starts a fake Cloud Run Admin API whose executions play, and an
// executor against it; edit may change the fake and the config first.
func setup(t *testing.T, play func(*fakeExecution), edit func(*testBundle, *Config)) (*Executor, *testBundle) {
	t.Helper()
	root := t.TempDir()
	blobs, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBundle{fake: &fakeJobs{job: fakeJob(), play: play}, root: root, blobs: blobs, store: checkpoint.New(blobs)}
	cfg := Config{
		Project:       fakeProject,
		Region:        fakeRegion,
		Job:           fakeJobName,
		ClientOptions: startFake(t, b.fake),
		Checkpoints:   b.store,
		PollInterval:  10 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(b, &cfg)
	}
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, b
}

// tWriter sends the executor's log to the test's.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// request is a short digits-mlp segment that checkpoints into the store
// at root.
func request(root string) hptype.SegmentRequest {
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "study",
		StudyName:  "digits",
		Trial:      3,
		Segment:    2,
		Attempt:    1,
		Params:     hptype.Params{"hidden_units": int64(16), "epochs": int64(3)},
		Seed:       7,
		Deadline:   time.Now().Add(90 * time.Second),
		Resource:   hptype.ResourceRange{Unit: "epoch"},
		Checkpoint: &hptype.CheckpointPolicy{Store: "file://" + root, Prefix: prefix, KeepLast: 2},
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
	}
}

// longRequest is a segment that trains until it is stopped, checkpointing
// after every epoch.
func longRequest(root string) hptype.SegmentRequest {
	req := request(root)
	req.Params = hptype.Params{"hidden_units": int64(256), "epochs": int64(1000)}
	req.Checkpoint.Every = hptype.Duration(time.Millisecond)
	return req
}

// TestRunSendsTheRequestInTheOverrides checks the exact RunJobRequest, and
// that the result is the one the task stored, billed from the execution's
// times.
func TestRunSendsTheRequestInTheOverrides(t *testing.T) {
	t.Parallel()
	e, b := setup(t, runTask, nil)
	now := time.Now()
	e.now = func() time.Time { return now }
	req := request(b.root)
	req.Deadline = now.Add(90 * time.Second)

	res, err := e.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	payload, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := &runpb.RunJobRequest{
		Name: "projects/proj/locations/europe-west4/jobs/trainer-job",
		Overrides: &runpb.RunJobRequest_Overrides{
			ContainerOverrides: []*runpb.RunJobRequest_Overrides_ContainerOverride{{
				Name: "trainer",
				Env:  []*runpb.EnvVar{{Name: "HPSEARCH_REQUEST", Values: &runpb.EnvVar_Value{Value: string(payload)}}},
			}},
			TaskCount: 1,
			Timeout:   durationpb.New(150 * time.Second), // 90 s to the deadline + the 1 min margin
		},
	}
	runs, cancels := b.fake.recorded()
	if len(runs) != 1 || !proto.Equal(runs[0], want) {
		t.Fatalf("RunJob requests:\n%v\nwant one:\n%s", runs, prototext.Format(want))
	}
	if len(cancels) != 0 {
		t.Fatalf("CancelExecution %q for an execution that ended by itself", cancels)
	}

	stored, err := b.store.Result(context.Background(), prefix, 2, 1)
	if err != nil || stored == nil {
		t.Fatalf("stored result %v, %v", stored, err)
	}
	if res.Status != hptype.SegmentCompleted || res.ResourceReached != 3 || res.Checkpoint == nil || res.Checkpoint.ID != stored.Checkpoint.ID {
		t.Fatalf("result %+v; want the stored one, completed at epoch 3", res)
	}
	exec := b.fake.endedExecution(fmt.Sprintf("%s/executions/%s-00001", fakeJobPath, fakeJobName))
	ran := exec.GetCompletionTime().AsTime().Sub(exec.GetStartTime().AsTime())
	wantBilled := ((ran + 100*time.Millisecond - 1) / (100 * time.Millisecond)) * 100
	if res.Usage.BilledMS != int64(wantBilled) || res.Usage.BilledMS%100 != 0 {
		t.Fatalf("billed %d ms for an execution of %s; want %d", res.Usage.BilledMS, ran, wantBilled)
	}
	if res.Usage.WallMS != stored.Usage.WallMS {
		t.Fatalf("wall %d ms, the trainer measured %d", res.Usage.WallMS, stored.Usage.WallMS)
	}
}

func TestFailedExecution(t *testing.T) {
	t.Parallel()
	const msg = "Task trainer-job-00001-task0 failed: the container ran out of memory (4Gi)"
	e, b := setup(t, func(x *fakeExecution) { x.fail(msg) }, nil)
	_, err := e.Run(context.Background(), request(b.root))
	if !errors.Is(err, ErrExecutionFailed) || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "logs: https://") {
		t.Fatalf("error %v; want ErrExecutionFailed with Cloud Run's message and the logs", err)
	}
}

// TestRetriedTaskFails runs the real task as a Cloud Run retry: it refuses,
// and its message comes back in ErrExecutionFailed.
func TestRetriedTaskFails(t *testing.T) {
	t.Parallel()
	e, b := setup(t, runTask, func(tb *testBundle, _ *Config) { tb.fake.taskAttempt = 1 })
	_, err := e.Run(context.Background(), request(b.root))
	if !errors.Is(err, ErrExecutionFailed) || !strings.Contains(err.Error(), "max_retries = 0") {
		t.Fatalf("error %v; want ErrExecutionFailed with the task's refusal", err)
	}
}

// TestCancelledExecution: someone cancelled the execution before its task
// ran.
func TestCancelledExecution(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(x *fakeExecution) { x.cancel() }, nil)
	_, err := e.Run(context.Background(), request(b.root))
	if !errors.Is(err, ErrCancelled) || errors.Is(err, ErrExecutionFailed) || !strings.Contains(err.Error(), "not by hpsearch") {
		t.Fatalf("error %v; want ErrCancelled", err)
	}
}

func TestSucceededWithoutAResult(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(x *fakeExecution) { x.succeed() }, nil)
	_, err := e.Run(context.Background(), request(b.root))
	if !errors.Is(err, ErrNoResult) {
		t.Fatalf("error %v; want ErrNoResult", err)
	}
}

// TestAResultOfAnotherSegmentIsRefused: the stored result must be the
// request's own.
func TestAResultOfAnotherSegmentIsRefused(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(x *fakeExecution) { x.succeed() }, nil)
	if err := b.store.PutResult(context.Background(), prefix, 2, 1, []byte(`{"study":"other","trial":3,"segment":2,"attempt":1,"status":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := e.Run(context.Background(), request(b.root))
	if err == nil || !strings.Contains(err.Error(), "is for study other") {
		t.Fatalf("error %v; want a refusal of the other study's result", err)
	}
}

// TestStoppingCancelsTheExecution cancels Run's ctx while the task trains:
// Run cancels the execution, the task (given SIGTERM) checkpoints, and Run
// returns its suspended result.
func TestStoppingCancelsTheExecution(t *testing.T) {
	t.Parallel()
	e, b := setup(t, runTask, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		res hptype.SegmentResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := e.Run(ctx, longRequest(b.root))
		done <- answer{res, err}
	}()
	waitFor(t, "a checkpoint", func() bool {
		ms, _, err := b.store.List(context.Background(), prefix)
		return err == nil && len(ms) > 0
	})
	cancel()
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.Status != hptype.SegmentSuspended || a.res.Checkpoint == nil {
		t.Fatalf("result %+v; want suspended with a checkpoint", a.res)
	}
	_, cancels := b.fake.recorded()
	if want := fakeJobPath + "/executions/trainer-job-00001"; len(cancels) != 1 || cancels[0] != want {
		t.Fatalf("CancelExecution %q; want once for %s", cancels, want)
	}
}

// TestStoppingWithoutAResult: Run's ctx ends once the execution started;
// the execution then ends cancelled without a result, or does not end
// within StopWait.
func TestStoppingWithoutAResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ended    bool
		stopWait time.Duration
		want     string
	}{
		{"cancelled", true, 30 * time.Second, "stored no result"},
		{"still running", false, 200 * time.Millisecond, "had not ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			play := func(x *fakeExecution) {
				cancel()
				select {
				case <-x.cancelled:
					if tc.ended {
						x.cancel()
					}
				case <-x.f.closing:
				}
			}
			e, b := setup(t, play, func(_ *testBundle, c *Config) { c.StopWait = tc.stopWait })
			_, err := e.Run(ctx, request(b.root))
			if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want ErrCancelled and context.Canceled, saying %q", err, tc.want)
			}
			if _, cancels := b.fake.recorded(); len(cancels) != 1 {
				t.Fatalf("CancelExecution %q; want it once", cancels)
			}
		})
	}
}

// TestPollErrors: a passing error (quota) is waited out; another one ends
// Run.
func TestPollErrors(t *testing.T) {
	t.Parallel()
	t.Run("passing", func(t *testing.T) {
		t.Parallel()
		e, b := setup(t, runTask, func(tb *testBundle, _ *Config) {
			tb.fake.pollErrs = []codes.Code{codes.ResourceExhausted, codes.ResourceExhausted}
		})
		if res, err := e.Run(context.Background(), request(b.root)); err != nil || res.Status != hptype.SegmentCompleted {
			t.Fatalf("result %+v, %v; want completed despite two failed polls", res, err)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		t.Parallel()
		e, b := setup(t, func(x *fakeExecution) { <-x.f.closing }, func(tb *testBundle, _ *Config) {
			tb.fake.pollErrs = []codes.Code{codes.PermissionDenied}
		})
		_, err := e.Run(context.Background(), request(b.root))
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "poll execution") {
			t.Fatalf("error %v; want the PermissionDenied of polling", err)
		}
	})
}

// TestLargeRequestGoesThroughObjectStorage: a request over 32 KiB is
// written to Config.Requests, named by HPSEARCH_REQUEST_URI, read by the
// task, and deleted afterwards.
func TestLargeRequestGoesThroughObjectStorage(t *testing.T) {
	t.Parallel()
	large := func(root string) hptype.SegmentRequest {
		req := request(root)
		req.Workload.Env = map[string]string{"NOTES": strings.Repeat("x", taskenv.MaxEnvRequest)}
		return req
	}
	t.Run("with a store", func(t *testing.T) {
		t.Parallel()
		var requests blob.Store
		e, b := setup(t, runTask, func(tb *testBundle, c *Config) {
			// A folder of the checkpoint store's, with a name that needs
			// escaping in a URI.
			var err error
			if requests, err = fsblob.New(filepath.Join(tb.root, "big requests")); err != nil {
				t.Fatal(err)
			}
			c.Requests = requests
		})
		res, err := e.Run(context.Background(), large(b.root))
		if err != nil || res.Status != hptype.SegmentCompleted {
			t.Fatalf("result %+v, %v; want completed", res, err)
		}
		runs, _ := b.fake.recorded()
		env := runs[0].GetOverrides().GetContainerOverrides()[0].GetEnv()
		want := "file://" + b.root + "/big%20requests/study/trial-3/requests/000002.001.json"
		if len(env) != 1 || env[0].GetName() != taskenv.EnvRequestURI || env[0].GetValue() != want {
			t.Fatalf("env %v; want only %s=%s", env, taskenv.EnvRequestURI, want)
		}
		if infos, err := requests.List(context.Background(), ""); err != nil || len(infos) != 0 {
			t.Fatalf("request objects left behind: %v, %v", infos, err)
		}
	})
	t.Run("without a store", func(t *testing.T) {
		t.Parallel()
		e, b := setup(t, runTask, nil)
		_, err := e.Run(context.Background(), large(b.root))
		if err == nil || !strings.Contains(err.Error(), "Config.Requests") {
			t.Fatalf("error %v; want one naming Config.Requests", err)
		}
		if runs, _ := b.fake.recorded(); len(runs) != 0 {
			t.Fatalf("ran the job anyway: %v", runs)
		}
	})
}

func TestRequestWithoutACheckpointPolicy(t *testing.T) {
	t.Parallel()
	e, b := setup(t, runTask, nil)
	req := request(b.root)
	req.Checkpoint = nil
	_, err := e.Run(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "no checkpoint policy") {
		t.Fatalf("error %v; want a refusal", err)
	}
	if runs, _ := b.fake.recorded(); len(runs) != 0 {
		t.Fatalf("ran the job anyway: %v", runs)
	}
}

// TestNewChecksTheJob checks the configurations and jobs New refuses, and
// the resources it takes from the job.
func TestNewChecksTheJob(t *testing.T) {
	t.Parallel()
	sidecar := &runpb.Container{Name: "proxy", Image: "proxy"}
	for _, tc := range []struct {
		name      string
		edit      func(*runpb.Job, *Config)
		err       string
		resources Resources
		container string
	}{
		{name: "job's resources", resources: Resources{VCPU: 2, MemoryMB: 4096}, container: "trainer"},
		{name: "matching resources", edit: func(_ *runpb.Job, c *Config) { c.VCPU, c.MemoryMB = 2, 4096 }, resources: Resources{VCPU: 2, MemoryMB: 4096}, container: "trainer"},
		{name: "Cloud Run defaults", edit: func(j *runpb.Job, _ *Config) { j.Template.Template.Containers[0].Resources = nil }, resources: Resources{VCPU: 1, MemoryMB: 512}, container: "trainer"},
		{name: "GPU", edit: func(j *runpb.Job, _ *Config) {
			j.Template.Template.Containers[0].Resources.Limits = map[string]string{"cpu": "4000m", "memory": "16Gi", "nvidia.com/gpu": "1"}
		}, resources: Resources{VCPU: 4, MemoryMB: 16384, GPUs: 1}, container: "trainer"},
		{name: "named among sidecars", edit: func(j *runpb.Job, c *Config) {
			j.Template.Template.Containers = append([]*runpb.Container{sidecar}, j.Template.Template.Containers...)
			c.Container = "trainer"
		}, resources: Resources{VCPU: 2, MemoryMB: 4096}, container: "trainer"},
		{name: "default retries", edit: func(j *runpb.Job, _ *Config) { j.Template.Template.Retries = nil }, err: "retry 3 (Cloud Run's default) times"},
		{name: "retries", edit: func(j *runpb.Job, _ *Config) {
			j.Template.Template.Retries = &runpb.TaskTemplate_MaxRetries{MaxRetries: 2}
		}, err: "--max-retries 0"},
		{name: "missing job", edit: func(_ *runpb.Job, c *Config) { c.Job = "other" }, err: "gcloud run jobs describe other"},
		{name: "sidecars", edit: func(j *runpb.Job, _ *Config) {
			j.Template.Template.Containers = append(j.Template.Template.Containers, sidecar)
		}, err: "set Config.Container"},
		{name: "no such container", edit: func(_ *runpb.Job, c *Config) { c.Container = "worker" }, err: `has no container "worker"`},
		{name: "other memory", edit: func(_ *runpb.Job, c *Config) { c.MemoryMB = 2048 }, err: "Config.MemoryMB is 2048 but Cloud Run job"},
		{name: "bad limit", edit: func(j *runpb.Job, _ *Config) { j.Template.Template.Containers[0].Resources.Limits["memory"] = "lots" }, err: `memory limit "lots"`},
		{name: "path as project", edit: func(_ *runpb.Job, c *Config) { c.Project = "projects/proj" }, err: "Config.Project"},
		{name: "no checkpoints", edit: func(_ *runpb.Job, c *Config) { c.Checkpoints = nil }, err: "Config.Checkpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeJobs{job: fakeJob(), play: runTask}
			blobs, err := fsblob.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Project: fakeProject, Region: fakeRegion, Job: fakeJobName, ClientOptions: startFake(t, f), Checkpoints: checkpoint.New(blobs)}
			if tc.edit != nil {
				tc.edit(f.job, &cfg)
			}
			e, err := New(context.Background(), cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("New: %v; want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Resources() != tc.resources || e.container != tc.container {
				t.Fatalf("resources %+v, container %q; want %+v, %q", e.Resources(), e.container, tc.resources, tc.container)
			}
		})
	}
}

func TestTaskTimeout(t *testing.T) {
	for _, tc := range []struct{ left, want time.Duration }{
		{90 * time.Second, 150 * time.Second},
		{90*time.Second + 200*time.Millisecond, 151 * time.Second},
		{-5 * time.Second, 60 * time.Second},
	} {
		if got := taskTimeout(tc.left, time.Minute); got != tc.want {
			t.Errorf("taskTimeout(%s, 1m) = %s, want %s", tc.left, got, tc.want)
		}
	}
}

func TestBilledMS(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ran := func(d time.Duration) *runpb.Execution {
		return &runpb.Execution{StartTime: timestamppb.New(start), CompletionTime: timestamppb.New(start.Add(d))}
	}
	for _, tc := range []struct {
		name   string
		exec   *runpb.Execution
		wallMS int64
		want   int64
	}{
		{"zero", ran(0), 0, 0},
		{"1 ms", ran(time.Millisecond), 0, 100},
		{"100 ms", ran(100 * time.Millisecond), 0, 100},
		{"just over", ran(100*time.Millisecond + time.Nanosecond), 0, 200},
		{"1234 ms", ran(1234 * time.Millisecond), 5000, 1300},
		{"no completion", &runpb.Execution{StartTime: timestamppb.New(start)}, 250, 300},
		{"no execution", nil, 1000, 1000},
		{"completion before start", ran(-time.Second), 40, 100},
	} {
		if got := billedMS(tc.exec, tc.wallMS); got != tc.want {
			t.Errorf("%s: billedMS = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestJobResources(t *testing.T) {
	for _, tc := range []struct {
		limits map[string]string
		want   Resources
		err    string
	}{
		{nil, Resources{VCPU: 1, MemoryMB: 512}, ""},
		{map[string]string{"cpu": "0.5", "memory": "1073741824"}, Resources{VCPU: 0.5, MemoryMB: 1024}, ""},
		{map[string]string{"cpu": "1000m", "memory": "2G"}, Resources{VCPU: 1, MemoryMB: 1907}, ""},
		{map[string]string{"memory": "512Mi", "nvidia.com/gpu": "1"}, Resources{VCPU: 1, MemoryMB: 512, GPUs: 1}, ""},
		{map[string]string{"cpu": "two"}, Resources{}, "CPU limit"},
		{map[string]string{"cpu": "-1"}, Resources{}, "CPU limit"},
		{map[string]string{"memory": "Gi"}, Resources{}, "memory limit"},
		{map[string]string{"nvidia.com/gpu": "one"}, Resources{}, "GPU limit"},
	} {
		got, err := jobResources(tc.limits)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("jobResources(%v) = %+v, %v; want an error saying %q", tc.limits, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("jobResources(%v) = %+v, %v; want %+v", tc.limits, got, err, tc.want)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s", what)
		}
	}
}
