// Package s3blob implements blob.Store on Amazon S3 or an S3-compatible
// service (moto, LocalStack, MinIO): the objects of a store are the keys of
// one bucket under a prefix.
//
// Configuration comes from the environment as the AWS CLI reads it
// (config.LoadDefaultConfig): AWS_REGION, AWS_PROFILE, AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, and AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 for
// another service than AWS; with a custom endpoint, requests use path-style
// addressing (http://host/bucket/key), which emulators need.
//
// Objects smaller than the part threshold are sent with one PutObject;
// larger ones with a multipart upload by the SDK's transfer manager, which
// aborts the upload when it fails. A conditional Put sends
// If-None-Match: * on PutObject or CompleteMultipartUpload, so the object
// appears whole or not at all. When the SDK retries a conditional Put after
// a network error that hid a success, the retry reports blob.ErrExists for
// the object the first attempt wrote.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/internal/sized"
)

// minPartSize is the smallest part S3 accepts, but for the last one.
const minPartSize = 5 << 20

// deleteBatch is the most keys one DeleteObjects request may name.
const deleteBatch = 1000

// abortTimeout bounds aborting a failed multipart upload, which runs on a
// fresh context so that a canceled Put still cleans up its parts.
const abortTimeout = 30 * time.Second

// Option changes a rarely changed setting of New.
type Option func(*options)

type options struct {
	partThreshold int64
	partSize      int64
	concurrency   int
}

// WithPartThreshold sets the size from which objects are uploaded in parts
// (a multipart upload) instead of with one PutObject, which holds the whole
// object in memory. Defaults to 16 MiB.
func WithPartThreshold(n int64) Option { return func(o *options) { o.partThreshold = n } }

// WithPartSize sets the size of the parts of a multipart upload; S3 needs
// at least 5 MiB. The SDK raises it for objects that would need more than
// 10,000 parts. Defaults to 8 MiB.
func WithPartSize(n int64) Option { return func(o *options) { o.partSize = n } }

// WithConcurrency sets how many parts of one object are uploaded at once.
// A multipart Put buffers (concurrency + 1) parts plus the part threshold.
// Defaults to 4.
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// Store is a blob.Store on an S3 bucket. It is safe for concurrent use.
type Store struct {
	client    *s3.Client
	uploader  *transfermanager.Client
	bucket    string
	keyPrefix string // the store's prefix and "/", or "" for the whole bucket
	threshold int64
	endpoint  string // where requests go, for error messages
}

var _ blob.Store = (*Store)(nil)

// New returns the store of the objects under prefix in bucket ("" for the
// whole bucket; slashes around it are dropped). It checks its arguments and
// the configuration, but sends no request: a missing bucket or bad
// credentials show in the first call's error.
func New(ctx context.Context, bucket, prefix string, opts ...Option) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3blob: the bucket name is empty; give a store as s3://bucket/prefix")
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := blob.CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("s3blob: prefix of s3://%s/%s: %w", bucket, prefix, err)
		}
	}
	o := options{partThreshold: 16 << 20, partSize: 8 << 20, concurrency: 4}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.partThreshold < 1:
		return nil, fmt.Errorf("s3blob: part threshold %d: want at least 1 byte", o.partThreshold)
	case o.partSize < minPartSize:
		return nil, fmt.Errorf("s3blob: part size %d: S3 needs parts of at least %d bytes (5 MiB)", o.partSize, minPartSize)
	case o.concurrency < 1:
		return nil, fmt.Errorf("s3blob: concurrency %d: want at least 1", o.concurrency)
	}
	client, err := NewClient(ctx)
	if err != nil {
		return nil, err
	}
	s := &Store{
		client: client,
		uploader: transfermanager.New(client, func(to *transfermanager.Options) {
			to.MultipartUploadThreshold = o.partThreshold
			to.PartSizeBytes = o.partSize
			to.Concurrency = o.concurrency
			to.FailTimeout = abortTimeout
		}),
		bucket:    bucket,
		threshold: o.partThreshold,
		endpoint:  "the AWS endpoint of region " + client.Options().Region,
	}
	if prefix != "" {
		s.keyPrefix = prefix + "/"
	}
	if e := client.Options().BaseEndpoint; e != nil {
		s.endpoint = *e
	}
	return s, nil
}

