package httpqueue_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
	"github.com/hpsearch/hpsearch/internal/queue/httpqueue"
)

// BenchmarkLeaseAck measures a Lease and an Ack of a batch of jobs, through
// HTTP on 127.0.0.1 (http) and on the bbolt queue itself (direct). Each
// iteration first enqueues the batch on the bbolt queue directly, in one
// commit, in both cases, so the difference between the two is the cost of
// two HTTP round trips. With fsync bbolt syncs every commit, as a queue
// does in production; nosync leaves the disk out, so that the cost of HTTP
// stands out. jobs/s is the figure to compare; ns/op is per iteration, and
// B/op and allocs/op of http count the server's as well as the client's.
func BenchmarkLeaseAck(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 512) // about a serialized segment request
	for _, disk := range []struct {
		name  string
		fsync bool
	}{{"fsync", true}, {"nosync", false}} {
		for _, batch := range []int{1, 100} {
			for _, via := range []string{"direct", "http"} {
				b.Run(disk.name+"/"+via+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
					benchLeaseAck(b, disk.fsync, via == "http", batch, payload)
				})
			}
		}
	}
}

func benchLeaseAck(b *testing.B, fsync, overHTTP bool, batch int, payload []byte) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "queue.db"), 0o600, &bolt.Options{NoSync: !fsync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	bq, err := boltqueue.New(db, queue.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := bq.Close(); err != nil {
			b.Error(err)
		}
	})
	var q queue.Queue = bq
	if overHTTP {
		url := serve(b, bq, httpqueue.HandlerOptions{Logger: slog.New(slog.DiscardHandler)})
		q = newClient(b, url, httpqueue.ClientOptions{})
	}
	ctx := b.Context()
	jobs := make([]queue.Job, batch)
	tokens := make([]string, batch)
	moved := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range jobs {
			jobs[i] = queue.Job{ID: strconv.Itoa(moved + i), Payload: payload}
		}
		if _, err := bq.Enqueue(ctx, jobs...); err != nil {
			b.Fatal(err)
		}
		leases, err := q.Lease(ctx, queue.LeaseParams{Max: batch, Visibility: time.Minute})
		if err != nil || len(leases) != batch {
			b.Fatalf("Lease = %d leases, %v; want %d", len(leases), err, batch)
		}
		for i, l := range leases {
			tokens[i] = l.Token
		}
		if err := q.Ack(ctx, tokens...); err != nil {
			b.Fatal(err)
		}
		moved += batch
	}
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "jobs/s")
}
