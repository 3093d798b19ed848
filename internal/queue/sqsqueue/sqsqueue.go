// Package sqsqueue implements queue.Queue on an Amazon SQS standard queue,
// with its dead-letter queue, and one compare-and-set record per job in an
// S3 bucket.
//
// # Why a record beside SQS
//
// SQS delivers messages, times their visibility and long-polls, but it
// cannot find a message by job ID (Get, idempotent Enqueue), count jobs by
// state (Stats), list dead jobs with the cause of their death (Dead), or
// fence a stale holder: SQS may accept a DeleteMessage or
// ChangeMessageVisibility with an old receipt handle. So each job has a
// record, a small JSON object at Options.Prefix + base64url(ID) in
// Options.Bucket, and the record is the truth about the job: its payload,
// state, failures, cause and lease. Every change to it is a conditional
// write (PutObject or DeleteObject with If-Match on the ETag of the version
// that was read, or If-None-Match: * to create it); a write that loses a
// race re-reads the record and decides again. A revision counter in the
// record keeps the ETags of its versions distinct.
//
// A message carries a job to a leaser: its body is base64url(ID) and a
// nonce, and the record names the nonce of the job's current message.
// Any other message of the job is stale and is deleted when it is
// received; so is a message whose job has no record (it was acked).
//
// # The calls
//
//   - Enqueue creates each record with If-None-Match: * (a job whose record
//     exists is Existing), sends the messages with SendMessageBatch (a
//     delay up to SQS's 15 minutes), then marks the records as sent. If an
//     Enqueue fails or dies before that mark, calling it again finds the
//     unsent record and sends its message.
//   - Lease long-polls ReceiveMessage (WaitTimeSeconds up to 20 s, looped
//     for longer waits; a wait of less than a second ends with a short
//     poll) with the lease's visibility, then, for each message, writes
//     the lease into the record. The token is base64url(ID) "." receipt
//     handle. A message whose job is not due after all is handled as
//     described under consistency below. If the Lease's ctx ends (or the
//     queue is closed) after SQS handed out messages, their leases are
//     still written, then released.
//   - Extend calls ChangeMessageVisibility and writes the new expiry.
//   - Ack deletes the record (If-Match), then the message
//     (DeleteMessageBatch).
//   - Nack writes the failure; the message is hidden for the backoff with
//     ChangeMessageVisibility (or, if it was delivered early before, see
//     below, replaced by a new message delayed by the backoff); if the
//     failure was the last, the record is marked dead and the message moved
//     to the dead-letter queue (SendMessage there, DeleteMessage here).
//   - Release writes the job back as ready and replaces the message with a
//     new one (SendMessage, then DeleteMessage of the old one): a new
//     message has an ApproximateReceiveCount of zero, so the released
//     attempt does not count toward the redrive policy. If the SendMessage
//     fails, Release undoes its write and fails; the lease holds.
//   - Get reads one record; Stats and Dead list and read all of them.
//
// # Consistency
//
// A token is valid while the record holds it and its expiry has not
// passed; every call that presents a token reads the record, checks that,
// and makes its change with a conditional write, before any SQS call. So a
// stale holder is fenced whatever SQS accepts, and each job's changes are
// linearizable. When the write has succeeded the call has taken effect; an
// SQS step after it that fails is logged, not returned, and repaired when
// the message is next received (a message left behind is stale, a message
// not moved to the dead-letter queue is moved then).
//
// Time: every time in a record that an SQS timer mirrors (a lease's expiry,
// a delay, a backoff) is computed from a clock reading taken before the
// request that starts the timer, in whole seconds as SQS counts them. SQS
// therefore never delivers a message before its record says that the job
// is due, as long as the clocks agree. When one comes early anyway — SQS
// delivered a message twice, a stale holder changed its visibility, the
// clocks disagree — Lease does not hand it out: a job still leased keeps
// its lease and the message is hidden until the lease ends, and a job not
// yet due gets a new message that SQS delays until then. The same holds
// for delays and backoffs longer than SQS allows (15 minutes of delay, 12
// hours of visibility): they are reached in hops of new messages.
//
// Counting: the record counts failed attempts; SQS counts receives, and
// its redrive policy (maxReceiveCount = Config.MaxAttempts, checked by New)
// moves a message to the dead-letter queue when it is received once more
// after that many receives. Every receive of a job's message becomes a
// recorded lease that ends in an Ack (the message is deleted), a Release (a
// new message), a Nack or an expiry (a failure in both counts); or it is
// followed by a new message, or the message's deletion. So the receives of
// a message are the failures since it was sent, plus the lease in
// progress: when SQS dead-letters a message, the record has counted
// MaxAttempts failures too, and shows the job dead once its last lease
// has expired. A job whose message is newer than some of its failures dies
// by the record's count first, and Lease moves its message itself. A
// receive that was never recorded — a leaser died between ReceiveMessage
// and its write, or a Lease was canceled while its ReceiveMessage was in
// flight — shows in ApproximateReceiveCount at the next receive, which
// counts it as a failed attempt, as SQS does.
//
// A receive that is not an attempt and is not followed by a new message
// puts SQS's count ahead of the record's; the record notes it (Skew), and
// the job's next Nack replaces the message. This leaves windows where the
// record and SQS disagree, all of them rare: if an unrecorded receive was
// a job's last attempt; if SQS delivered a leased job's message twice and
// that lease then expired on the job's last attempt but one; or if
// SendMessage failed where a message had to be replaced (a Nack after an
// early delivery, a job postponed, a Release whose undo failed too) and
// the old message, kept instead, had as many receives as attempts remain.
// Then SQS dead-letters the message while the record shows the job ready,
// and nothing leases it. An operator can move such messages back with a
// dead-letter queue redrive; Lease then settles each by the record's
// count: it leases the job, or records it dead and returns the message to
// the dead-letter queue. SQS also deletes messages older than the
// retention period, which CreateQueues sets to its maximum of 14 days; a
// job that waits longer than that is lost the same way.
//
// # Costs
//
// A job that is enqueued, leased once and acked costs three S3 PUTs (the
// record, its sent mark, the lease), two GETs and one DELETE, and a tenth
// each of a SendMessageBatch, ReceiveMessage and DeleteMessageBatch when
// the calls carry ten jobs. Release adds a GET, two PUTs, a SendMessage and
// a DeleteMessage; Nack a GET, a PUT and a ChangeMessageVisibility. Get is
// one GET; Stats and Dead read every record (a LIST per thousand jobs and
// a GET per job, sixteen at a time), so they are for inspection, not for a
// loop. A Lease's latency is the receive plus a GET and a PUT per message
// (in parallel).
//
// # Order and limits
//
// An SQS standard queue keeps no order, and neither does this package.
// LeaseParams.Visibility and Extend round up to whole seconds; a lease
// cannot last more than 12 hours from when it began (SQS refuses to extend
// a message's visibility further), so a longer Visibility or Extend is
// invalid. A job ID can have up to about 700 bytes: its base64url form
// must fit in an S3 key, with the prefix. The job records outlive the
// queues: deleting the queues with DeleteQueues does not delete them.
package sqsqueue

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/hpsearch/hpsearch/internal/queue"
)

