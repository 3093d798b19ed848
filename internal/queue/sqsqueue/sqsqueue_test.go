package sqsqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	endpoint(t)
	queuetest.Exercise(t, func(t *testing.T, cfg queue.Config) queue.Queue {
		q, _ := setup(t, cfg)
		return q
	})
}

// endpoint returns the SQS endpoint that tests use: AWS_ENDPOINT_URL_SQS,
// or else AWS_ENDPOINT_URL. Without one it skips the test, saying how to
// run it — or fails it when CI or HPSEARCH_REQUIRE_S3 (set by
// scripts/with-moto, whose moto_server serves SQS too) is set, so that CI
// never skips SQS silently.
func endpoint(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"} {
		if e := os.Getenv(name); e != "" {
			return e
		}
	}
	const how = "no SQS endpoint: set AWS_ENDPOINT_URL (with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION), " +
		"or run the tests through `scripts/with-moto go test ./internal/queue/sqsqueue/`, which starts moto_server"
	for _, name := range []string{"CI", "HPSEARCH_REQUIRE_S3"} {
		if v := os.Getenv(name); v != "" && v != "0" && v != "false" {
			t.Fatalf("%s (SQS tests may not be skipped: %s=%s)", how, name, v)
		}
	}
	t.Skip(how)
	return ""
}

// testBundle holds what a test needs besides its queue.
type testBundle struct {
	sqs    *sqs.Client
	s3     *s3.Client
	queues Queues
	bucket string
}

// setup creates a queue with its dead-letter queue and a bucket, all with
// unique names and deleted when the test ends, and returns a Queue on them
// with cfg and the options that edit changes. The queue logs through the
// test's output.
func setup(t testing.TB, cfg queue.Config, edit ...func(*Options)) (*Queue, *testBundle) {
	t.Helper()
	b := newBundle(t, cfg)
	opts := Options{
		SQS:      b.sqs,
		QueueURL: b.queues.URL,
		S3:       b.s3,
		Bucket:   b.bucket,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&opts)
	}
	q, err := New(t.Context(), opts, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q, b
}

// newBundle creates the queues (for cfg) and the bucket of a test.
func newBundle(t testing.TB, cfg queue.Config) *testBundle {
	t.Helper()
	endpoint(t)
	b := &testBundle{bucket: s3test.NewBucket(t), s3: s3test.Client(t)}
	var err error
	if b.sqs, err = NewClient(t.Context()); err != nil {
		t.Fatal(err)
	}
	name := uniqueName()
	if b.queues, err = CreateQueues(t.Context(), b.sqs, name, cfg); err != nil {
		t.Fatalf("CreateQueues: %v", err)
	}
	t.Cleanup(func() {
		// The test's context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := DeleteQueues(ctx, b.sqs, b.queues); err != nil {
			t.Errorf("DeleteQueues: %v", err)
		}
	})
	return b
}

func uniqueName() string {
	var random [8]byte
	_, _ = rand.Read(random[:])
	return "hpsearch-test-" + hex.EncodeToString(random[:])
}

// messagesIn counts the messages in the queue at url: visible, in flight
// and delayed.
func (b *testBundle) messagesIn(t *testing.T, url string) int {
	t.Helper()
	out, err := b.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes(%s): %v", url, err)
	}
	n := 0
	for _, v := range out.Attributes {
		c, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("queue attribute %q is not a count", v)
		}
		n += c
	}
	return n
}

// receive receives up to ten messages from url with visibility vis,
// waiting up to a second, as a leaser that records nothing.
func (b *testBundle) receive(t *testing.T, url string, vis int32) []types.Message {
	t.Helper()
	out, err := b.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(url),
		MaxNumberOfMessages: 10,
		VisibilityTimeout:   vis,
		WaitTimeSeconds:     1,
	})
	if err != nil {
		t.Fatalf("ReceiveMessage(%s): %v", url, err)
	}
	return out.Messages
}

// lease leases one job, waiting for it as long as it takes within 10 s.
func lease(t *testing.T, q *Queue, vis time.Duration) queue.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ls, err := q.Lease(t.Context(), queue.LeaseParams{Max: 1, Visibility: vis, Wait: time.Second})
		if err != nil {
			t.Fatalf("Lease: %v", err)
		}
		if len(ls) == 1 {
			return ls[0]
		}
	}
	t.Fatal("no job to lease within 10s")
	return queue.Lease{}
}

