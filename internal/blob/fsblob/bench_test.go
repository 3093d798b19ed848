package fsblob_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob/blobtest"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
)

const benchSize = 32 << 20

func BenchmarkPutGet(b *testing.B) {
	s, err := fsblob.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	blobtest.BenchmarkPutGet(b, s, benchSize)
}

// BenchmarkSequentialWrite is the disk's limit that Put is measured
// against: the same bytes written to a file with one write and an fsync.
func BenchmarkSequentialWrite(b *testing.B) {
	data := make([]byte, benchSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(b.TempDir(), "object")
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
