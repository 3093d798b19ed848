// Package s3test finds the S3 service that tests run against and makes
// throwaway buckets on it. `make test` starts one (moto_server, through
// scripts/with-moto) and sets AWS_ENDPOINT_URL; tests that need S3 skip
// without one, except in CI, where they fail.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
)

// Endpoint returns the S3 endpoint that tests use: AWS_ENDPOINT_URL_S3, or
// else AWS_ENDPOINT_URL. Without one it skips the test, saying how to run
// it — or fails it when CI or HPSEARCH_REQUIRE_S3 is set (to anything but
// "", "0" or "false"), so that CI never skips S3 silently.
func Endpoint(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if e := os.Getenv(name); e != "" {
			return e
		}
	}
	const how = "no S3 endpoint: set AWS_ENDPOINT_URL (with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION), " +
		"or run the tests through `make test` or `scripts/with-moto go test ./...`, which start moto_server"
	for _, name := range []string{"CI", "HPSEARCH_REQUIRE_S3"} {
		if v := os.Getenv(name); v != "" && v != "0" && v != "false" {
			t.Fatalf("%s (S3 tests may not be skipped: %s=%s)", how, name, v)
		}
	}
	t.Skip(how)
	return ""
}

// NewBucket creates a bucket with a unique name on the endpoint (see
// Endpoint) and, when the test ends, deletes it with every object and
// unfinished multipart upload in it.
func NewBucket(t testing.TB) string {
	t.Helper()
	Endpoint(t)
	client := Client(t)
	var random [8]byte
	_, _ = rand.Read(random[:])
	bucket := "hpsearch-test-" + hex.EncodeToString(random[:])
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create test bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() {
		// The test's context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := emptyBucket(ctx, client, bucket); err != nil {
			t.Errorf("empty test bucket %s: %v", bucket, err)
			return
		}
		if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Errorf("delete test bucket %s: %v", bucket, err)
		}
	})
	return bucket
}

// Client returns an S3 client for the endpoint, configured as s3blob's.
func Client(t testing.TB) *s3.Client {
	t.Helper()
	Endpoint(t)
	client, err := s3blob.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// Uploads returns the keys of the multipart uploads begun and neither
// completed nor aborted in bucket.
func Uploads(t testing.TB, ctx context.Context, client *s3.Client, bucket string) []string {
	t.Helper()
	var keys []string
	pages := s3.NewListMultipartUploadsPaginator(client, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("list the multipart uploads in %s: %v", bucket, err)
		}
		for _, u := range page.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
	}
	return keys
}

func emptyBucket(ctx context.Context, client *s3.Client, bucket string) error {
	uploads := s3.NewListMultipartUploadsPaginator(client, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	for uploads.HasMorePages() {
		page, err := uploads.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId,
			}); err != nil {
				return err
			}
		}
	}
	objects := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for objects.HasMorePages() {
		page, err := objects.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, obj := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: obj.Key}
		}
		if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}); err != nil {
			return err
		}
	}
	return nil
}