const (
	// maxVisibility is the longest visibility SQS gives a message, counted
	// from when it was received.
	maxVisibility = 12 * time.Hour
	// maxDelay is the longest delay of SendMessage.
	maxDelay = 15 * time.Minute
	// maxPoll is the longest wait of one ReceiveMessage.
	maxPoll = 20 * time.Second
	// maxBatch is the most messages one SQS batch call takes or returns.
	maxBatch = 10
	// parallelism bounds the S3 requests that one call makes at once.
	parallelism = 16
	// retention is the message retention period that CreateQueues sets:
	// the SQS maximum.
	retention = 14 * 24 * time.Hour
)

// DeadLetterSuffix is appended to a queue's name to name its dead-letter
// queue in CreateQueues.
const DeadLetterSuffix = "-dead"

// SQSClient is the part of *sqs.Client that a Queue uses.
type SQSClient interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// S3Client is the part of *s3.Client that a Queue uses.
type S3Client interface {
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var (
	_ SQSClient = (*sqs.Client)(nil)
	_ S3Client  = (*s3.Client)(nil)
)

// Options say where a Queue keeps its messages and records.
type Options struct {
	// SQS is the client of the queues (see NewClient). Required.
	SQS SQSClient
	// QueueURL is the URL of the queue. Give it or QueueName. The queue
	// must have a redrive policy whose maxReceiveCount is the
	// Config.MaxAttempts of the Queue (see CreateQueues); its dead-letter
	// queue is found from the policy.
	QueueURL string
	// QueueName is the name of the queue, looked up with GetQueueUrl, if
	// QueueURL is empty.
	QueueName string
	// S3 is the client of the bucket of the job records (see
	// s3blob.NewClient). Required; it must support conditional writes and
	// deletes (If-Match), as Amazon S3 does.
	S3 S3Client
	// Bucket holds the job records. Required.
	Bucket string
	// Prefix is prepended to the keys of the job records; nothing else may
	// be stored under it. Defaults to "sqsqueue/" and the queue's name
	// and "/".
	Prefix string
	// Logger logs the SQS steps that failed after a call took effect (they
	// are repaired later) and, at debug level, the messages that Lease does
	// not hand out. Defaults to discarding.
	Logger *slog.Logger
}

// Queue is a queue.Queue on SQS and S3. It is safe for concurrent use, also
// by several processes on the same queues and bucket.
type Queue struct {
	sqs    SQSClient
	s3     S3Client
	url    string
	dlqURL string
	bucket string
	prefix string
	cfg    queue.Config
	log    *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

var _ queue.Queue = (*Queue)(nil)

// New returns the queue at opts with the retry policy cfg. It reads the
// queue's attributes to find its dead-letter queue and to check that its
// redrive policy agrees with cfg.MaxAttempts; it sends no request to S3, so
// a missing bucket shows in the first call's error.
func New(ctx context.Context, opts Options, cfg queue.Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqsqueue: %w", err)
	}
	cfg = cfg.WithDefaults()
	switch {
	case opts.SQS == nil:
		return nil, fmt.Errorf("sqsqueue: no SQS client in Options.SQS: %w", queue.ErrInvalid)
	case opts.S3 == nil:
		return nil, fmt.Errorf("sqsqueue: no S3 client in Options.S3: %w", queue.ErrInvalid)
	case opts.Bucket == "":
		return nil, fmt.Errorf("sqsqueue: no bucket for the job records in Options.Bucket: %w", queue.ErrInvalid)
	case (opts.QueueURL == "") == (opts.QueueName == ""):
		return nil, fmt.Errorf("sqsqueue: give one of Options.QueueURL and Options.QueueName: %w", queue.ErrInvalid)
	}
	url := opts.QueueURL
	if url == "" {
		out, err := opts.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(opts.QueueName)})
		if err != nil {
			return nil, fmt.Errorf("sqsqueue: find queue %q: %w (create it with CreateQueues, or check AWS_REGION and AWS_ENDPOINT_URL)", opts.QueueName, err)
		}
		url = aws.ToString(out.QueueUrl)
	}
	dlqURL, err := deadLetterURL(ctx, opts.SQS, url, cfg.MaxAttempts)
	if err != nil {
		return nil, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "sqsqueue/" + url[strings.LastIndex(url, "/")+1:] + "/"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queue{
		sqs:    opts.SQS,
		s3:     opts.S3,
		url:    url,
		dlqURL: dlqURL,
		bucket: opts.Bucket,
		prefix: prefix,
		cfg:    cfg,
		log:    log,
		closed: make(chan struct{}),
	}, nil
}

