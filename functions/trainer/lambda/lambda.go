// Package lambda runs the trainer as an AWS Lambda function: one invocation
// runs one segment, with the SegmentRequest as the event and the
// SegmentResult as the response. It is the same trainer core (trainer.Run)
// that every other transport calls; this package only fits the segment
// into the invocation's time budget.
//
// # Deadline
//
// Lambda stops an invocation at its timeout, whatever the handler is
// doing, and a result that was not returned by then is lost along with the
// checkpoint that was being written. So a segment ends at its request's
// deadline or SafetyMargin before the invocation's deadline, whichever is
// earlier: the trainer writes its last checkpoint (Checkpoint.Grace before
// that) and the result is on its way back before Lambda kills the runtime.
//
// # Logs
//
// A request's LogPath names a file on the coordinator's machine, which the
// function cannot reach (and whose folder a Lambda's read-only file system
// could not hold). The workload's log goes to standard error instead, which
// Lambda sends to CloudWatch Logs and to the log tail of the invocation.
package lambda

import (
	"context"
	"errors"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// SafetyMargin is how long before the invocation's deadline a segment
// stops, so that the trainer can store its result and the runtime can send
// it back before Lambda ends the invocation.
const SafetyMargin = time.Second

// logPath is where the workload's log goes in a function.
const logPath = "/dev/stderr"

// ErrShutdown is the cause of the cancellation of a segment that was
// running when Lambda shut the execution environment down (SIGTERM).
var ErrShutdown = errors.New("the Lambda execution environment is shutting down (SIGTERM)")

// Handle runs the segment req within the invocation ctx. The segment's
// deadline is the earlier of req.Deadline and ctx's deadline less
// SafetyMargin. A segment that failed is a result (status failed), not an
// error: Handle never returns one, so that Lambda reports no function
// error for a segment that ran.
func Handle(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	invocation, _ := ctx.Deadline()
	req.Deadline = SegmentDeadline(req.Deadline, invocation)
	req.LogPath = logPath
	return trainer.Run(ctx, req), nil
}

// SegmentDeadline is the deadline of a segment requested to end at
// requested in an invocation that ends at invocation: the earlier of
// requested and invocation less SafetyMargin. A zero time means no
// deadline; with neither, the result is zero.
func SegmentDeadline(requested, invocation time.Time) time.Time {
	if invocation.IsZero() {
		return requested
	}
	limit := invocation.Add(-SafetyMargin)
	if requested.IsZero() || limit.Before(requested) {
		return limit
	}
	return requested
}

// Start runs the function: it serves invocations from the Lambda runtime
// API (AWS_LAMBDA_RUNTIME_API) with Handle, and never returns. An event
// that is not a SegmentRequest (a field this trainer does not know, say)
// is a function error, as on the trainer's standard input. When Lambda
// shuts the execution environment down while a segment runs, SIGTERM
// cancels the segment (with cause ErrShutdown) so that it checkpoints in
// the half second before SIGKILL.
func Start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	awslambda.StartHandlerFunc(Handle,
		awslambda.WithContext(ctx),
		awslambda.WithDisallowUnknownFields(true),
		awslambda.WithEnableSIGTERM(func() { cancel(ErrShutdown) }),
	)
}
