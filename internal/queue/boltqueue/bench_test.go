package boltqueue

import (
	"path/filepath"
	"testing"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/queuetest"
)

// BenchmarkThroughput measures enqueue → lease → ack with bbolt's default
// fsync on every commit. commit-per-op moves one job per iteration in three
// commits; batched moves 100 jobs per iteration in three commits.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
	}{
		{"commit-per-op", 1},
		{"batched", 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q, err := Open(filepath.Join(b.TempDir(), "queue.db"), queue.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := q.Close(); err != nil {
					b.Error(err)
				}
			})
			queuetest.Throughput(b, q, bc.batch)
		})
	}
}