// redrivePolicy is the RedrivePolicy attribute of a queue.
type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	// MaxReceiveCount is a number, or a string of one as some tools write.
	MaxReceiveCount json.Number `json:"maxReceiveCount"`
}

// deadLetterURL returns the URL of the dead-letter queue of the queue at
// url, after checking that its redrive policy has maxReceiveCount
// maxAttempts.
func deadLetterURL(ctx context.Context, client SQSClient, url string, maxAttempts int) (string, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", fmt.Errorf("sqsqueue: read the attributes of %s: %w (check the queue URL or name, AWS_REGION and AWS_ENDPOINT_URL)", url, err)
	}
	fix := fmt.Sprintf("create the queues with sqsqueue.CreateQueues, or give the queue a redrive policy to a dead-letter queue with maxReceiveCount %d", maxAttempts)
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return "", fmt.Errorf("sqsqueue: queue %s has no dead-letter queue: %s: %w", url, fix, queue.ErrInvalid)
	}
	var p redrivePolicy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return "", fmt.Errorf("sqsqueue: queue %s: decode its redrive policy %s: %w", url, raw, err)
	}
	if n, err := strconv.Atoi(p.MaxReceiveCount.String()); err != nil || n != maxAttempts {
		return "", fmt.Errorf("sqsqueue: queue %s dead-letters a message after %s receives, but the queue config allows %d attempts: %s, or set Config.MaxAttempts to match: %w",
			url, p.MaxReceiveCount, maxAttempts, fix, queue.ErrInvalid)
	}
	// arn:partition:sqs:region:account:name
	parts := strings.Split(p.DeadLetterTargetArn, ":")
	if len(parts) != 6 || parts[2] != "sqs" {
		return "", fmt.Errorf("sqsqueue: queue %s: the dead-letter target %q of its redrive policy is not an SQS queue ARN: %w", url, p.DeadLetterTargetArn, queue.ErrInvalid)
	}
	dlq, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{
		QueueName:              aws.String(parts[5]),
		QueueOwnerAWSAccountId: aws.String(parts[4]),
	})
	if err != nil {
		return "", fmt.Errorf("sqsqueue: find the dead-letter queue %s of %s: %w", p.DeadLetterTargetArn, url, err)
	}
	return aws.ToString(dlq.QueueUrl), nil
}

