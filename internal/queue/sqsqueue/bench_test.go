package sqsqueue

import (
	"testing"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/queuetest"
)

// BenchmarkThroughput measures enqueue → lease → ack against the SQS and
// S3 of the environment (moto_server under scripts/with-moto). one-job
// moves one job per iteration; batched moves 100 jobs per iteration, which
// take ten SendMessageBatch, ReceiveMessage and DeleteMessageBatch calls
// each, and six S3 requests per job. jobs/s is the figure to compare; ns/op
// is per iteration.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
	}{
		{"one-job", 1},
		{"batched", 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q, _ := setup(b, queue.Config{})
			queuetest.Throughput(b, q, bc.batch)
		})
	}
}
