package sqsqueue

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// The states a record is stored in. Ready and delayed are both waiting; the
// time tells them apart, as it tells an expired lease from a valid one.
const (
	stateWaiting = "waiting"
	stateLeased  = "leased"
	stateDead    = "dead"
)

// errConflict is returned by put and remove when the record is no longer
// the version that was read: another call changed or deleted it first.
var errConflict = errors.New("the job record changed since it was read")

// errExists is returned by put when it creates a record that exists.
var errExists = errors.New("the job record exists")

// record is a job as stored in S3: the job, its state, and which SQS
// message carries it.
type record struct {
	// ID is the job's ID. The key is the authority: decode sets ID from it.
	ID         string        `json:"id"`
	Payload    []byte        `json:"payload,omitempty"`
	Delay      time.Duration `json:"delay,omitempty"`
	EnqueuedAt time.Time     `json:"enqueued_at"`
	State      string        `json:"state"`
	// VisibleAt is when a waiting job is due.
	VisibleAt time.Time `json:"visible_at,omitzero"`
	Failures  int       `json:"failures,omitempty"`
	Cause     string    `json:"cause,omitempty"`

	// Token, Owner and Expires describe the lease of a leased job. Receipt
	// is the newest receipt handle of the message, which the SQS calls of
	// the lease use; ReceivedAt is when the lease began, for the SQS limit
	// of 12 hours.
	Token      string    `json:"token,omitempty"`
	Owner      string    `json:"owner,omitempty"`
	Expires    time.Time `json:"expires,omitzero"`
	Receipt    string    `json:"receipt,omitempty"`
	ReceivedAt time.Time `json:"received_at,omitzero"`

	DiedAt time.Time `json:"died_at,omitzero"`

	// Msg is the nonce of the message that carries the job: a message with
	// another nonce is stale. Sent says that the message is known to have
	// been sent; until then, a message of the job with another nonce is
	// adopted instead of dropped.
	Msg  string `json:"msg"`
	Sent bool   `json:"sent,omitempty"`
	// Receives is the ApproximateReceiveCount of the message as of the last
	// receive the record accounts for; a later receive that finds a higher
	// count reveals receives that nobody recorded. Skew counts the receives
	// of the message that were not attempts (duplicate deliveries), which
	// SQS counts toward its redrive policy and the record does not.
	Receives int `json:"receives,omitempty"`
	Skew     int `json:"skew,omitempty"`

	// Rev counts the writes of the record, so that no two versions have
	// the same content, and so the same ETag.
	Rev int64 `json:"rev"`
}

func (r *record) job() queue.Job {
	return queue.Job{ID: r.ID, Payload: r.Payload, Delay: r.Delay}
}

// holds reports whether token holds a valid lease on r at now.
func (r *record) holds(token string, now time.Time) bool {
	return r.State == stateLeased && r.Token == token && now.Before(r.Expires)
}

// endLease clears the fields of r's lease.
func (r *record) endLease() {
	r.Token, r.Owner, r.Receipt = "", "", ""
	r.Expires, r.ReceivedAt = time.Time{}, time.Time{}
}

// renew makes r name a new message, not yet sent, with a fresh receive
// count.
func (r *record) renew(nonce string) {
	r.Msg, r.Sent, r.Receives, r.Skew = nonce, false, 0, 0
}

// settle applies the expiry of r's lease, if it expired by now: a failed
// attempt that leaves the job ready since the expiry, or dead if it was its
// last attempt.
func settle(r *record, now time.Time, maxAttempts int) {
	if r.State != stateLeased || now.Before(r.Expires) {
		return
	}
	at := r.Expires
	r.Failures++
	if r.Owner != "" {
		r.Cause = fmt.Sprintf("lease of %s expired", r.Owner)
	} else {
		r.Cause = "lease expired"
	}
	r.endLease()
	r.State, r.VisibleAt = stateWaiting, at
	if r.Failures >= maxAttempts {
		r.State, r.VisibleAt, r.DiedAt = stateDead, time.Time{}, at
	}
}

// info describes r as it is at now, counting an expired lease as ended.
func info(r *record, now time.Time, maxAttempts int) queue.JobInfo {
	settle(r, now, maxAttempts)
	ji := queue.JobInfo{
		Job:        r.job(),
		EnqueuedAt: r.EnqueuedAt,
		Failures:   r.Failures,
		Cause:      r.Cause,
	}
	switch r.State {
	case stateWaiting:
		ji.State = queue.StateReady
		if r.VisibleAt.After(now) {
			ji.State = queue.StateDelayed
		}
		ji.VisibleAt = r.VisibleAt
	case stateLeased:
		ji.State = queue.StateLeased
		ji.Token, ji.Owner, ji.Expires = r.Token, r.Owner, r.Expires
	case stateDead:
		ji.State = queue.StateDead
		ji.DiedAt = r.DiedAt
	}
	return ji
}