// expectNone checks that a Lease that waits for wait gets nothing.
func expectNone(t *testing.T, q *Queue, wait time.Duration) {
	t.Helper()
	ls, err := q.Lease(t.Context(), queue.LeaseParams{Max: 10, Visibility: time.Minute, Wait: wait})
	if err != nil || len(ls) != 0 {
		t.Fatalf("Lease = %+v, %v; want nothing", ls, err)
	}
}

func enqueue(t *testing.T, q *Queue, jobs ...queue.Job) queue.EnqueueResult {
	t.Helper()
	res, err := q.Enqueue(t.Context(), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return res
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true within 10s: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCreateQueues(t *testing.T) {
	t.Parallel()
	endpoint(t)
	ctx := t.Context()
	b := newBundle(t, queue.Config{MaxAttempts: 4})
	attrs := func(url string) map[string]string {
		t.Helper()
		out, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes
	}
	main, dead := attrs(b.queues.URL), attrs(b.queues.DeadLetterURL)
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(main["RedrivePolicy"]), &policy); err != nil {
		t.Fatalf("redrive policy %q: %v", main["RedrivePolicy"], err)
	}
	if policy.DeadLetterTargetArn != dead["QueueArn"] || policy.MaxReceiveCount != 4 {
		t.Errorf("redrive policy = %+v; want the dead-letter queue %s after 4 receives", policy, dead["QueueArn"])
	}
	if !strings.HasSuffix(b.queues.DeadLetterURL, DeadLetterSuffix) {
		t.Errorf("dead-letter queue %s is not named with %q", b.queues.DeadLetterURL, DeadLetterSuffix)
	}
	for url, a := range map[string]map[string]string{b.queues.URL: main, b.queues.DeadLetterURL: dead} {
		if a["MessageRetentionPeriod"] != "1209600" {
			t.Errorf("%s keeps messages for %s s, want 14 days", url, a["MessageRetentionPeriod"])
		}
	}
	name := b.queues.URL[strings.LastIndex(b.queues.URL, "/")+1:]
	again, err := CreateQueues(ctx, b.sqs, name, queue.Config{MaxAttempts: 4})
	if err != nil || again != b.queues {
		t.Errorf("CreateQueues again = %+v, %v; want the same queues %+v", again, err, b.queues)
	}
}

func TestNewChecksTheQueue(t *testing.T) {
	t.Parallel()
	endpoint(t)
	ctx := t.Context()
	b := newBundle(t, queue.Config{})
	base := Options{SQS: b.sqs, QueueURL: b.queues.URL, S3: b.s3, Bucket: b.bucket}

	if _, err := New(ctx, Options{SQS: b.sqs, QueueName: b.queues.URL[strings.LastIndex(b.queues.URL, "/")+1:], S3: b.s3, Bucket: b.bucket}, queue.Config{}); err != nil {
		t.Errorf("New by queue name: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		cfg  queue.Config
		want string
	}{
		{"no SQS client", func(o *Options) { o.SQS = nil }, queue.Config{}, "no SQS client"},
		{"no S3 client", func(o *Options) { o.S3 = nil }, queue.Config{}, "no S3 client"},
		{"no bucket", func(o *Options) { o.Bucket = "" }, queue.Config{}, "no bucket"},
		{"URL and name", func(o *Options) { o.QueueName = "q" }, queue.Config{}, "one of Options.QueueURL and Options.QueueName"},
		{"neither URL nor name", func(o *Options) { o.QueueURL = "" }, queue.Config{}, "one of Options.QueueURL and Options.QueueName"},
		{"other MaxAttempts", func(*Options) {}, queue.Config{MaxAttempts: 5}, "after 3 receives, but the queue config allows 5 attempts"},
		{"invalid config", func(*Options) {}, queue.Config{MaxAttempts: -1}, "MaxAttempts -1"},
	} {
		opts := base
		tc.edit(&opts)
		if _, err := New(ctx, opts, tc.cfg); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v; want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}

	plain, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(uniqueName())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := b.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: plain.QueueUrl}); err != nil {
			t.Error(err)
		}
	})
	opts := base
	opts.QueueURL = aws.ToString(plain.QueueUrl)
	if _, err := New(ctx, opts, queue.Config{}); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "no dead-letter queue") {
		t.Errorf("New on a queue without a redrive policy = %v; want ErrInvalid saying it has no dead-letter queue", err)
	}
	opts = base
	opts.QueueURL, opts.QueueName = "", "hpsearch-no-such-queue"
	if _, err := New(ctx, opts, queue.Config{}); err == nil || !strings.Contains(err.Error(), "hpsearch-no-such-queue") {
		t.Errorf("New on a missing queue = %v; want an error naming it", err)
	}
}