// NewClient returns an SQS client configured from the environment as the
// AWS CLI reads it (config.LoadDefaultConfig): AWS_REGION, AWS_PROFILE or
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and AWS_ENDPOINT_URL or
// AWS_ENDPOINT_URL_SQS for another service than AWS (moto, LocalStack).
func NewClient(ctx context.Context) (*sqs.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(awshttp.NewBuildableClient()))
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: load the AWS configuration: %w (check AWS_PROFILE, AWS_CONFIG_FILE and AWS_CA_BUNDLE)", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("sqsqueue: no AWS region configured: set AWS_REGION (or a region in the AWS profile)")
	}
	return sqs.NewFromConfig(cfg), nil
}

// Queues are the URLs of a queue and its dead-letter queue.
type Queues struct {
	URL           string
	DeadLetterURL string
}

// CreateQueues creates the standard queue name and its dead-letter queue
// name+DeadLetterSuffix, both keeping messages for 14 days, with the
// redrive policy that New requires for cfg: a message received
// cfg.MaxAttempts times goes to the dead-letter queue. Like SQS's
// CreateQueue, it returns the queues if they exist with these attributes.
func CreateQueues(ctx context.Context, client *sqs.Client, name string, cfg queue.Config) (Queues, error) {
	if err := cfg.Validate(); err != nil {
		return Queues{}, fmt.Errorf("sqsqueue: create queues %q: %w", name, err)
	}
	keep := strconv.Itoa(int(retention / time.Second))
	dead, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name + DeadLetterSuffix),
		Attributes: map[string]string{string(types.QueueAttributeNameMessageRetentionPeriod): keep},
	})
	if err != nil {
		return Queues{}, fmt.Errorf("sqsqueue: create the dead-letter queue %q: %w", name+DeadLetterSuffix, err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dead.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Queues{}, fmt.Errorf("sqsqueue: read the ARN of %s: %w", aws.ToString(dead.QueueUrl), err)
	}
	policy, err := json.Marshal(map[string]any{
		"deadLetterTargetArn": attrs.Attributes[string(types.QueueAttributeNameQueueArn)],
		"maxReceiveCount":     cfg.WithDefaults().MaxAttempts,
	})
	if err != nil {
		return Queues{}, fmt.Errorf("sqsqueue: encode the redrive policy of %q: %w", name, err)
	}
	main, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			string(types.QueueAttributeNameMessageRetentionPeriod): keep,
			string(types.QueueAttributeNameRedrivePolicy):          string(policy),
		},
	})
	if err != nil {
		return Queues{}, fmt.Errorf("sqsqueue: create the queue %q: %w", name, err)
	}
	return Queues{URL: aws.ToString(main.QueueUrl), DeadLetterURL: aws.ToString(dead.QueueUrl)}, nil
}

// DeleteQueues deletes the queues, with their messages. It does not delete
// the job records in S3.
func DeleteQueues(ctx context.Context, client *sqs.Client, qs Queues) error {
	var errs []error
	for _, url := range []string{qs.URL, qs.DeadLetterURL} {
		if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			errs = append(errs, fmt.Errorf("sqsqueue: delete the queue %s: %w", url, err))
		}
	}
	return errors.Join(errs...)
}

// Close wakes waiting Lease calls and makes further calls fail with
// queue.ErrClosed. The clients stay open.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() { close(q.closed) })
	return nil
}

