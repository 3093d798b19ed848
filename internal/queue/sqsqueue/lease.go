package sqsqueue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/hpsearch/hpsearch/internal/queue"
)

const (
	// pollSlack is how long a long poll may outlast the wait of its Lease,
	// so that a wait of whole seconds is one long poll, not a shorter one
	// and a short poll.
	pollSlack = 100 * time.Millisecond
	// refreshAfter is how long a ReceiveMessage may take before its
	// messages get their visibility set again. SQS starts a message's
	// visibility when it hands the message out, which in a long poll can
	// be long after the request began; a lease's expiry is counted from
	// the start of a request, so that it never ends after SQS's.
	refreshAfter = 100 * time.Millisecond
	// finishTimeout bounds the work that turns received messages into
	// leases, and releases them, after the Lease's ctx is done: it goes
	// on, because a receive that is not recorded counts as a failed
	// attempt.
	finishTimeout = 30 * time.Second
)

// delivery is a received message.
type delivery struct {
	id, nonce string // from the body; id is "" if the body is not a job's
	messageID string
	receipt   string
	count     int // ApproximateReceiveCount, this receive included
	// start is when the request that started the message's visibility
	// began.
	start time.Time
}

// Lease implements queue.Queue. It receives at most ten messages per
// ReceiveMessage; for a larger p.Max it receives again at once while the
// queue returns full batches.
func (q *Queue) Lease(ctx context.Context, p queue.LeaseParams) ([]queue.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqsqueue: %w", err)
	}
	if p.Visibility > maxVisibility {
		return nil, fmt.Errorf("sqsqueue: lease visibility %s is longer than the 12h that SQS allows: %w", p.Visibility, queue.ErrInvalid)
	}
	if err := q.check(ctx); err != nil {
		return nil, fmt.Errorf("sqsqueue: lease: %w", err)
	}
	ctx, stop := q.untilClosed(ctx)
	defer stop()
	deadline := time.Now().Add(p.Wait)
	for first := true; ; first = false {
		remaining := time.Until(deadline)
		poll := pollSeconds(remaining)
		if poll == 0 && !first {
			// Less than a second is left: wait it out and poll once more.
			if err := sleep(ctx, remaining); err != nil {
				return nil, q.stopped(ctx, err)
			}
		}
		leases, full, err := q.receive(ctx, p, p.Max, poll)
		for err == nil && full && len(leases) > 0 && len(leases) < p.Max {
			var more []queue.Lease
			more, full, err = q.receive(ctx, p, p.Max-len(leases), 0)
			leases = append(leases, more...)
		}
		if ctx.Err() != nil {
			q.giveBack(ctx, leases)
			return nil, q.stopped(ctx, ctx.Err())
		}
		if len(leases) > 0 {
			if err != nil {
				q.log.WarnContext(ctx, "sqsqueue: lease returns fewer jobs than it could", slog.Int("leased", len(leases)), slog.Any("err", err))
			}
			return leases, nil
		}
		if err != nil {
			return nil, q.stopped(ctx, err)
		}
		if time.Until(deadline) <= 0 {
			return nil, nil
		}
	}
}

// untilClosed returns ctx, canceled with queue.ErrClosed as its cause
// when q is closed.
func (q *Queue) untilClosed(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-q.closed:
			cancel(queue.ErrClosed)
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// giveBack releases the leases of a Lease whose ctx ended before it could
// return them, so that they do not count as failed attempts.
func (q *Queue) giveBack(ctx context.Context, leases []queue.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	each(len(leases), func(i int) {
		if err := q.release(ctx, leases[i].Token); err != nil {
			q.log.WarnContext(ctx, "sqsqueue: the lease of a canceled Lease was not released; it will expire", slog.String("job", leases[i].Job.ID), slog.Any("err", err))
		}
	})
}

// stopped wraps an error of Lease, which is queue.ErrClosed or ctx's error
// if either ended it.
func (q *Queue) stopped(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), queue.ErrClosed) {
		return fmt.Errorf("sqsqueue: lease: %w", queue.ErrClosed)
	}
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("sqsqueue: lease: %w", cerr)
	}
	return fmt.Errorf("sqsqueue: lease: %w", err)
}