// TestDeadLetterQueue checks that dead jobs' messages end in the
// dead-letter queue, whether SQS's redrive policy moves them after an
// expired last lease or Nack does, and that Dead lists them.
func TestDeadLetterQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, b := setup(t, queue.Config{MaxAttempts: 1})
	enqueue(t, q, queue.Job{ID: "expired"}, queue.Job{ID: "nacked"})
	for range 2 {
		switch l := lease(t, q, time.Second); l.Job.ID {
		case "nacked":
			if err := q.Nack(ctx, l.Token, "boom"); err != nil {
				t.Fatalf("Nack: %v", err)
			}
		case "expired": // let the lease expire
		}
	}
	eventually(t, "both jobs are dead", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st == queue.Stats{Dead: 2}
	})
	// The expired job's message is visible again: receiving it makes SQS
	// move it to the dead-letter queue, and Lease gets nothing.
	expectNone(t, q, 2*time.Second)
	if n := b.messagesIn(t, b.queues.URL); n != 0 {
		t.Errorf("%d messages left in the queue, want none", n)
	}
	var inDLQ []string
	eventually(t, "the dead-letter queue holds both jobs", func() bool {
		for _, m := range b.receive(t, b.queues.DeadLetterURL, 60) {
			id, _, ok := splitID(aws.ToString(m.Body))
			if !ok {
				t.Fatalf("dead-letter message %q names no job", aws.ToString(m.Body))
			}
			inDLQ = append(inDLQ, id)
		}
		return len(inDLQ) >= 2
	})
	if slices.Sort(inDLQ); !slices.Equal(inDLQ, []string{"expired", "nacked"}) {
		t.Errorf("dead-letter queue holds the messages of %v, want expired and nacked once each", inDLQ)
	}
	dead, err := q.Dead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	causes := map[string]string{}
	for _, d := range dead {
		causes[d.Job.ID] = d.Cause
	}
	if len(dead) != 2 || causes["nacked"] != "boom" || causes["expired"] != "lease expired" {
		t.Errorf("Dead() = %+v; want nacked dead of boom and expired of an expired lease", dead)
	}
}

// TestUnrecordedReceive checks that a receive that was never recorded (its
// leaser died right after ReceiveMessage) counts as a failed attempt, as
// SQS counts it toward the redrive policy.
func TestUnrecordedReceive(t *testing.T) {
	t.Parallel()
	q, b := setup(t, queue.Config{MaxAttempts: 3})
	enqueue(t, q, queue.Job{ID: "a"})
	if ms := b.receive(t, b.queues.URL, 1); len(ms) != 1 {
		t.Fatalf("raw receive got %d messages, want 1", len(ms))
	}
	l := lease(t, q, time.Minute)
	if l.Job.ID != "a" || l.Attempt != 2 {
		t.Errorf("lease after an unrecorded receive: %s attempt %d, want a attempt 2", l.Job.ID, l.Attempt)
	}
	info, err := q.Get(t.Context(), "a")
	if err != nil || info.Failures != 1 || !strings.Contains(info.Cause, "never recorded") {
		t.Errorf("Get(a) = %+v, %v; want 1 failure whose cause says a lease was never recorded", info, err)
	}
}

// TestEarlyDelivery makes SQS deliver a leased job's message again before
// the lease ends, as a duplicate delivery or a stale holder's visibility
// change would: the lease stands, and its Ack still deletes the message.
func TestEarlyDelivery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, b := setup(t, queue.Config{})
	enqueue(t, q, queue.Job{ID: "a"})
	l := lease(t, q, time.Minute)
	_, receipt, ok := splitID(l.Token)
	if !ok {
		t.Fatalf("token %q does not carry a receipt handle", l.Token)
	}
	// The token's receipt handle is the message's.
	if _, err := b.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(b.queues.URL), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0,
	}); err != nil {
		t.Fatalf("ChangeMessageVisibility with the token's receipt handle: %v", err)
	}
	expectNone(t, q, 2*time.Second)
	info, err := q.Get(ctx, "a")
	if err != nil || info.State != queue.StateLeased || info.Token != l.Token || info.Failures != 0 {
		t.Errorf("Get(a) = %+v, %v; want still leased with the first token and no failure", info, err)
	}
	if err := q.Ack(ctx, l.Token); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if n := b.messagesIn(t, b.queues.URL); n != 0 {
		t.Errorf("%d messages left after the Ack, want none", n)
	}
}

