package boltqueue

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// BenchmarkThroughput measures enqueue → lease → ack with bbolt's default
// fsync on every commit. commit-per-op moves one job per iteration in three
// commits; batched moves 100 jobs per iteration in three commits. jobs/s is
// the figure to compare; ns/op is per iteration.
func BenchmarkThroughput(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 512) // about a serialized segment request
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
			ctx := b.Context()
			jobs := make([]queue.Job, bc.batch)
			tokens := make([]string, bc.batch)
			moved := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range jobs {
					jobs[i] = queue.Job{ID: strconv.Itoa(moved + i), Payload: payload}
				}
				if _, err := q.Enqueue(ctx, jobs...); err != nil {
					b.Fatal(err)
				}
				leases, err := q.Lease(ctx, queue.LeaseParams{Max: bc.batch, Visibility: time.Minute})
				if err != nil || len(leases) != bc.batch {
					b.Fatalf("Lease = %d leases, %v; want %d", len(leases), err, bc.batch)
				}
				for i, l := range leases {
					tokens[i] = l.Token
				}
				if err := q.Ack(ctx, tokens...); err != nil {
					b.Fatal(err)
				}
				moved += bc.batch
			}
			b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