// Enqueue implements queue.Queue. An Enqueue that fails may have added some
// of the jobs; calling it again with the same jobs completes it, and
// reports those as Existing.
func (q *Queue) Enqueue(ctx context.Context, jobs ...queue.Job) (queue.EnqueueResult, error) {
	for _, j := range jobs {
		if err := j.Validate(); err != nil {
			return queue.EnqueueResult{}, fmt.Errorf("sqsqueue: enqueue: %w", err)
		}
	}
	if err := q.check(ctx); err != nil {
		return queue.EnqueueResult{}, fmt.Errorf("sqsqueue: enqueue: %w", err)
	}
	// A job is added if its record is created here; later jobs of the
	// call with its ID are Existing.
	type entry struct {
		job   queue.Job
		rec   *record
		etag  string
		added bool
		err   error
	}
	entries := make([]entry, len(jobs))
	var first []int // the entries of the first job of each ID
	seen := make(map[string]bool, len(jobs))
	for i, j := range jobs {
		entries[i].job = j
		if !seen[j.ID] {
			seen[j.ID] = true
			first = append(first, i)
		}
	}
	now := time.Now()
	each(len(first), func(k int) {
		e := &entries[first[k]]
		e.rec = &record{
			ID:         e.job.ID,
			Payload:    e.job.Payload,
			Delay:      e.job.Delay,
			EnqueuedAt: now,
			State:      stateWaiting,
			VisibleAt:  now.Add(roundUp(e.job.Delay)),
			Msg:        rand.Text(),
		}
		e.etag, e.err = q.put(ctx, e.rec, "")
		if errors.Is(e.err, errExists) {
			e.err = q.repair(ctx, e.job.ID)
			return
		}
		e.added = e.err == nil
	})
	var created []*entry
	for _, i := range first {
		if entries[i].added {
			created = append(created, &entries[i])
		}
	}
	for batch := range slices.Chunk(created, maxBatch) {
		msgs := make([]types.SendMessageBatchRequestEntry, len(batch))
		for k, e := range batch {
			msgs[k] = types.SendMessageBatchRequestEntry{
				Id:           aws.String(strconv.Itoa(k)),
				MessageBody:  aws.String(joinID(e.rec.ID, e.rec.Msg)),
				DelaySeconds: delaySeconds(time.Until(e.rec.VisibleAt)),
			}
		}
		out, err := q.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: msgs})
		if err != nil {
			for _, e := range batch {
				e.err = fmt.Errorf("send the message of job %q to %s: %w", e.rec.ID, q.url, err)
			}
			continue
		}
		for _, f := range out.Failed {
			if k, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && k < len(batch) {
				batch[k].err = fmt.Errorf("send the message of job %q to %s: %s: %s", batch[k].rec.ID, q.url, aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
	}
	each(len(created), func(k int) {
		if e := created[k]; e.err == nil {
			q.confirm(ctx, e.rec, e.etag)
		}
	})
	var res queue.EnqueueResult
	var errs []error
	for i := range entries {
		switch e := &entries[i]; {
		case e.err != nil:
			errs = append(errs, e.err)
		case e.added:
			res.Added = append(res.Added, e.job.ID)
		default:
			res.Existing = append(res.Existing, e.job.ID)
		}
	}
	if len(errs) > 0 {
		if err := q.check(ctx); err != nil {
			return queue.EnqueueResult{}, fmt.Errorf("sqsqueue: enqueue: %w", err)
		}
		return queue.EnqueueResult{}, fmt.Errorf("sqsqueue: enqueue (call it again to complete it): %w", errors.Join(errs...))
	}
	return res, nil
}

// repair sends the message of job id if its record exists but was never
// marked as sent: an Enqueue failed or died between creating the record
// and sending its message (or is doing so now, and then the job gets two
// messages, one of which is stale).
func (q *Queue) repair(ctx context.Context, id string) error {
	for {
		rec, etag, err := q.load(ctx, id)
		if errors.Is(err, queue.ErrNotFound) {
			return nil // acked since its record was found
		}
		if err != nil {
			return err
		}
		if rec.State != stateWaiting || rec.Sent {
			return nil
		}
		rec.renew(rand.Text())
		etag, err = q.put(ctx, rec, etag)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return err
		}
		if err := q.send(ctx, rec); err != nil {
			return err
		}
		q.confirm(ctx, rec, etag)
		return nil
	}
}

