package queuetest

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// Throughput is the body of a throughput benchmark: each iteration
// enqueues batch jobs of 512 bytes (about a serialized segment request),
// leases them all (waiting up to a second a call) and acks them. It reports
// jobs/s, the figure to compare across backends; ns/op is per iteration.
func Throughput(b *testing.B, q queue.Queue, batch int) {
	payload := bytes.Repeat([]byte("x"), 512)
	ctx := b.Context()
	jobs := make([]queue.Job, batch)
	tokens := make([]string, 0, batch)
	moved := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range jobs {
			jobs[i] = queue.Job{ID: strconv.Itoa(moved + i), Payload: payload}
		}
		if _, err := q.Enqueue(ctx, jobs...); err != nil {
			b.Fatal(err)
		}
		tokens = tokens[:0]
		for len(tokens) < batch {
			leases, err := q.Lease(ctx, queue.LeaseParams{Max: batch - len(tokens), Visibility: time.Minute, Wait: time.Second})
			if err != nil || len(leases) == 0 {
				b.Fatalf("Lease = %d leases, %v; want up to %d", len(leases), err, batch-len(tokens))
			}
			for _, l := range leases {
				tokens = append(tokens, l.Token)
			}
		}
		if err := q.Ack(ctx, tokens...); err != nil {
			b.Fatal(err)
		}
		moved += batch
	}
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "jobs/s")
}