// receive receives up to max (at most ten) messages, waiting up to poll
// seconds for one, and leases their jobs, even if ctx ends meanwhile. full
// reports whether SQS returned as many messages as were asked for.
func (q *Queue) receive(ctx context.Context, p queue.LeaseParams, max int, poll int32) (leases []queue.Lease, full bool, err error) {
	n := min(max, maxBatch)
	vis := seconds(p.Visibility)
	start := time.Now()
	out, err := q.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           vis,
		WaitTimeSeconds:             poll,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, false, fmt.Errorf("receive from %s: %w", q.url, err)
	}
	if len(out.Messages) == 0 {
		return nil, false, nil
	}
	// What SQS handed out must be recorded, even if ctx is done now.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	ds := make([]delivery, len(out.Messages))
	for i, m := range out.Messages {
		ds[i] = delivery{messageID: aws.ToString(m.MessageId), receipt: aws.ToString(m.ReceiptHandle), start: start}
		ds[i].id, ds[i].nonce, _ = splitID(aws.ToString(m.Body))
		ds[i].count, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	}
	if time.Since(start) > refreshAfter {
		q.refresh(fctx, ds, vis)
	}
	got := make([]*queue.Lease, len(ds))
	errs := make([]error, len(ds))
	each(len(ds), func(i int) { got[i], errs[i] = q.take(fctx, ds[i], p) })
	for _, l := range got {
		if l != nil {
			leases = append(leases, *l)
		}
	}
	return leases, len(out.Messages) == n, errors.Join(errs...)
}

// refresh sets the visibility of ds again, from now, and moves their start
// to now. Those it fails for keep the start of the ReceiveMessage: their
// leases are shorter than asked, never longer than SQS's.
func (q *Queue) refresh(ctx context.Context, ds []delivery, vis int32) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(ds))
	for i, d := range ds {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(d.receipt),
			VisibilityTimeout: vis,
		}
	}
	start := time.Now()
	out, err := q.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil {
		q.log.WarnContext(ctx, "sqsqueue: leases shortened by the time their long poll took", slog.Any("err", err))
		return
	}
	for _, ok := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && i < len(ds) {
			ds[i].start = start
		}
	}
}

// take leases the job of d, if its record says that d is the job's
// message and that the job is due, and otherwise does what d calls for. It
// returns nil if it leases nothing.
func (q *Queue) take(ctx context.Context, d delivery, p queue.LeaseParams) (*queue.Lease, error) {
	if d.id == "" {
		q.log.WarnContext(ctx, "sqsqueue: a message that names no job is left to the redrive policy", slog.String("message", d.messageID))
		return nil, nil
	}
	for {
		rec, etag, err := q.load(ctx, d.id)
		if errors.Is(err, queue.ErrNotFound) {
			q.drop(ctx, d, "its job is not in the queue")
			return nil, nil
		}
		if err != nil {
			q.requeue(ctx, d, p.Visibility)
			return nil, err
		}
		adopt := false
		if rec.Msg != d.nonce {
			if rec.Sent {
				q.drop(ctx, d, "another message carries its job")
				return nil, nil
			}
			// The job's message was never sent, or not yet known to be:
			// this one carries the job from now on.
			adopt = true
		}
		now := time.Now()
		settle(rec, now, q.cfg.MaxAttempts)
		var l *queue.Lease
		switch {
		case rec.State == stateDead:
			q.bury(ctx, d.id, d.nonce, d.receipt)
			return nil, nil
		case rec.State == stateLeased:
			err = q.absorb(ctx, rec, etag, d)
		case rec.VisibleAt.After(now):
			err = q.postpone(ctx, rec, etag, d)
		default:
			l, err = q.grant(ctx, rec, etag, d, p, adopt)
		}
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			q.requeue(ctx, d, p.Visibility)
			return nil, err
		}
		return l, nil
	}
}