// Extend implements queue.Queue.
func (q *Queue) Extend(ctx context.Context, token string, visibility time.Duration) (time.Time, error) {
	if err := queue.ValidateVisibility(visibility); err != nil {
		return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", err)
	}
	if visibility > maxVisibility {
		return time.Time{}, fmt.Errorf("sqsqueue: extend: visibility %s is longer than the 12h that SQS allows: %w", visibility, queue.ErrInvalid)
	}
	if err := q.check(ctx); err != nil {
		return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", err)
	}
	id, _, ok := splitID(token)
	if !ok {
		return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", &queue.LeaseLostError{Tokens: []string{token}})
	}
	vis := roundUp(visibility)
	for {
		rec, etag, err := q.load(ctx, id)
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", err)
		}
		start := time.Now()
		if err != nil || !rec.holds(token, start) {
			return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", &queue.LeaseLostError{Tokens: []string{token}})
		}
		if start.Add(vis).Sub(rec.ReceivedAt) > maxVisibility {
			return time.Time{}, fmt.Errorf("sqsqueue: extend job %q by %s: SQS ends a lease 12h after it began, at %s: %w",
				id, vis, rec.ReceivedAt.Add(maxVisibility).Format(time.RFC3339), queue.ErrInvalid)
		}
		if _, err := q.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl:          aws.String(q.url),
			ReceiptHandle:     aws.String(rec.Receipt),
			VisibilityTimeout: seconds(vis),
		}); err != nil {
			if rec, _, lerr := q.load(ctx, id); lerr == nil && !rec.holds(token, time.Now()) || errors.Is(lerr, queue.ErrNotFound) {
				return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", &queue.LeaseLostError{Tokens: []string{token}})
			}
			return time.Time{}, fmt.Errorf("sqsqueue: extend job %q: change the visibility of its message in %s: %w", id, q.url, err)
		}
		rec.Expires = start.Add(vis)
		_, err = q.put(ctx, rec, etag)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("sqsqueue: extend: %w", err)
		}
		return rec.Expires, nil
	}
}

// Ack implements queue.Queue.
func (q *Queue) Ack(ctx context.Context, tokens ...string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("sqsqueue: ack: %w", err)
	}
	tokens = unique(tokens)
	receipts := make([]string, len(tokens))
	errs := make([]error, len(tokens))
	each(len(tokens), func(i int) { receipts[i], errs[i] = q.ack(ctx, tokens[i]) })
	var stale []string
	var failed []error
	var done []string
	for i, err := range errs {
		switch {
		case errors.Is(err, queue.ErrLeaseLost):
			stale = append(stale, tokens[i])
		case err != nil:
			failed = append(failed, err)
		default:
			done = append(done, receipts[i])
		}
	}
	for batch := range slices.Chunk(done, maxBatch) {
		q.deleteMessages(ctx, batch)
	}
	if len(stale) > 0 {
		failed = append(failed, &queue.LeaseLostError{Tokens: stale})
	}
	if len(failed) > 0 {
		return fmt.Errorf("sqsqueue: ack: %w", errors.Join(failed...))
	}
	return nil
}

// ack deletes the record of the job that token holds and returns the
// receipt handle of its message.
func (q *Queue) ack(ctx context.Context, token string) (string, error) {
	id, _, ok := splitID(token)
	if !ok {
		return "", queue.ErrLeaseLost
	}
	for {
		rec, etag, err := q.load(ctx, id)
		if errors.Is(err, queue.ErrNotFound) {
			return "", queue.ErrLeaseLost
		}
		if err != nil {
			return "", err
		}
		if !rec.holds(token, time.Now()) {
			return "", queue.ErrLeaseLost
		}
		err = q.remove(ctx, id, etag)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return "", err
		}
		return rec.Receipt, nil
	}
}

// Nack implements queue.Queue.
func (q *Queue) Nack(ctx context.Context, token, cause string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("sqsqueue: nack: %w", err)
	}
	for {
		rec, etag, err := q.holder(ctx, token)
		if err != nil {
			return fmt.Errorf("sqsqueue: nack: %w", err)
		}
		now := time.Now()
		receipt, receivedAt := rec.Receipt, rec.ReceivedAt
		rec.endLease()
		rec.Failures++
		rec.Cause = cause
		if rec.Failures >= q.cfg.MaxAttempts {
			rec.State, rec.DiedAt = stateDead, now
			_, err := q.put(ctx, rec, etag)
			if errors.Is(err, errConflict) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sqsqueue: nack: %w", err)
			}
			q.bury(ctx, rec.ID, rec.Msg, receipt)
			return nil
		}
		backoff := roundUp(q.cfg.Backoff(rec.Failures))
		rec.State, rec.VisibleAt = stateWaiting, now.Add(backoff)
		// A new message when the old one was received more often than
		// the job failed, or when SQS would not hide it that long.
		fresh := rec.Skew > 0 || rec.VisibleAt.Sub(receivedAt) > maxVisibility
		if fresh {
			rec.renew(rand.Text())
		}
		etag, err = q.put(ctx, rec, etag)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sqsqueue: nack: %w", err)
		}
		if fresh {
			q.resend(ctx, rec, etag, receipt)
		} else {
			q.hide(ctx, rec.ID, receipt, backoff)
		}
		return nil
	}
}

