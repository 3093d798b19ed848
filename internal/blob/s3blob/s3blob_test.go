package s3blob_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/blobtest"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
)

func TestConformance(t *testing.T) {
	s3test.Endpoint(t)
	blobtest.Exercise(t, func(t *testing.T) blob.Store {
		bucket := s3test.NewBucket(t)
		client := s3test.Client(t)
		t.Cleanup(func() {
			// Runs before the bucket is deleted: a failed multipart Put
			// must have aborted its upload.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if left := s3test.Uploads(t, ctx, client, bucket); len(left) > 0 {
				t.Errorf("unfinished multipart uploads left in %s: %q", bucket, left)
			}
		})
		// Parts of the S3 minimum size, so that blobtest.LargeSize objects
		// go up in three parts.
		s, err := s3blob.New(t.Context(), bucket, "store/prefix",
			s3blob.WithPartThreshold(5<<20), s3blob.WithPartSize(5<<20), s3blob.WithConcurrency(2))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestErrorsSayWhatToCheck(t *testing.T) {
	s3test.Endpoint(t)
	ctx := t.Context()

	missing, err := s3blob.New(ctx, "hpsearch-no-such-bucket", "p")
	if err != nil {
		t.Fatal(err)
	}
	err = missing.Put(ctx, "k", strings.NewReader("x"), 1, blob.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "s3://hpsearch-no-such-bucket/p/k") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Put to a missing bucket = %v, want an error naming the object and saying the bucket does not exist", err)
	}
	if _, err := missing.Get(ctx, "k"); err == nil || errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Get from a missing bucket = %v, want an error (not ErrNotFound) saying the bucket does not exist", err)
	}

	// Nothing listens on port 1.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	unreachable, err := s3blob.New(ctx, "bucket", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unreachable.List(ctx, ""); err == nil || !strings.Contains(err.Error(), "could not reach S3 at http://127.0.0.1:1") {
		t.Errorf("List on an unreachable endpoint = %v, want an error naming the endpoint", err)
	}

	// No credentials anywhere.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	anonymous, err := s3blob.New(ctx, "bucket", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := anonymous.Delete(ctx, "k"); err == nil || !strings.Contains(err.Error(), "no usable AWS credentials") {
		t.Errorf("Delete without credentials = %v, want an error saying to set credentials", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, tc := range []struct {
		bucket, prefix string
		opts           []s3blob.Option
		want           string
	}{
		{"", "p", nil, "bucket name is empty"},
		{"b", "a//b", nil, "invalid blob key"},
		{"b", "p", []s3blob.Option{s3blob.WithPartSize(1 << 20)}, "at least 5242880 bytes"},
		{"b", "p", []s3blob.Option{s3blob.WithPartThreshold(0)}, "part threshold 0"},
		{"b", "p", []s3blob.Option{s3blob.WithConcurrency(0)}, "concurrency 0"},
	} {
		_, err := s3blob.New(t.Context(), tc.bucket, tc.prefix, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want an error containing %q", tc.bucket, tc.prefix, err, tc.want)
		}
	}
}
