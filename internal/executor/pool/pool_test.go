package pool_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor/pool"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
)

func setup(t *testing.T) (*boltqueue.Queue, *checkpoint.Store, hptype.SegmentRequest) {
	t.Helper()
	q, err := boltqueue.Open(filepath.Join(t.TempDir(), "q.db"), queue.Config{MaxAttempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	b, err := fsblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	req := hptype.SegmentRequest{APIVersion: hptype.APIVersion, Study: "s", Trial: 3, Segment: 1, Attempt: 2,
		Deadline:   time.Now().Add(10 * time.Minute),
		Checkpoint: &hptype.CheckpointPolicy{Store: b.URI(), Prefix: "s/trial-3"}}
	return q, checkpoint.New(b), req
}

// worker leases the job and stores the result the segment returns.
func worker(t *testing.T, q queue.Queue, st *checkpoint.Store, res hptype.SegmentResult) pool.Job {
	t.Helper()
	var leases []queue.Lease
	for len(leases) == 0 {
		var err error
		if leases, err = q.Lease(context.Background(), queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Second}); err != nil {
			t.Error(err)
			return pool.Job{}
		}
	}
	var job pool.Job
	if err := json.Unmarshal(leases[0].Job.Payload, &job); err != nil {
		t.Error(err)
	}
	raw, _ := json.Marshal(res)
	if err := st.PutResult(context.Background(), job.Request.Checkpoint.Prefix, job.Request.Segment, job.Request.Attempt, raw); err != nil {
		t.Error(err)
	}
	return job
}

func TestRunQueuesTheSegmentAndReturnsItsResult(t *testing.T) {
	q, st, req := setup(t)
	done := make(chan pool.Job)
	go func() {
		done <- worker(t, q, st, hptype.SegmentResult{Status: hptype.SegmentCompleted, ResourceReached: 7})
	}()
	res, err := pool.New(q, st, 10*time.Millisecond).Run(t.Context(), req)
	if err != nil || res.Status != hptype.SegmentCompleted || res.ResourceReached != 7 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	job := <-done
	if job.Request.Trial != 3 || time.Duration(job.RunFor) < 9*time.Minute || time.Duration(job.RunFor) > 10*time.Minute {
		t.Errorf("job %+v: want the request and the 10 minutes it may run", job)
	}
	// A restarted coordinator runs the same attempt again: the job is
	// there already, and so is its result.
	if again, err := pool.New(q, st, 10*time.Millisecond).Run(t.Context(), req); err != nil || again.ResourceReached != 7 {
		t.Errorf("Run again = %+v, %v; want the stored result", again, err)
	}
}

// TestStopLeavesACancellation stops a run: the worker finds the
// cancellation, and its answer (suspended at a checkpoint) is returned.
func TestStopLeavesACancellation(t *testing.T) {
	q, st, req := setup(t)
	ctx, stop := context.WithCancel(t.Context())
	go func() {
		// Stop once the segment is queued.
		for {
			if st, err := q.Stats(context.Background()); err == nil && st.Ready > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		for {
			if done, err := st.Cancelled(context.Background(), req.Checkpoint.Prefix, req.Segment, req.Attempt); err == nil && done {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		worker(t, q, st, hptype.SegmentResult{Status: hptype.SegmentSuspended, ResourceReached: 4})
	}()
	res, err := pool.New(q, st, 10*time.Millisecond).Run(ctx, req)
	if err != nil || res.Status != hptype.SegmentSuspended {
		t.Fatalf("Run after a stop = %+v, %v; want the worker's suspended answer", res, err)
	}
}
