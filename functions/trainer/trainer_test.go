package trainer_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

func request(t *testing.T, root string, segment, attempt int, to float64) hptype.SegmentRequest {
	t.Helper()
	return hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "study",
		Trial:      3,
		Segment:    segment,
		Attempt:    attempt,
		Params:     hptype.Params{"hidden_units": int64(32), "epochs": int64(6)},
		Seed:       11,
		Deadline:   time.Now().Add(time.Minute),
		Resource:   hptype.ResourceRange{To: to, Unit: "epoch"},
		Checkpoint: &hptype.CheckpointPolicy{Store: "file://" + root, Prefix: "study/trial-3", KeepLast: 5},
		Workload:   hptype.Workload{Builtin: "digits-mlp"},
	}
}

// TestCorruptCheckpointFallsBackToThePreviousOne trains a trial to epoch 2
// and then to epoch 4, corrupts a shard of the epoch-4 checkpoint, and
// checks that the next segment detects it, resumes from epoch 2 and still
// ends with the metrics of an uninterrupted run.
func TestCorruptCheckpointFallsBackToThePreviousOne(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	first := trainer.Run(ctx, request(t, root, 0, 1, 2))
	second := trainer.Run(ctx, request(t, root, 1, 2, 4))
	for _, r := range []hptype.SegmentResult{first, second} {
		if r.Status != hptype.SegmentCompleted || r.Checkpoint == nil {
			t.Fatalf("segment %d: %s %q, checkpoint %v", r.Segment, r.Status, r.Error, r.Checkpoint)
		}
	}
	if second.ResumedFrom == nil || second.ResumedFrom.ID != first.Checkpoint.ID {
		t.Fatalf("segment 1 resumed from %v, want %s", second.ResumedFrom, first.Checkpoint.ID)
	}

	// Flip bytes of one shard of the newest checkpoint, keeping its size.
	blobs, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	ms, _, err := checkpoint.New(blobs).List(ctx, "study/trial-3")
	if err != nil || len(ms) != 2 || ms[0].ID.String() != second.Checkpoint.ID {
		t.Fatalf("checkpoints %v, %v; want the two written, newest first", ms, err)
	}
	shard := filepath.Join(root, filepath.FromSlash(ms[0].Shards[0].Key))
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b[:min(len(b), 64)] {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(shard, b, 0o600); err != nil {
		t.Fatal(err)
	}

	third := trainer.Run(ctx, request(t, root, 2, 3, 0))
	if third.Status != hptype.SegmentCompleted {
		t.Fatalf("segment 2: %s %q", third.Status, third.Error)
	}
	if third.ResumedFrom == nil || third.ResumedFrom.ID != first.Checkpoint.ID {
		t.Fatalf("segment 2 resumed from %v, want the older checkpoint %s", third.ResumedFrom, first.Checkpoint.ID)
	}
	if len(third.Warnings) == 0 || !strings.Contains(strings.Join(third.Warnings, "\n"), second.Checkpoint.ID) {
		t.Fatalf("warnings %q do not report the damaged checkpoint %s", third.Warnings, second.Checkpoint.ID)
	}
	// Epochs 3 to 6 again: the same values as segment 1 had for 3 and 4.
	if got := third.Metrics[0]; got.Step != 3 {
		t.Fatalf("segment 2 started at step %g, want 3", got.Step)
	}
	for i, m := range second.Metrics {
		if third.Metrics[i] != m {
			t.Fatalf("metric %d after the fallback is %+v, want %+v", i, third.Metrics[i], m)
		}
	}
}

// TestDeadlineSuspendsWithACheckpoint gives a segment less time than the
// trial needs: it must stop before its deadline with a checkpoint.
func TestDeadlineSuspendsWithACheckpoint(t *testing.T) {
	req := request(t, t.TempDir(), 0, 1, 0)
	req.Params = hptype.Params{"hidden_units": int64(512), "epochs": int64(1000)}
	req.Deadline = time.Now().Add(1500 * time.Millisecond)
	req.Checkpoint.Grace = hptype.Duration(300 * time.Millisecond)
	res := trainer.Run(context.Background(), req)
	if res.Status != hptype.SegmentSuspended || res.Checkpoint == nil {
		t.Fatalf("status %s, checkpoint %v, error %q; want suspended with a checkpoint", res.Status, res.Checkpoint, res.Error)
	}
	if res.Checkpoint.Resource != res.ResourceReached || res.ResourceReached < 1 {
		t.Fatalf("checkpoint at %g, reached %g", res.Checkpoint.Resource, res.ResourceReached)
	}
}
