package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// TestSegmentsCheckpointToS3 runs a segmented study whose checkpoints go to
// S3 (moto_server in make test): the trainer processes write and restore
// them there, and keep_checkpoints: all leaves them in the bucket.
func TestSegmentsCheckpointToS3(t *testing.T) {
	bucket := s3test.NewBucket(t)
	dir := t.TempDir()
	space := filepath.Join(dir, "space.yaml")
	if err := os.WriteFile(space, fmt.Appendf(nil, `name: s3-segments
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.05, max: 0.2}
  hidden_units: {type: constant, value: 512}
  epochs: {type: constant, value: 60}
trainer: {builtin: digits-mlp, timeout: 5m}
max_trials: 2
max_concurrency: 2
checkpoint: {store: "s3://%s/studies", every: 500ms, keep_checkpoints: all}
backend: {max_runtime: 1s}
`, bucket), 0o644); err != nil {
		t.Fatal(err)
	}
	trials := runStudy(t, filepath.Join(dir, "state"), space, "s3-segments")
	if len(trials) != 2 {
		t.Fatalf("%d trials, want 2", len(trials))
	}
	for _, tr := range trials {
		if tr.State != hptype.TrialCompleted || tr.Segments() < 2 {
			t.Fatalf("trial %d: %s in %d segments, want completed in several", tr.Number, tr.State, tr.Segments())
		}
		if err := sameMetrics(tr.Metrics, referenceMetrics(t, tr, 0)); err != nil {
			t.Errorf("trial %d: %v", tr.Number, err)
		}
	}
	out, err := s3test.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("studies/")})
	if err != nil {
		t.Fatal(err)
	}
	manifests := 0
	for _, o := range out.Contents {
		if strings.HasSuffix(aws.ToString(o.Key), "/manifest.json") {
			manifests++
		}
	}
	// Two trials, each keeping its last 2 checkpoints.
	if manifests != 4 {
		t.Fatalf("%d checkpoint manifests in s3://%s/studies, want 4 (2 trials x keep_last 2)", manifests, bucket)
	}
}