// TestLongDelay checks a job due later than SQS can delay a message: a
// message that comes before the job is due is replaced by a new one.
func TestLongDelay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, b := setup(t, queue.Config{})
	start := time.Now()
	enqueue(t, q, queue.Job{ID: "a", Delay: time.Hour})
	rec, _, err := q.load(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// SQS delays the message by 15 minutes; stand in for its arrival.
	if _, err := b.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(b.queues.URL), MessageBody: aws.String(joinID("a", rec.Msg)),
	}); err != nil {
		t.Fatal(err)
	}
	expectNone(t, q, 2*time.Second)
	info, err := q.Get(ctx, "a")
	if err != nil || info.State != queue.StateDelayed || info.VisibleAt.Before(start.Add(time.Hour)) {
		t.Errorf("Get(a) = %+v, %v; want delayed until an hour after enqueue", info, err)
	}
	after, _, err := q.load(ctx, "a")
	if err != nil || after.Msg == rec.Msg || !after.Sent {
		t.Errorf("record after the early message: msg %q sent %t, %v; want a new message (not %q), sent", after.Msg, after.Sent, err, rec.Msg)
	}
}

// TestStaleMessages checks that Lease deletes a message whose job is not
// in the queue, and leaves one that names no job to the redrive policy.
func TestStaleMessages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, b := setup(t, queue.Config{})
	for _, body := range []string{joinID("acked-long-ago", "NONCE"), "not a job"} {
		if _, err := b.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.queues.URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := q.Lease(ctx, queue.LeaseParams{Max: 10, Visibility: time.Second, Wait: time.Second})
	if err != nil || len(ls) != 0 {
		t.Fatalf("Lease = %+v, %v; want nothing", ls, err)
	}
	var left []string
	eventually(t, "the message that names no job is visible again", func() bool {
		for _, m := range b.receive(t, b.queues.URL, 60) {
			left = append(left, aws.ToString(m.Body))
		}
		return len(left) > 0
	})
	if !slices.Equal(left, []string{"not a job"}) {
		t.Errorf("messages left in the queue: %q; want only the one that names no job", left)
	}
	if n := b.messagesIn(t, b.queues.URL); n != 1 {
		t.Errorf("%d messages in the queue, want only the one that names no job", n)
	}
}

// faultySQS is an SQS client that fails the sends it is told to fail, and
// tells when a ReceiveMessage begins and when one returned messages.
type faultySQS struct {
	SQSClient
	failSend, failSendBatch atomic.Int32
	// receiving, if not nil, gets a value (or is skipped if full) when a
	// ReceiveMessage begins.
	receiving chan struct{}
	// received, if not nil, is called when a ReceiveMessage returned
	// messages.
	received func()
}

var errInjected = errors.New("injected failure")

func (f *faultySQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if f.failSend.Add(-1) >= 0 {
		return nil, errInjected
	}
	return f.SQSClient.SendMessage(ctx, in, opts...)
}

func (f *faultySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if f.failSendBatch.Add(-1) >= 0 {
		return nil, errInjected
	}
	return f.SQSClient.SendMessageBatch(ctx, in, opts...)
}

func (f *faultySQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if f.receiving != nil {
		select {
		case f.receiving <- struct{}{}:
		default:
		}
	}
	out, err := f.SQSClient.ReceiveMessage(ctx, in, opts...)
	if err == nil && len(out.Messages) > 0 && f.received != nil {
		f.received()
	}
	return out, err
}

func faulty(f *faultySQS) func(*Options) {
	return func(o *Options) {
		f.SQSClient = o.SQS
		o.SQS = f
	}
}

