// Package executor is the contract between the coordinator and the places
// segments run: a local process now, and later AWS Lambda, Cloud Run jobs
// and GPU pool workers. Every executor speaks the trainer contract.
package executor

import (
	"context"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Executor runs segments.
type Executor interface {
	// Run runs one segment and returns the trainer's result. A workload that
	// fails is a result with status failed, not an error; an error means the
	// segment could not be run or its result was lost (the trainer crashed,
	// was killed, or could not be reached), so running it again may succeed.
	// When ctx ends, Run asks the segment to stop, which gives the trainer
	// its grace period to checkpoint: if the trainer answers, Run returns its
	// result (usually suspended); otherwise an error.
	Run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error)
}
