package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/sqsqueue"
)

// poolSpace mixes small models, run by the coordinator's own (local)
// backend, with models whose declared size passes the pool's threshold,
// which go to the GPU pool's workers: the CPU digits workload, declared
// as 10 million parameters per hidden unit. The large ones train long
// enough to be stopped in the middle.
const poolSpace = `name: pool-study
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.01, max: 0.3, log: true}
  hidden_units: {type: categorical, values: [16, 128]}
  epochs: {type: constant, value: 150}
trainer: {builtin: digits-mlp, timeout: 2m}
sampler: {type: random, seed: 3}
resources: {model_params: hidden_units * 1e7}
pool: {name: gpu, listen: %q, instance_type: g5.xlarge}
checkpoint: {every: 100ms}
max_trials: 6
max_concurrency: 4
`

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startedSegment matches a worker's log line for a segment it started.
var startedSegment = regexp.MustCompile(`msg="segment started".* trial=(\d+) segment=(\d+)`)

// TestPoolWorkersHandOverOnSIGTERM runs a study whose space mixes small
// and large models with a coordinator and two hpsearch worker processes.
// Each trial must run where its size says, with the reason shown by
// hpsearch trials. SIGTERM to a worker in the middle of a segment must
// make that segment stop at a checkpoint and the trial go on from there on
// the other worker, with no trial lost and training identical to one go.
func TestPoolWorkersHandOverOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, fmt.Appendf(nil, poolSpace, addr), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	env := append(os.Environ(), "HPSEARCH_POOL_TOKEN=pool-secret", "HPSEARCH_TOKEN=pool-secret")
	coord := exec.Command(hpsearchBin, "run", "--state", state, space)
	coord.Env = env
	var out, errOut bytes.Buffer
	coord.Stdout, coord.Stderr = &out, &errOut
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	defer coord.Process.Kill()

	workers := map[string]*exec.Cmd{}
	logs := map[string]string{}
	for _, id := range []string{"w1", "w2"} {
		logs[id] = filepath.Join(dir, id+".log")
		f, err := os.Create(logs[id])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := exec.Command(hpsearchBin, "worker", "--pool", "gpu", "--queue", "http://"+addr, "--id", id,
			"--instance-type", "g5.xlarge", "--work-dir", filepath.Join(dir, id))
		w.Env, w.Stderr = env, f
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Process.Kill()
		workers[id] = w
	}

	// SIGTERM the first worker seen running a segment.
	var victim string
	var victimTrial string
	deadline := time.Now().Add(60 * time.Second)
	for victim == "" && time.Now().Before(deadline) {
		for id, path := range logs {
			b, _ := os.ReadFile(path)
			if m := startedSegment.FindSubmatch(b); m != nil {
				victim, victimTrial = id, string(m[1])
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if victim == "" {
		t.Fatalf("no worker started a segment; coordinator: %s", errOut.String())
	}
	time.Sleep(300 * time.Millisecond) // let it train and checkpoint a little
	if err := workers[victim].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := workers[victim].Wait(); err != nil {
		b, _ := os.ReadFile(logs[victim])
		t.Fatalf("worker %s after SIGTERM: %v\n%s", victim, err, b)
	}

	if err := coord.Wait(); err != nil {
		t.Fatalf("hpsearch run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"pool gpu: workers lease from http://" + addr + " with the token in $HPSEARCH_POOL_TOKEN", "trials     6 completed, 0 failed", "  pool       gpu: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}

	trials := studyTrials(t, state, "pool-study")
	if len(trials) != 6 {
		t.Fatalf("%d trials, want 6", len(trials))
	}
	other := map[string]string{"w1": "w2", "w2": "w1"}[victim]
	otherLog, _ := os.ReadFile(logs[other])
	handedOver := false
	for _, tr := range trials {
		units, _ := tr.Params.Int("hidden_units")
		wantPool := units == 128
		if tr.State != hptype.TrialCompleted {
			t.Errorf("trial %d ended %s: %s", tr.Number, tr.State, tr.Error)
		}
		if tr.Placement == nil || (tr.Placement.Pool == "gpu") != wantPool {
			t.Errorf("trial %d with %d hidden units placed %+v", tr.Number, units, tr.Placement)
		}
		if err := sameMetrics(tr.Metrics, referenceMetrics(t, tr, 3)); err != nil {
			t.Errorf("trial %d: %v", tr.Number, err)
		}
		if fmt.Sprint(tr.Number) != victimTrial {
			continue
		}
		first := tr.Attempts[0]
		if first.Status != "suspended" || first.ResourceTo <= 0 || len(tr.Attempts) < 2 {
			t.Fatalf("trial %d, stopped on %s: attempts %+v; want the first suspended at a checkpoint and a second segment", tr.Number, victim, tr.Attempts)
		}
		if next := tr.Attempts[1]; next.ResourceFrom != first.ResourceTo {
			t.Errorf("trial %d's second segment started at %g, not at the checkpoint (%g)", tr.Number, next.ResourceFrom, first.ResourceTo)
		}
		handedOver = regexp.MustCompile(fmt.Sprintf(`msg="segment started".* trial=%d segment=1`, tr.Number)).Match(otherLog)
		t.Logf("trial %d: stopped on %s at epoch %g, continued on %s: %v", tr.Number, victim, first.ResourceTo, other, handedOver)
	}
	if !handedOver {
		t.Errorf("worker %s did not run the second segment of trial %s:\n%s", other, victimTrial, otherLog)
	}

	table, err := exec.Command(hpsearchBin, "trials", "--state", state, "pool-study").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pool gpu (model_params 1.28e9 > 1e9 (pool.threshold))", "functions (fits the local backend: model_params 1.6e8 <= 1e9)"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("hpsearch trials lacks %q:\n%s", want, table)
		}
	}
}

// poolSQSSpace sends every trial to a pool whose queue is SQS.
const poolSQSSpace = `name: pool-sqs
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.01, max: 0.3, log: true}
  epochs: {type: constant, value: 20}
trainer: {builtin: digits-mlp, timeout: 2m}
sampler: {type: random, seed: 4}
resources: {gpu: 1}
pool: {name: gpu, queue: 'sqs://%s?records=%s', instance_type: g5.xlarge}
max_trials: 4
max_concurrency: 2
`

// TestPoolOverSQS runs a pool study whose workers lease from an SQS queue
// (moto_server's, or AWS_ENDPOINT_URL's), with its job records in S3.
func TestPoolOverSQS(t *testing.T) {
	s3test.Endpoint(t)
	bucket := s3test.NewBucket(t)
	client, err := sqsqueue.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("hpsearch-pool-test-%d", time.Now().UnixNano())
	qs, err := sqsqueue.CreateQueues(t.Context(), client, name, queue.Config{MaxAttempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqsqueue.DeleteQueues(context.Background(), client, qs) })

	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, fmt.Appendf(nil, poolSQSSpace, name, bucket), 0o644); err != nil {
		t.Fatal(err)
	}
	w := exec.Command(hpsearchBin, "worker", "--pool", "gpu", "--queue", fmt.Sprintf("sqs://%s?records=%s", name, bucket),
		"--id", "sqs-worker", "--instance-type", "g5.xlarge", "--work-dir", filepath.Join(dir, "w"))
	var wlog bytes.Buffer
	w.Stderr = &wlog
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		_ = w.Wait()
	}()
	state := filepath.Join(dir, "state")
	trials := runStudy(t, state, space, "pool-sqs")
	for _, tr := range trials {
		if tr.State != hptype.TrialCompleted || tr.Placement == nil || tr.Placement.Pool != "gpu" {
			t.Errorf("trial %d: %s, placed %+v (%s)", tr.Number, tr.State, tr.Placement, tr.Error)
		}
	}
	if len(trials) != 4 {
		t.Errorf("%d trials, want 4; worker log:\n%s", len(trials), wlog.String())
	}
}