// Release implements queue.Queue.
func (q *Queue) Release(ctx context.Context, token string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("sqsqueue: release: %w", err)
	}
	if err := q.release(ctx, token); err != nil {
		return fmt.Errorf("sqsqueue: release: %w", err)
	}
	return nil
}

// release is Release on a queue that may be closed. If the new message
// cannot be sent, it undoes its write, so that the lease holds, and fails.
func (q *Queue) release(ctx context.Context, token string) error {
	for {
		rec, etag, err := q.holder(ctx, token)
		if err != nil {
			return err
		}
		held := *rec
		receipt := rec.Receipt
		rec.endLease()
		rec.State, rec.VisibleAt = stateWaiting, time.Now()
		rec.renew(rand.Text())
		etag, err = q.put(ctx, rec, etag)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return err
		}
		if err := q.send(ctx, rec); err != nil {
			held.Rev = rec.Rev
			if _, uerr := q.put(ctx, &held, etag); uerr != nil {
				// The old message must deliver the job now, although its
				// receive count includes the released attempt.
				q.hide(ctx, rec.ID, receipt, 0)
				return fmt.Errorf("%w; undoing the release failed too (%w), so the job is released and its old message delivers it", err, uerr)
			}
			return fmt.Errorf("%w (the lease still holds)", err)
		}
		q.deleteMessages(ctx, []string{receipt})
		q.confirm(ctx, rec, etag)
		return nil
	}
}

// holder reads the record of the job that token holds a valid lease on. It
// returns a *queue.LeaseLostError if token holds none.
func (q *Queue) holder(ctx context.Context, token string) (*record, string, error) {
	lost := &queue.LeaseLostError{Tokens: []string{token}}
	id, _, ok := splitID(token)
	if !ok {
		return nil, "", lost
	}
	rec, etag, err := q.load(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, "", lost
	}
	if err != nil {
		return nil, "", err
	}
	if !rec.holds(token, time.Now()) {
		return nil, "", lost
	}
	return rec, etag, nil
}

// Get implements queue.Queue.
func (q *Queue) Get(ctx context.Context, id string) (queue.JobInfo, error) {
	if err := q.check(ctx); err != nil {
		return queue.JobInfo{}, fmt.Errorf("sqsqueue: get %q: %w", id, err)
	}
	rec, _, err := q.load(ctx, id)
	if err != nil {
		return queue.JobInfo{}, fmt.Errorf("sqsqueue: get %q: %w", id, err)
	}
	return info(rec, time.Now(), q.cfg.MaxAttempts), nil
}

// Stats implements queue.Queue. It reads every record.
func (q *Queue) Stats(ctx context.Context) (queue.Stats, error) {
	infos, err := q.scan(ctx)
	if err != nil {
		return queue.Stats{}, fmt.Errorf("sqsqueue: stats: %w", err)
	}
	var st queue.Stats
	for _, ji := range infos {
		switch ji.State {
		case queue.StateReady:
			st.Ready++
		case queue.StateDelayed:
			st.Delayed++
		case queue.StateLeased:
			st.Leased++
		case queue.StateDead:
			st.Dead++
		}
	}
	return st, nil
}

// Dead implements queue.Queue. It reads every record.
func (q *Queue) Dead(ctx context.Context) ([]queue.JobInfo, error) {
	infos, err := q.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: dead: %w", err)
	}
	dead := slices.DeleteFunc(infos, func(ji queue.JobInfo) bool { return ji.State != queue.StateDead })
	slices.SortStableFunc(dead, func(a, b queue.JobInfo) int { return a.DiedAt.Compare(b.DiedAt) })
	return dead, nil
}