// TestEnqueueAgainAfterFailedSend checks that an Enqueue whose messages
// were not sent can be completed by calling it again.
func TestEnqueueAgainAfterFailedSend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := &faultySQS{}
	f.failSendBatch.Store(1)
	q, _ := setup(t, queue.Config{}, faulty(f))
	if _, err := q.Enqueue(ctx, queue.Job{ID: "a", Payload: []byte("pa")}); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "call it again") {
		t.Fatalf("Enqueue with a failing send = %v; want the send's error and a hint to call it again", err)
	}
	expectNone(t, q, time.Second)
	if res := enqueue(t, q, queue.Job{ID: "a", Payload: []byte("ignored")}); !slices.Equal(res.Existing, []string{"a"}) {
		t.Errorf("second Enqueue = %+v, want Existing [a]", res)
	}
	l := lease(t, q, time.Minute)
	if l.Job.ID != "a" || string(l.Job.Payload) != "pa" || l.Attempt != 1 {
		t.Errorf("lease = %s %q attempt %d; want a \"pa\" attempt 1", l.Job.ID, l.Job.Payload, l.Attempt)
	}
	expectNone(t, q, 0)
}

// TestReleaseWithFailedSend checks that a Release whose new message could
// not be sent fails and leaves the lease held, so that the released attempt
// never counts: with one attempt, the job would otherwise be dead.
func TestReleaseWithFailedSend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := &faultySQS{}
	q, b := setup(t, queue.Config{MaxAttempts: 1}, faulty(f))
	enqueue(t, q, queue.Job{ID: "a"})
	l := lease(t, q, time.Minute)
	f.failSend.Store(1)
	if err := q.Release(ctx, l.Token); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "the lease still holds") {
		t.Fatalf("Release with a failing send = %v; want the send's error, saying the lease still holds", err)
	}
	if info, err := q.Get(ctx, "a"); err != nil || info.State != queue.StateLeased || info.Token != l.Token {
		t.Errorf("Get(a) = %+v, %v; want leased with the same token", info, err)
	}
	if err := q.Release(ctx, l.Token); err != nil {
		t.Fatalf("Release again: %v", err)
	}
	again := lease(t, q, time.Minute)
	if again.Job.ID != "a" || again.Attempt != 1 || again.Token == l.Token {
		t.Errorf("lease after release = %s attempt %d; want a attempt 1 with a new token", again.Job.ID, again.Attempt)
	}
	if err := q.Ack(ctx, again.Token); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if n := b.messagesIn(t, b.queues.URL) + b.messagesIn(t, b.queues.DeadLetterURL); n != 0 {
		t.Errorf("%d messages left after the Ack, want none", n)
	}
}

// TestNackWithFailedSend checks the fallback of a Nack that must replace
// the job's message (it was delivered early before) and cannot send the
// new one: the old message delivers the job after the backoff.
func TestNackWithFailedSend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := &faultySQS{}
	q, b := setup(t, queue.Config{BackoffBase: time.Second}, faulty(f))
	enqueue(t, q, queue.Job{ID: "a"})
	l := lease(t, q, time.Minute)
	_, receipt, _ := splitID(l.Token)
	if _, err := b.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(b.queues.URL), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0,
	}); err != nil {
		t.Fatal(err)
	}
	expectNone(t, q, time.Second) // the early delivery
	f.failSend.Store(1)
	if err := q.Nack(ctx, l.Token, "boom"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	again := lease(t, q, time.Minute)
	if again.Job.ID != "a" || again.Attempt != 2 {
		t.Errorf("lease after Nack = %s attempt %d; want a attempt 2", again.Job.ID, again.Attempt)
	}
	if err := q.Ack(ctx, again.Token); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if n := b.messagesIn(t, b.queues.URL); n != 0 {
		t.Errorf("%d messages left after the Ack, want none", n)
	}
}

// TestCanceledLease cancels a Lease after SQS handed out its message: the
// lease is given back, and the receive does not count as an attempt (with
// one attempt, the job would be dead).
func TestCanceledLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &faultySQS{received: cancel}
	q, b := setup(t, queue.Config{MaxAttempts: 1}, faulty(f))
	enqueue(t, q, queue.Job{ID: "a"})
	if ls, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: 5 * time.Second}); !errors.Is(err, context.Canceled) || len(ls) != 0 {
		t.Fatalf("Lease canceled as its message arrived = %+v, %v; want no lease and context.Canceled", ls, err)
	}
	f.received = nil
	if info, err := q.Get(t.Context(), "a"); err != nil || info.State != queue.StateReady || info.Failures != 0 {
		t.Errorf("Get(a) = %+v, %v; want ready without failures", info, err)
	}
	if l := lease(t, q, time.Minute); l.Job.ID != "a" || l.Attempt != 1 {
		t.Errorf("lease = %s attempt %d, want a attempt 1", l.Job.ID, l.Attempt)
	}
	if n := b.messagesIn(t, b.queues.DeadLetterURL); n != 0 {
		t.Errorf("%d messages in the dead-letter queue, want none", n)
	}
}