// NewClient returns an S3 client configured from the environment as New's
// stores are: config.LoadDefaultConfig, an HTTP client that honours
// AWS_CA_BUNDLE, and path-style addressing when a custom endpoint is set.
func NewClient(ctx context.Context) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(awshttp.NewBuildableClient()))
	if err != nil {
		return nil, fmt.Errorf("s3blob: load the AWS configuration: %w (check AWS_PROFILE, AWS_CONFIG_FILE and AWS_CA_BUNDLE)", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("s3blob: no AWS region configured: set AWS_REGION (or a region in the AWS profile)")
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
		// A multipart object's checksum covers its parts, not its bytes,
		// so a Get cannot check it; the SDK would log a warning for each.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}

// URI returns "s3://bucket/prefix", or "s3://bucket" for a whole bucket.
func (s *Store) URI() string {
	if s.keyPrefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.keyPrefix, "/")
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) error {
	if err := blob.CheckKey(key); err != nil {
		return fmt.Errorf("s3blob: put: %w", err)
	}
	if size < 0 {
		return fmt.Errorf("s3blob: put %s: negative size %d", s.where(key), size)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3blob: put %s: %w", s.where(key), err)
	}
	var ifNoneMatch *string
	if opts.IfNotExists {
		ifNoneMatch = aws.String("*")
	}
	var err error
	if size < s.threshold {
		// PutObject over plain http needs a body it can seek (to sign it
		// and to retry), so the object is read whole first.
		var body []byte
		body, err = sized.ReadAll(ctx, r, size)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return fmt.Errorf("s3blob: put %s: %w", s.where(key), ctxErr)
			}
			return fmt.Errorf("s3blob: put %s: read the object: %w", s.where(key), err)
		}
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(s.keyPrefix + key),
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(size),
			IfNoneMatch:   ifNoneMatch,
		})
	} else {
		_, err = s.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(s.keyPrefix + key),
			Body:          sized.NewReader(ctx, r, size),
			ContentLength: aws.Int64(size),
			IfNoneMatch:   ifNoneMatch,
		})
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("s3blob: put %s: %w", s.where(key), ctx.Err())
	case opts.IfNotExists && isPreconditionFailed(err):
		return fmt.Errorf("s3blob: put %s: %w", s.where(key), blob.ErrExists)
	}
	return s.fail("put", key, err)
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blob.CheckKey(key); err != nil {
		return nil, fmt.Errorf("s3blob: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3blob: get %s: %w", s.where(key), err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.keyPrefix + key),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("s3blob: get %s: %w", s.where(key), ctx.Err())
		}
		var noKey *types.NoSuchKey
		if errors.As(err, &noKey) {
			return nil, fmt.Errorf("s3blob: get %s: %w", s.where(key), blob.ErrNotFound)
		}
		return nil, s.fail("get", key, err)
	}
	return out.Body, nil
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Info, error) {
	if err := blob.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("s3blob: list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3blob: list %s: %w", s.where(prefix), err)
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.keyPrefix + prefix),
	})
	var infos []blob.Info
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("s3blob: list %s: %w", s.where(prefix), ctx.Err())
			}
			return nil, s.fail("list", prefix, err)
		}
		for _, obj := range page.Contents {
			infos = append(infos, blob.Info{
				Key:      strings.TrimPrefix(aws.ToString(obj.Key), s.keyPrefix),
				Size:     aws.ToInt64(obj.Size),
				Modified: aws.ToTime(obj.LastModified),
			})
		}
	}
	// General purpose buckets list in key order already; directory buckets
	// (S3 Express One Zone) do not.
	slices.SortFunc(infos, func(a, b blob.Info) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete implements blob.Store. It deletes up to 1,000 keys per request.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		if err := blob.CheckKey(key); err != nil {
			return fmt.Errorf("s3blob: delete: %w", err)
		}
	}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	for batch := range slices.Chunk(keys, deleteBatch) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("s3blob: delete %s: %w", s.where(batch[0]), err)
		}
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, key := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(s.keyPrefix + key)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("s3blob: delete %s: %w", s.where(batch[0]), ctx.Err())
			}
			return s.fail(fmt.Sprintf("delete %d keys from", len(batch)), batch[0], err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("s3blob: delete s3://%s/%s: %s: %s (%d of %d keys failed; check that the credentials may delete in the bucket)",
				s.bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors), len(batch))
		}
	}
	return nil
}

// where names a key of the store in messages.
func (s *Store) where(key string) string {
	return "s3://" + s.bucket + "/" + s.keyPrefix + key
}

// fail wraps an error of the S3 API with the operation, the object and
// what to check.
func (s *Store) fail(op, key string, err error) error {
	return fmt.Errorf("s3blob: %s %s: %w%s", op, s.where(key), err, s.hint(err))
}

// hint says what to check for an error of the S3 API, or "".
func (s *Store) hint(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchBucket":
			return fmt.Sprintf(" (bucket %q does not exist at %s: create it, or check the bucket name, AWS_REGION and AWS_ENDPOINT_URL)", s.bucket, s.endpoint)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled":
			return " (check the AWS credentials — AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY — and that they may use the bucket)"
		case "PermanentRedirect", "AuthorizationHeaderMalformed":
			return " (the bucket is in another region: set AWS_REGION to the bucket's region)"
		}
	}
	// The SDK has no error type for credentials it could not find; its
	// messages say "get credentials" (identity resolution) or "retrieve
	// credentials" (signing).
	if msg := err.Error(); strings.Contains(msg, "get credentials") || strings.Contains(msg, "retrieve credentials") {
		return " (no usable AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
	}
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return fmt.Sprintf(" (could not reach S3 at %s: check AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 and that the service runs)", s.endpoint)
	}
	return ""
}

// isPreconditionFailed reports whether a conditional write was refused
// because the key holds an object: 412 PreconditionFailed, or 409
// ConditionalRequestConflict for a write that raced another.
func isPreconditionFailed(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return true
		}
	}
	var respErr *awshttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusPreconditionFailed
}
