// Package pool runs segments on a pool of persistent workers (hpsearch
// worker, on GPU machines): Run puts the segment's request on the pool's
// queue as a job, a worker leases it and runs it with the trainer runtime,
// and the trainer stores its result next to the trial's checkpoints, where
// Run finds it. The queue is any queue.Queue: the coordinator's bbolt queue
// served over HTTP (internal/queue/httpqueue), or SQS.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/queue"
)

// Results is where workers' results are found, and where a cancellation is
// left for them.
type Results interface {
	Result(ctx context.Context, prefix string, segment, attempt int) (*hptype.SegmentResult, error)
	Cancel(ctx context.Context, prefix string, segment, attempt int) error
}

// Executor runs segments on a worker pool.
type Executor struct {
	queue   queue.Queue
	results Results
	poll    time.Duration
	// stopWait is how long Run waits for the answer of a segment it was
	// told to stop: the trainer's grace period, plus the time a worker
	// takes to notice.
	stopWait time.Duration
}

// New returns an executor that queues segments on q and finds their
// results in results, looking every poll.
func New(q queue.Queue, results Results, poll time.Duration) *Executor {
	return &Executor{queue: q, results: results, poll: poll, stopWait: 30 * time.Second}
}

// Job is what a pool job carries: the segment's request, and how long the
// segment may run. The worker that leases the job sets the request's
// deadline to RunFor from when it starts, so that time spent waiting in
// the queue for a free worker does not eat into the segment.
type Job struct {
	Request hptype.SegmentRequest `json:"request"`
	RunFor  hptype.Duration       `json:"run_for"`
}

// JobID names the job of an attempt of a segment: one job per attempt, so
// enqueueing it again (after a coordinator restart) changes nothing.
func JobID(req hptype.SegmentRequest) string {
	return fmt.Sprintf("%s/trial-%d/segment-%d/attempt-%d", req.Study, req.Trial, req.Segment, req.Attempt)
}

// Run implements executor.Executor. It waits for the result however long
// the segment queues and runs: the worker sets the segment's deadline when
// it starts it (see Job), and the trainer ends the segment there. When ctx
// ends it leaves a cancellation for the worker, which stops the segment
// with a checkpoint, and returns the worker's answer if it comes within the
// grace period. Running the same attempt again (a restarted coordinator)
// finds its job queued already and waits for the same result.
func (e *Executor) Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	if req.Checkpoint == nil {
		return hptype.SegmentResult{}, errors.New("pool: a segment needs a checkpoint store for its worker to store the result in")
	}
	payload, err := json.Marshal(Job{Request: req, RunFor: hptype.Duration(time.Until(req.Deadline))})
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("pool: encode the segment request: %w", err)
	}
	if _, err := e.queue.Enqueue(ctx, queue.Job{ID: JobID(req), Payload: payload}); err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("pool: queue trial %d segment %d: %w", req.Trial, req.Segment, err)
	}
	res, err := e.await(ctx, req)
	if ctx.Err() == nil {
		if err != nil {
			// Given up on: a worker must not go on training it.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.stopWait)
			defer cancel()
			if cerr := e.results.Cancel(cctx, req.Checkpoint.Prefix, req.Segment, req.Attempt); cerr != nil {
				err = fmt.Errorf("%w (and leaving its cancellation failed: %v)", err, cerr)
			}
		}
		return res, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.stopWait)
	defer cancel()
	if err := e.results.Cancel(wctx, req.Checkpoint.Prefix, req.Segment, req.Attempt); err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("pool: stop trial %d segment %d: %w", req.Trial, req.Segment, err)
	}
	res, err = e.await(wctx, req)
	if err != nil {
		return hptype.SegmentResult{}, fmt.Errorf("pool: trial %d segment %d stopped (%w) and no worker answered: %w", req.Trial, req.Segment, context.Cause(ctx), err)
	}
	return res, nil
}

// maxReadFailures is how many reads of a result in a row may fail (the
// store briefly unreachable) before Run gives up on the segment.
const maxReadFailures = 10

// await polls for the result until ctx ends.
func (e *Executor) await(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	tick := time.NewTicker(e.poll)
	defer tick.Stop()
	failures := 0
	for {
		res, err := e.results.Result(ctx, req.Checkpoint.Prefix, req.Segment, req.Attempt)
		switch {
		case err != nil && ctx.Err() == nil:
			if failures++; failures >= maxReadFailures {
				return hptype.SegmentResult{}, fmt.Errorf("pool: read the result of trial %d segment %d (%d tries): %w", req.Trial, req.Segment, failures, err)
			}
		case res != nil:
			return *res, nil
		default:
			failures = 0
		}
		select {
		case <-ctx.Done():
			return hptype.SegmentResult{}, ctx.Err()
		case <-tick.C:
		}
	}
}