// encodeID encodes a job ID for keys, tokens and message bodies: any
// string, in characters that all of them allow and that contain no ".".
func encodeID(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// joinID joins a job ID to a string that names something of it: a
// receipt handle (a token) or a nonce (a message body).
func joinID(id, s string) string {
	return encodeID(id) + "." + s
}

// splitID splits what joinID joined. ok is false if s is not of that form.
func splitID(s string) (id, rest string, ok bool) {
	enc, rest, found := strings.Cut(s, ".")
	if !found || rest == "" {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) == 0 {
		return "", "", false
	}
	return string(raw), rest, true
}

// key returns the S3 key of the record of job id.
func (q *Queue) key(id string) string {
	return q.prefix + encodeID(id)
}

// where names the record of job id in messages.
func (q *Queue) where(id string) string {
	return "s3://" + q.bucket + "/" + q.key(id)
}

// load reads the record of job id and its ETag. It returns an error
// wrapping queue.ErrNotFound if there is none.
func (q *Queue) load(ctx context.Context, id string) (*record, string, error) {
	out, err := q.s3.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(q.bucket),
		Key:    aws.String(q.key(id)),
	})
	if err != nil {
		if isMissing(err) {
			return nil, "", fmt.Errorf("job %q: %w", id, queue.ErrNotFound)
		}
		return nil, "", fmt.Errorf("read %s: %w", q.where(id), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", q.where(id), err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, "", fmt.Errorf("decode %s: %w", q.where(id), err)
	}
	r.ID = id
	return &r, aws.ToString(out.ETag), nil
}

// put writes r if its record is still the version with etag, or creates it
// if etag is "", and returns the new ETag. It returns errConflict if the
// record changed or went, and errExists if it creates a record that exists.
func (q *Queue) put(ctx context.Context, r *record, etag string) (string, error) {
	r.Rev++
	data, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode the record of job %q: %w", r.ID, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(q.bucket),
		Key:           aws.String(q.key(r.ID)),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/json"),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := q.s3.PutObject(ctx, in)
	switch {
	case err == nil:
		return aws.ToString(out.ETag), nil
	case etag == "" && isConflict(err):
		return "", errExists
	case etag != "" && (isConflict(err) || isMissing(err)):
		return "", errConflict
	}
	return "", fmt.Errorf("write %s: %w", q.where(r.ID), err)
}

// remove deletes the record of job id if it is still the version with
// etag. It returns errConflict if the record changed or went.
func (q *Queue) remove(ctx context.Context, id, etag string) error {
	_, err := q.s3.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:  aws.String(q.bucket),
		Key:     aws.String(q.key(id)),
		IfMatch: aws.String(etag),
	})
	switch {
	case err == nil:
		return nil
	case isConflict(err) || isMissing(err):
		return errConflict
	}
	return fmt.Errorf("delete %s: %w", q.where(id), err)
}

// listIDs returns the IDs of the jobs that have a record.
func (q *Queue) listIDs(ctx context.Context) ([]string, error) {
	pages := s3.NewListObjectsV2Paginator(q.s3, &s3.ListObjectsV2Input{
		Bucket: aws.String(q.bucket),
		Prefix: aws.String(q.prefix),
	})
	var ids []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", q.bucket, q.prefix, err)
		}
		for _, obj := range page.Contents {
			enc := strings.TrimPrefix(aws.ToString(obj.Key), q.prefix)
			raw, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || len(raw) == 0 {
				return nil, fmt.Errorf("s3://%s/%s is not a job record: keep only job records under the prefix %q", q.bucket, aws.ToString(obj.Key), q.prefix)
			}
			ids = append(ids, string(raw))
		}
	}
	return ids, nil
}

// isConflict reports whether a conditional S3 request failed on its
// condition: 412 PreconditionFailed, or 409 ConditionalRequestConflict for
// one that raced another write.
func isConflict(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return true
		}
	}
	switch httpStatus(err) {
	case http.StatusPreconditionFailed, http.StatusConflict:
		return true
	}
	return false
}

// isMissing reports whether an S3 request failed because the key does not
// exist (and not the bucket, which is also a 404).
func isMissing(err error) bool {
	var noKey *types.NoSuchKey
	var apiErr smithy.APIError
	return errors.As(err, &noKey) || errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchKey"
}

func httpStatus(err error) int {
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		return respErr.HTTPStatusCode()
	}
	return 0
}
