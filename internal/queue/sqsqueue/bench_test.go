package sqsqueue

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// BenchmarkThroughput measures enqueue → lease → ack against the SQS and
// S3 of the environment (moto_server under scripts/with-moto). one-job
// moves one job per iteration; batched moves 100 jobs per iteration, which
// take ten SendMessageBatch, ReceiveMessage and DeleteMessageBatch calls
// each, and six S3 requests per job. jobs/s is the figure to compare; ns/op
// is per iteration.
func BenchmarkThroughput(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 512) // about a serialized segment request
	for _, bc := range []struct {
		name  string
		batch int
	}{
		{"one-job", 1},
		{"batched", 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q, _ := setup(b, queue.Config{})
			ctx := b.Context()
			jobs := make([]queue.Job, bc.batch)
			tokens := make([]string, 0, bc.batch)
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
				for len(tokens) < bc.batch {
					leases, err := q.Lease(ctx, queue.LeaseParams{Max: bc.batch - len(tokens), Visibility: time.Minute, Wait: time.Second})
					if err != nil || len(leases) == 0 {
						b.Fatalf("Lease = %d leases, %v; want up to %d", len(leases), err, bc.batch-len(tokens))
					}
					for _, l := range leases {
						tokens = append(tokens, l.Token)
					}
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
