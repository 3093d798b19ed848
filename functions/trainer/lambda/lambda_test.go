package lambda

import (
	"context"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

func TestSegmentDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                  string
		requested, invocation time.Time
		want                  time.Time
	}{
		{name: "neither", want: time.Time{}},
		{name: "request only", requested: now, want: now},
		{name: "invocation only", invocation: now, want: now.Add(-SafetyMargin)},
		{name: "request well before the invocation ends", requested: now, invocation: now.Add(time.Minute), want: now},
		{name: "request within the margin", requested: now, invocation: now.Add(SafetyMargin / 2), want: now.Add(-SafetyMargin / 2)},
		{name: "request at the margin", requested: now, invocation: now.Add(SafetyMargin), want: now},
		{name: "request after the invocation ends", requested: now.Add(time.Hour), invocation: now, want: now.Add(-SafetyMargin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := SegmentDeadline(tc.requested, tc.invocation)
			if !got.Equal(tc.want) {
				t.Errorf("SegmentDeadline(%v, %v) = %v, want %v", tc.requested, tc.invocation, got, tc.want)
			}
		})
	}
}

// A segment that cannot run is a failed result, never a function error.
func TestHandleFailedSegmentIsAResult(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := Handle(ctx, hptype.SegmentRequest{APIVersion: "hpsearch/v0", Study: "s1", Trial: 3, Segment: 2, Attempt: 1})
	if err != nil {
		t.Fatalf("Handle: %v, want no error", err)
	}
	if res.Status != hptype.SegmentFailed || res.Error == "" {
		t.Errorf("status %q error %q, want failed with the reason", res.Status, res.Error)
	}
	if res.Study != "s1" || res.Trial != 3 || res.Segment != 2 || res.Attempt != 1 {
		t.Errorf("result names study %q trial %d segment %d attempt %d, want the request's s1/3/2/1", res.Study, res.Trial, res.Segment, res.Attempt)
	}
}

// The segment runs within the invocation's time budget: a built-in
// workload whose request allows an hour stops at the invocation's
// deadline less the margin, suspended with a checkpoint.
func TestHandleStopsBeforeTheInvocationDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), SafetyMargin+2*time.Second)
	defer cancel()
	req := hptype.SegmentRequest{
		APIVersion: hptype.APIVersion,
		Study:      "s1",
		Params:     hptype.Params{"hidden_units": int64(512), "epochs": int64(1000)},
		Deadline:   time.Now().Add(time.Hour),
		Checkpoint: &hptype.CheckpointPolicy{
			Store:  "file://" + t.TempDir(),
			Prefix: "s1/trials/0",
			Every:  hptype.Duration(time.Hour),
			Grace:  hptype.Duration(500 * time.Millisecond),
		},
		Workload: hptype.Workload{Builtin: "digits-mlp"},
	}
	res, err := Handle(ctx, req)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if res.Status != hptype.SegmentSuspended || res.Checkpoint == nil {
		t.Fatalf("status %q, checkpoint %v (error %q): want suspended with a checkpoint at the invocation's deadline", res.Status, res.Checkpoint, res.Error)
	}
}
