package s3blob_test

import (
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob/blobtest"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
)

// BenchmarkPutGet uses the default options: a 32 MiB object goes up as a
// multipart upload of four 8 MiB parts, four at a time.
func BenchmarkPutGet(b *testing.B) {
	s, err := s3blob.New(b.Context(), s3test.NewBucket(b), "bench")
	if err != nil {
		b.Fatal(err)
	}
	blobtest.BenchmarkPutGet(b, s, 32<<20)
}