// grant writes the lease of d into rec, a job that is due, and returns it;
// or, if receives of d that nobody recorded were the job's last attempts,
// marks the job dead and returns nil.
func (q *Queue) grant(ctx context.Context, rec *record, etag string, d delivery, p queue.LeaseParams, adopt bool) (*queue.Lease, error) {
	if adopt {
		// Its earlier receives are not in this record's count: assume
		// that they were not failures, and replace the message at the
		// next Nack (see Skew) so that SQS's count agrees again.
		rec.Skew = max(d.count-1, 0)
	} else if lost := d.count - rec.Receives - 1; lost > 0 {
		rec.Failures += lost
		rec.Cause = fmt.Sprintf("%d lease(s) received from SQS were never recorded: the leaser failed or died before recording them", lost)
	}
	rec.Msg, rec.Sent, rec.Receives = d.nonce, true, d.count
	if rec.Failures >= q.cfg.MaxAttempts {
		rec.State, rec.VisibleAt, rec.DiedAt = stateDead, time.Time{}, time.Now()
		if _, err := q.put(ctx, rec, etag); err != nil {
			return nil, err
		}
		q.bury(ctx, d.id, d.nonce, d.receipt)
		return nil, nil
	}
	token := joinID(rec.ID, d.receipt)
	rec.State, rec.VisibleAt = stateLeased, time.Time{}
	rec.Token, rec.Owner, rec.Receipt = token, p.Owner, d.receipt
	rec.ReceivedAt, rec.Expires = d.start, d.start.Add(roundUp(p.Visibility))
	if _, err := q.put(ctx, rec, etag); err != nil {
		return nil, err
	}
	return &queue.Lease{Job: rec.job(), Token: token, Attempt: rec.Failures + 1, Expires: rec.Expires}, nil
}

// absorb handles a delivery of a job whose lease is valid: SQS delivered
// its message again early (a duplicate, or a stale holder changed its
// visibility). The lease stands; the message is hidden until the lease
// ends, and the record keeps the newest receipt handle, which SQS needs to
// delete the message.
func (q *Queue) absorb(ctx context.Context, rec *record, etag string, d delivery) error {
	if d.count > rec.Receives {
		rec.Receipt, rec.Receives = d.receipt, d.count
	}
	rec.Skew++
	if _, err := q.put(ctx, rec, etag); err != nil {
		return err
	}
	q.log.DebugContext(ctx, "sqsqueue: a message of a leased job came early; hidden until its lease ends", slog.String("job", rec.ID), slog.Time("expires", rec.Expires))
	q.hide(ctx, rec.ID, d.receipt, time.Until(rec.Expires))
	return nil
}

// postpone handles a delivery of a job that is not due yet: its delay or
// backoff is longer than SQS can delay or hide a message, or the clocks
// disagree. A new message, delayed until the job is due (or by 15
// minutes, for another hop), replaces d.
func (q *Queue) postpone(ctx context.Context, rec *record, etag string, d delivery) error {
	rec.renew(rand.Text())
	etag, err := q.put(ctx, rec, etag)
	if err != nil {
		return err
	}
	q.log.DebugContext(ctx, "sqsqueue: a message of a job that is not due yet is replaced", slog.String("job", rec.ID), slog.Time("due", rec.VisibleAt))
	q.resend(ctx, rec, etag, d.receipt)
	return nil
}

// drop deletes d, a stale message.
func (q *Queue) drop(ctx context.Context, d delivery, why string) {
	q.log.DebugContext(ctx, "sqsqueue: a stale message is deleted", slog.String("job", d.id), slog.String("why", why))
	q.deleteMessages(ctx, []string{d.receipt})
}

// requeue replaces d by a copy delayed by after (at most 15 minutes), when
// its record could not be read or written: a new message starts a new
// receive count, so that an S3 failure does not count as a failed attempt
// of the job. If that fails too, d comes back when its visibility ends.
func (q *Queue) requeue(ctx context.Context, d delivery, after time.Duration) {
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(joinID(d.id, d.nonce)),
		DelaySeconds: delaySeconds(after),
	}); err != nil {
		q.log.WarnContext(ctx, "sqsqueue: a message whose job could not be leased comes back when its visibility ends", slog.String("job", d.id), slog.Any("err", err))
		return
	}
	q.deleteMessages(ctx, []string{d.receipt})
}

// pollSeconds returns the WaitTimeSeconds of a ReceiveMessage when
// remaining is left of a Lease's wait.
func pollSeconds(remaining time.Duration) int32 {
	if remaining <= 0 {
		return 0
	}
	return int32(min(remaining+pollSlack, maxPoll) / time.Second)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
