package cloudrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer/cloudrun"
	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// runTaskEnv makes the test binary run RunTask, as the trainer's bootstrap
// does in a Cloud Run task, instead of the tests.
const runTaskEnv = "HPSEARCH_TEST_RUN_TASK"

func TestMain(m *testing.M) {
	if os.Getenv(runTaskEnv) == "1" {
		if err := cloudrun.RunTask(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const prefix = "study/trial-3"

// request is a short digits-mlp segment that checkpoints into the file://
// store at root; with root "" it has no checkpoint policy.
func request(root string, trial int) hptype.SegmentRequest {
	req := hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "study",
		Trial:      trial,
		Segment:    2,
		Attempt:    1,
		Params:     hptype.Params{"hidden_units": int64(16), "epochs": int64(3)},
		Seed:       7,
		Deadline:   time.Now().Add(time.Minute),
		Resource:   hptype.ResourceRange{Unit: "epoch"},
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
		LogPath:    "/coordinator/logs/trial-3.log",
	}
	if root != "" {
		req.Checkpoint = &hptype.CheckpointPolicy{Store: "file://" + root, Prefix: prefix, KeepLast: 2}
	}
	return req
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// env returns a getenv that reads vars.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// storedResult reads the result the attempt stored in the store at root.
func storedResult(t *testing.T, root string, segment, attempt int) *hptype.SegmentResult {
	t.Helper()
	b, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := checkpoint.New(b).Result(context.Background(), prefix, segment, attempt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// printed decodes the result line Run printed.
func printed(t *testing.T, stdout *bytes.Buffer) hptype.SegmentResult {
	t.Helper()
	var res hptype.SegmentResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout %q is not a result: %v", stdout.String(), err)
	}
	return res
}

func TestInlineRequestStoresTheResultNextToTheCheckpoints(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var stdout bytes.Buffer
	err := cloudrun.Run(context.Background(), env(map[string]string{
		cloudrun.EnvRequest:     encode(t, request(root, 3)),
		cloudrun.EnvTaskIndex:   "0",
		cloudrun.EnvTaskAttempt: "0",
	}), &stdout)
	if err != nil {
		t.Fatal(err)
	}
	res := storedResult(t, root, 2, 1)
	if res == nil || res.Status != hptype.SegmentCompleted || res.Checkpoint == nil || res.ResourceReached != 3 {
		t.Fatalf("stored result %+v; want completed at epoch 3 with a checkpoint", res)
	}
	if got := printed(t, &stdout); got.Checkpoint.ID != res.Checkpoint.ID || got.Status != res.Status {
		t.Fatalf("printed %+v, stored %+v", got, res)
	}
	if _, err := os.Stat("/coordinator"); err == nil {
		t.Fatal("the task wrote the workload log to the coordinator's LogPath instead of standard error")
	}
}

func TestResultURIWithoutACheckpointPolicy(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	uri := "file://" + filepath.Join(out, "my results") + "/result%201.json"
	var stdout bytes.Buffer
	err := cloudrun.Run(context.Background(), env(map[string]string{
		cloudrun.EnvRequest:   encode(t, request("", 3)),
		cloudrun.EnvResultURI: uri,
	}), &stdout)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "my results", "result 1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res hptype.SegmentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != hptype.SegmentCompleted || res.Trial != 3 || res.Checkpoint != nil {
		t.Fatalf("result %+v; want completed, without a checkpoint", res)
	}
	if !bytes.Equal(bytes.TrimSpace(stdout.Bytes()), raw) {
		t.Fatalf("printed %q, stored %q", stdout.Bytes(), raw)
	}
}

// TestFolderOfRequests runs two tasks of one execution: each reads its own
// request from the folder and writes its own result.
func TestFolderOfRequests(t *testing.T) {
	t.Parallel()
	in, out := t.TempDir(), t.TempDir()
	for i, trial := range []int{5, 6} {
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("%d.json", i)), []byte(encode(t, request("", trial))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			errs <- cloudrun.Run(context.Background(), env(map[string]string{
				cloudrun.EnvRequestURI: "file://" + in + "/",
				cloudrun.EnvResultURI:  "file://" + out + "/",
				cloudrun.EnvTaskIndex:  fmt.Sprint(i),
			}), &bytes.Buffer{})
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, trial := range []int{5, 6} {
		raw, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.json", i)))
		if err != nil {
			t.Fatal(err)
		}
		var res hptype.SegmentResult
		if err := json.Unmarshal(raw, &res); err != nil || res.Trial != trial || res.Status != hptype.SegmentCompleted {
			t.Fatalf("task %d stored %+v (%v); want trial %d completed", i, res, err, trial)
		}
	}
}

// TestRefusals checks the environments a task refuses before it trains.
func TestRefusals(t *testing.T) {
	t.Parallel()
	in := t.TempDir()
	reqFile := filepath.Join(in, "req.json")
	if err := os.WriteFile(reqFile, []byte(encode(t, request("", 3))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"retry", map[string]string{cloudrun.EnvTaskAttempt: "1"}, "max_retries = 0"},
		{"bad index", map[string]string{cloudrun.EnvTaskIndex: "one"}, "not a task number"},
		{"no request", map[string]string{cloudrun.EnvRequest: ""}, "no segment request"},
		{"both requests", map[string]string{cloudrun.EnvRequestURI: "file://" + reqFile}, "both"},
		{"inline request for task 1", map[string]string{cloudrun.EnvTaskIndex: "1"}, "for task 0"},
		{"object for task 1", map[string]string{cloudrun.EnvRequest: "", cloudrun.EnvRequestURI: "file://" + reqFile, cloudrun.EnvTaskIndex: "1"}, "end it with a slash"},
		{"missing object", map[string]string{cloudrun.EnvRequest: "", cloudrun.EnvRequestURI: "file://" + in + "/none.json"}, "read the segment request"},
		{"bucket only", map[string]string{cloudrun.EnvRequest: "", cloudrun.EnvRequestURI: "s3://bucket"}, "names a bucket"},
		{"not JSON", map[string]string{cloudrun.EnvRequest: "{"}, "not valid JSON"},
		{"unknown field", map[string]string{cloudrun.EnvRequest: `{"api_version":"hpsearch/v1","colour":"red"}`}, "unknown field"},
		{"nowhere to store", map[string]string{cloudrun.EnvResultURI: ""}, "could not be stored anywhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			vars := map[string]string{
				cloudrun.EnvRequest:   encode(t, request("", 3)),
				cloudrun.EnvResultURI: "file://" + out + "/result.json",
			}
			for k, v := range tc.vars {
				vars[k] = v
			}
			var stdout bytes.Buffer
			err := cloudrun.Run(context.Background(), env(vars), &stdout)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one saying %q", err, tc.want)
			}
			if stdout.Len() > 0 {
				t.Fatalf("the task trained (printed %q) although it refused", stdout.String())
			}
			if _, err := os.Stat(filepath.Join(out, "result.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused task stored a result: %v", err)
			}
		})
	}
}

// TestFailsOnlyWhenTheResultCannotBeStored: a result that cannot be stored
// fails the task; a segment that failed does not.
func TestFailsOnlyWhenTheResultCannotBeStored(t *testing.T) {
	t.Parallel()
	t.Run("failed segment", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		req := request(root, 3)
		req.Params["hidden_units"] = int64(-1)
		if err := cloudrun.Run(context.Background(), env(map[string]string{cloudrun.EnvRequest: encode(t, req)}), &bytes.Buffer{}); err != nil {
			t.Fatalf("a failed segment failed the task: %v", err)
		}
		if res := storedResult(t, root, 2, 1); res == nil || res.Status != hptype.SegmentFailed || res.Error == "" {
			t.Fatalf("stored %+v; want a failed result with its error", res)
		}
	})
	t.Run("result URI taken", func(t *testing.T) {
		t.Parallel()
		out := t.TempDir()
		if err := os.WriteFile(filepath.Join(out, "result.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		err := cloudrun.Run(context.Background(), env(map[string]string{
			cloudrun.EnvRequest:   encode(t, request("", 3)),
			cloudrun.EnvResultURI: "file://" + out + "/result.json",
		}), &stdout)
		if !errors.Is(err, blob.ErrExists) || !strings.Contains(err.Error(), cloudrun.EnvResultURI) {
			t.Fatalf("error %v; want blob.ErrExists, saying to give another %s", err, cloudrun.EnvResultURI)
		}
		if printed(t, &stdout).Status != hptype.SegmentCompleted {
			t.Fatalf("printed %q; want the completed result", stdout.String())
		}
	})
	t.Run("checkpoint result taken", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		b, err := fsblob.New(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.New(b).PutResult(context.Background(), prefix, 2, 1, []byte(`{"status":"failed"}`)); err != nil {
			t.Fatal(err)
		}
		err = cloudrun.Run(context.Background(), env(map[string]string{cloudrun.EnvRequest: encode(t, request(root, 3))}), &bytes.Buffer{})
		if !errors.Is(err, blob.ErrExists) {
			t.Fatalf("error %v; want blob.ErrExists for the result another run stored", err)
		}
	})
}