// TestLeaseMoreThanTen checks that a Lease for more jobs than one
// ReceiveMessage returns receives again while the queue returns full
// batches (as moto does; SQS may return fewer).
func TestLeaseMoreThanTen(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, queue.Config{})
	var jobs []queue.Job
	for i := range 25 {
		jobs = append(jobs, queue.Job{ID: strconv.Itoa(i)})
	}
	enqueue(t, q, jobs...)
	ls, err := q.Lease(t.Context(), queue.LeaseParams{Max: 25, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(ls) != 25 {
		t.Fatalf("Lease(Max: 25) = %d leases, %v; want 25", len(ls), err)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		if seen[l.Job.ID] {
			t.Errorf("job %s leased twice", l.Job.ID)
		}
		seen[l.Job.ID] = true
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := &faultySQS{receiving: make(chan struct{}, 1)}
	q, _ := setup(t, queue.Config{}, faulty(f))
	errc := make(chan error, 1)
	go func() {
		_, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
		errc <- err
	}()
	<-f.receiving
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Lease waiting during Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a waiting Lease")
	}
	if _, err := q.Enqueue(ctx, queue.Job{ID: "a"}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	if err := q.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestSQSLimits checks the limits of SQS on visibility: 12 hours per
// lease, counted from when it began.
func TestSQSLimits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, _ := setup(t, queue.Config{})
	if _, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: 13 * time.Hour}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("Lease for 13h = %v, want ErrInvalid", err)
	}
	enqueue(t, q, queue.Job{ID: "a"})
	l := lease(t, q, time.Minute)
	if _, err := q.Extend(ctx, l.Token, 13*time.Hour); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("Extend by 13h = %v, want ErrInvalid", err)
	}
	// Make the lease begin almost 12 hours ago.
	rec, etag, err := q.load(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rec.ReceivedAt = time.Now().Add(-maxVisibility + time.Minute)
	if _, err := q.put(ctx, rec, etag); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Extend(ctx, l.Token, 2*time.Minute); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "12h after it began") {
		t.Errorf("Extend past 12h from the lease's start = %v, want ErrInvalid saying so", err)
	}
	if _, err := q.Extend(ctx, l.Token, 30*time.Second); err != nil {
		t.Errorf("Extend within 12h of the lease's start: %v", err)
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {time.Hour, 3600},
	} {
		if got := seconds(tc.d); got != tc.want {
			t.Errorf("seconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
	if got := delaySeconds(time.Hour); got != 900 {
		t.Errorf("delaySeconds(1h) = %d, want the SQS maximum 900", got)
	}
	for _, tc := range []struct {
		remaining time.Duration
		want      int32
	}{
		{0, 0}, {-time.Second, 0}, {200 * time.Millisecond, 0}, {999 * time.Millisecond, 1}, {5 * time.Second, 5}, {time.Minute, 20},
	} {
		if got := pollSeconds(tc.remaining); got != tc.want {
			t.Errorf("pollSeconds(%s) = %d, want %d", tc.remaining, got, tc.want)
		}
	}
}

func FuzzJoinID(f *testing.F) {
	for _, s := range []string{"a", "job.1", "a/b/../c", "\xff\xfe", "ünïcode", strings.Repeat("x", 300)} {
		f.Add(s, "AQADTrcZ+x/y=")
	}
	f.Fuzz(func(t *testing.T, id, rest string) {
		id2, rest2, ok := splitID(joinID(id, rest))
		if want := id != "" && rest != ""; ok != want {
			t.Fatalf("splitID(joinID(%q, %q)) ok = %t, want %t", id, rest, ok, want)
		}
		if ok && (id2 != id || rest2 != rest) {
			t.Errorf("splitID(joinID(%q, %q)) = %q, %q", id, rest, id2, rest2)
		}
	})
}