// scan describes every job. The records are read one by one, so the
// result is not a snapshot of one instant.
func (q *Queue) scan(ctx context.Context) ([]queue.JobInfo, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	ids, err := q.listIDs(ctx)
	if err != nil {
		return nil, err
	}
	infos := make([]queue.JobInfo, len(ids))
	found := make([]bool, len(ids))
	errs := make([]error, len(ids))
	each(len(ids), func(i int) {
		rec, _, err := q.load(ctx, ids[i])
		switch {
		case errors.Is(err, queue.ErrNotFound): // acked since the listing
		case err != nil:
			errs[i] = err
		default:
			infos[i], found[i] = info(rec, time.Now(), q.cfg.MaxAttempts), true
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []queue.JobInfo
	for i, ji := range infos {
		if found[i] {
			out = append(out, ji)
		}
	}
	return out, nil
}

// send sends the message that rec names, delayed until the job is due (at
// most 15 minutes: a job due later gets another message then).
func (q *Queue) send(ctx context.Context, rec *record) error {
	_, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(joinID(rec.ID, rec.Msg)),
		DelaySeconds: delaySeconds(time.Until(rec.VisibleAt)),
	})
	if err != nil {
		return fmt.Errorf("send the message of job %q to %s: %w", rec.ID, q.url, err)
	}
	return nil
}

// resend sends the new message that rec names (written with renew), then
// deletes the message it replaces, whose receipt handle is receipt, and
// marks rec as sent. If the send fails, the old message is kept, hidden
// until the job is due, to be adopted when it is received; its receive
// count is then ahead of the job's failures by the receive that is not an
// attempt.
func (q *Queue) resend(ctx context.Context, rec *record, etag, receipt string) {
	if err := q.send(ctx, rec); err != nil {
		q.log.WarnContext(ctx, "sqsqueue: the job will be delivered by its old message", slog.String("job", rec.ID), slog.Any("err", err))
		q.hide(ctx, rec.ID, receipt, time.Until(rec.VisibleAt))
		return
	}
	q.deleteMessages(ctx, []string{receipt})
	q.confirm(ctx, rec, etag)
}

// confirm marks rec, written with etag, as sent, unless another message
// replaced its message in the meantime.
func (q *Queue) confirm(ctx context.Context, rec *record, etag string) {
	nonce := rec.Msg
	for {
		rec.Sent = true
		_, err := q.put(ctx, rec, etag)
		if !errors.Is(err, errConflict) {
			if err != nil {
				q.log.WarnContext(ctx, "sqsqueue: the job's message was sent but not marked as sent; an Enqueue of the job will send another",
					slog.String("job", rec.ID), slog.Any("err", err))
			}
			return
		}
		if rec, etag, err = q.load(ctx, rec.ID); err != nil || rec.Msg != nonce || rec.Sent {
			return
		}
	}
}

// hide makes the message with receipt handle receipt invisible for d (at
// most what SQS allows).
func (q *Queue) hide(ctx context.Context, id, receipt string, d time.Duration) {
	_, err := q.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(q.url),
		ReceiptHandle:     aws.String(receipt),
		VisibilityTimeout: seconds(min(d, maxVisibility)),
	})
	if err != nil {
		q.log.WarnContext(ctx, "sqsqueue: the job's message keeps its visibility", slog.String("job", id), slog.Duration("wanted", d), slog.Any("err", err))
	}
}

// bury moves the message of dead job id (its nonce and receipt handle) to
// the dead-letter queue. If the move fails, the message comes back when
// its visibility ends, and Lease moves it then.
func (q *Queue) bury(ctx context.Context, id, nonce, receipt string) {
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.dlqURL),
		MessageBody: aws.String(joinID(id, nonce)),
	}); err != nil {
		q.log.WarnContext(ctx, "sqsqueue: the dead job's message stays in the queue until it is received again", slog.String("job", id), slog.Any("err", err))
		return
	}
	q.deleteMessages(ctx, []string{receipt})
}

// deleteMessages deletes up to ten messages by their receipt handles. A
// message left behind is stale and is deleted when it is received.
func (q *Queue) deleteMessages(ctx context.Context, receipts []string) {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(receipts))
	for i, r := range receipts {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
	}
	out, err := q.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil {
		q.log.WarnContext(ctx, "sqsqueue: messages left behind", slog.Int("count", len(receipts)), slog.Any("err", err))
		return
	}
	for _, f := range out.Failed {
		q.log.WarnContext(ctx, "sqsqueue: a message left behind", slog.String("code", aws.ToString(f.Code)), slog.String("message", aws.ToString(f.Message)))
	}
}

// check returns an error if q is closed or ctx is done.
func (q *Queue) check(ctx context.Context) error {
	select {
	case <-q.closed:
		return queue.ErrClosed
	default:
	}
	return ctxErr(ctx)
}

// ctxErr returns ctx.Err(), with its cause if that says more, or nil.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// each calls fn(i) for i from 0 to n-1, up to parallelism at a time, and
// returns when all have returned.
func each(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelism)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// unique returns ss without repetitions, in the order of first occurrence.
func unique(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// roundUp rounds d up to whole seconds, the granularity of SQS.
func roundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// seconds returns d in whole seconds, rounded up.
func seconds(d time.Duration) int32 {
	return int32(roundUp(d) / time.Second)
}

// delaySeconds returns the DelaySeconds of a message for a job due in d.
func delaySeconds(d time.Duration) int32 {
	return seconds(min(d, maxDelay))
}