// TestSIGTERMStoresASuspendedResult runs RunTask in a real process, as the
// bootstrap does in a Cloud Run task, sends it SIGTERM as Cloud Run does
// before it kills a task, and checks that the segment checkpointed, stored
// a suspended result and exited 0.
func TestSIGTERMStoresASuspendedResult(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	req := request(root, 3)
	req.Params = hptype.Params{"hidden_units": int64(256), "epochs": int64(1000)}
	req.Checkpoint.Every = hptype.Duration(time.Millisecond)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runTaskEnv+"=1", cloudrun.EnvRequest+"="+encode(t, req), cloudrun.EnvTaskIndex+"=0", cloudrun.EnvTaskAttempt+"=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Wait until the segment has written a checkpoint: it is training.
	b, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ms, _, err := checkpoint.New(b).List(context.Background(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after 30 s; stderr: %s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("task process: %v; stderr: %s", err, stderr.String())
	}
	res := storedResult(t, root, 2, 1)
	if res == nil || res.Status != hptype.SegmentSuspended || res.Checkpoint == nil || res.Checkpoint.Resource != res.ResourceReached {
		t.Fatalf("stored %+v; want suspended with a checkpoint at the epoch reached", res)
	}
	if printed(t, &stdout).Checkpoint.ID != res.Checkpoint.ID {
		t.Fatalf("printed %q, stored %+v", stdout.String(), res)
	}
}

// TestRefusedRetryExitsNonZero runs a retried task in a real process: it
// exits 1 and says why on standard error.
func TestRefusedRetryExitsNonZero(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runTaskEnv+"=1", cloudrun.EnvRequest+"="+encode(t, request(t.TempDir(), 3)), cloudrun.EnvTaskAttempt+"=2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "max_retries = 0") {
		t.Fatalf("exit %v, stderr %q; want exit 1 asking for max_retries = 0", err, stderr.String())
	}
}
