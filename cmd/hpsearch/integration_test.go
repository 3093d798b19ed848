package main_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// lambdaStack returns the short-timeout function the local stack
// (scripts/with-stack, or eval "$(localstack/stack env)") serves, and its
// timeout. Without a stack the test is skipped, except in CI, where it
// fails.
func lambdaStack(t *testing.T) (function string, timeout time.Duration) {
	t.Helper()
	function = os.Getenv("HPSEARCH_LAMBDA_SHORT_FUNCTION")
	if os.Getenv("AWS_ENDPOINT_URL_LAMBDA") == "" || function == "" {
		msg := "no Lambda stack: run make test, or make localstack-up and eval \"$(localstack/stack env)\""
		if os.Getenv("CI") != "" || os.Getenv("HPSEARCH_REQUIRE_LAMBDA") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	v := os.Getenv("HPSEARCH_LAMBDA_SHORT_TIMEOUT")
	timeout, err := time.ParseDuration(v)
	if err != nil || timeout < 2*time.Second || timeout > 10*time.Second {
		t.Fatalf("HPSEARCH_LAMBDA_SHORT_TIMEOUT=%q: want the short function's timeout, 2s to 10s", v)
	}
	return function, timeout
}

// TestIntegrationLambdaStudy runs 30 digits trials through the
// Lambda executor against the local stack, with more trials at once than
// the function has environments, and kills the coordinator midway. The
// study must complete with every trial once: throttles are counted and
// fail nothing, billing comes from REPORT lines, checkpoints land in S3,
// and the trials longer than the function's timeout run in several
// segments.
func TestIntegrationLambdaStudy(t *testing.T) {
	function, timeout := lambdaStack(t)
	bucket := s3test.NewBucket(t)
	maxRuntime := max(timeout-time.Second, time.Second)
	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	// Log-uniform epochs: most trials are short, a few train for longer
	// than a function may run.
	longest := int(4 * timeout / (15 * time.Millisecond))
	if err := os.WriteFile(space, fmt.Appendf(nil, `name: lambda-integration
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.02, max: 0.3, log: true}
  hidden_units: {type: constant, value: 256}
  epochs: {type: int, min: 5, max: %d, log: true}
trainer: {builtin: digits-mlp, timeout: 10m}
sampler: {type: sobol, seed: 5}
max_trials: 30
max_concurrency: 8
backend:
  type: lambda
  function: %s
  concurrency: 8
  max_runtime: %s
checkpoint: {store: "s3://%s/ckpt", every: 1s, grace: %s, keep_checkpoints: all}
`, longest, function, maxRuntime, bucket, maxRuntime/3), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")

	// First run: killed once 8 trials have completed.
	cmd := exec.Command(hpsearchBin, "run", "--state", state, "--json", space)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	completed := 0
	sc := bufio.NewScanner(stdout)
	// An event carries its trial's metric history: lines can be long.
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for completed < 8 && sc.Scan() {
		if strings.Contains(sc.Text(), `"kind":"trial_completed"`) {
			completed++
		}
	}
	if completed < 8 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the first run ended after %d completed trials (%v):\n%s", completed, sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdout)
	cmd.Wait()
	// The attempts of each trial completed before the kill.
	before := map[int]int{}
	for _, tr := range studyTrials(t, state, "lambda-integration") {
		if tr.State == hptype.TrialCompleted {
			before[tr.Number] = len(tr.Attempts)
		}
	}
	t.Logf("killed the coordinator with %d trials completed", len(before))

	trials := runStudy(t, state, space, "lambda-integration")
	if len(trials) != 30 {
		t.Fatalf("%d trials, want 30", len(trials))
	}
	var throttles, reported, estimated, segmented int
	for _, tr := range trials {
		if tr.State != hptype.TrialCompleted {
			t.Fatalf("trial %d is %s: %s", tr.Number, tr.State, tr.Error)
		}
		if n, ok := before[tr.Number]; ok && len(tr.Attempts) != n {
			t.Errorf("trial %d was completed before the kill with %d attempts, and has %d after", tr.Number, n, len(tr.Attempts))
		}
		if tr.Segments() > 1 {
			segmented++
		}
		for _, a := range tr.Attempts {
			throttles += a.Throttles
			if a.Status == "completed" || a.Status == "suspended" {
				if a.BilledEstimated {
					estimated++
				} else {
					reported++
				}
			}
		}
	}
	t.Logf("%d throttles, %d attempts billed from REPORT lines, %d estimated, %d trials in several segments", throttles, reported, estimated, segmented)
	// Only the segments in flight at the kill, whose results were read back
	// from S3, lack a REPORT line.
	if reported == 0 || estimated > 8 {
		t.Errorf("%d attempts billed from REPORT lines and %d estimated; want every attempt but the (at most 8) in flight at the kill from REPORT lines", reported, estimated)
	}
	if throttles == 0 {
		t.Error("no invocation was throttled, though max_concurrency exceeds the function's environments")
	}
	if segmented == 0 {
		t.Errorf("no trial ran in several segments, though some train longer than the function's %s", timeout)
	}
	manifests := 0
	pages := s3.NewListObjectsV2Paginator(s3test.Client(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("ckpt/")})
	for pages.HasMorePages() {
		out, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			if strings.HasSuffix(aws.ToString(o.Key), "/manifest.json") {
				manifests++
			}
		}
	}
	if manifests < 30 {
		t.Errorf("%d checkpoint manifests in s3://%s/ckpt, want at least one per trial", manifests, bucket)
	}
}
