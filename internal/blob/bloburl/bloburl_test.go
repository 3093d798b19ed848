package bloburl_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob/s3test"
)

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	abs := filepath.Join(dir, "with space", "abs")
	for _, tc := range []struct {
		uri, root string
	}{
		{"file://" + filepath.ToSlash(abs), abs},
		{"file://" + strings.ReplaceAll(filepath.ToSlash(abs), " ", "%20"), abs},
		{"file://rel/path", filepath.Join(dir, "rel", "path")},
		{"FILE://rel/path", filepath.Join(dir, "rel", "path")},
		{"plain/path", filepath.Join(dir, "plain", "path")},
		{abs, abs},
	} {
		s, err := bloburl.Open(t.Context(), tc.uri)
		if err != nil {
			t.Errorf("Open(%q) = %v", tc.uri, err)
			continue
		}
		if root := s.(*fsblob.Store).Root(); root != tc.root {
			t.Errorf("Open(%q) has root %s, want %s", tc.uri, root, tc.root)
		}
		again, err := bloburl.Open(t.Context(), s.URI())
		if err != nil || again.URI() != s.URI() {
			t.Errorf("Open(%q).URI() = %q opens %v, %v; want the same store", tc.uri, s.URI(), again, err)
		}
		if _, err := os.Stat(tc.root); err != nil {
			t.Errorf("Open(%q) did not create its root: %v", tc.uri, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"", "empty"},
		{"gs://bucket/x", `scheme "gs"`},
		{"s3a://bucket/x", `scheme "s3a"`},
		{"file://", "names no directory"},
		{"file://%zz", "invalid URL escape"},
		{"s3://", "names no bucket"},
		{"s3:///prefix", "names no bucket"},
		{"s3://bucket/p?region=x", "no user, query or fragment"},
		{"s3://bucket/a/../b", "invalid blob key"},
	} {
		_, err := bloburl.Open(t.Context(), tc.uri)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", tc.uri, err, tc.want)
		}
	}
}

func TestOpenS3(t *testing.T) {
	bucket := s3test.NewBucket(t)
	ctx := t.Context()
	for _, tc := range []struct{ uri, want, key string }{
		{fmt.Sprintf("s3://%s/ckpt/study", bucket), fmt.Sprintf("s3://%s/ckpt/study", bucket), "ckpt/study/k"},
		{fmt.Sprintf("s3://%s/ckpt/", bucket), fmt.Sprintf("s3://%s/ckpt", bucket), "ckpt/k"},
		{fmt.Sprintf("s3://%s", bucket), fmt.Sprintf("s3://%s", bucket), "k"},
	} {
		s, err := bloburl.Open(ctx, tc.uri)
		if err != nil {
			t.Fatalf("Open(%q) = %v", tc.uri, err)
		}
		if s.URI() != tc.want {
			t.Errorf("Open(%q).URI() = %q, want %q", tc.uri, s.URI(), tc.want)
		}
		if err := s.Put(ctx, "k", strings.NewReader(tc.uri), int64(len(tc.uri)), blob.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// The object is where the URI says, as the whole bucket sees it.
		whole, err := bloburl.Open(ctx, "s3://"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		r, err := whole.Get(ctx, tc.key)
		if err != nil {
			t.Fatalf("Open(%q).Put(k) is not at %s: %v", tc.uri, tc.key, err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || string(got) != tc.uri {
			t.Errorf("object %s holds %q, %v; want %q", tc.key, got, err, tc.uri)
		}
	}
}
