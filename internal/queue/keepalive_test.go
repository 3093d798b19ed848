package queue_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
)

// TestKeepLeased extends a lease, then returns ErrLeaseLost once the job is
// acked under it by someone else.
func TestKeepLeased(t *testing.T) {
	q, err := boltqueue.Open(filepath.Join(t.TempDir(), "q.db"), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := t.Context()
	if _, err := q.Enqueue(ctx, queue.Job{ID: "j"}); err != nil {
		t.Fatal(err)
	}
	leases, err := q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: 5 * time.Second})
	if err != nil || len(leases) != 1 {
		t.Fatal(leases, err)
	}
	token := leases[0].Token
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	kctx, stop := context.WithCancel(ctx)
	go func() { done <- queue.KeepLeased(kctx, q, token, 5*time.Second, log) }()

	// Wait for the lease to be extended past its first expiry.
	first := leases[0].Expires
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		info, err := q.Get(ctx, "j")
		if err != nil || info.State != queue.StateLeased || info.Token != token {
			t.Fatalf("while kept: %+v, %v", info, err)
		}
		if info.Expires.After(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease was never extended")
		}
	}
	if err := q.Ack(ctx, token); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("KeepLeased after the job was acked = %v, want ErrLeaseLost", err)
	}
	stop()

	if _, err := q.Enqueue(ctx, queue.Job{ID: "k"}); err != nil {
		t.Fatal(err)
	}
	leases, _ = q.Lease(ctx, queue.LeaseParams{Max: 1, Visibility: time.Minute})
	kctx, stop = context.WithCancel(ctx)
	stop()
	if err := queue.KeepLeased(kctx, q, leases[0].Token, time.Minute, log); err != nil {
		t.Errorf("KeepLeased with its context ended = %v, want nil", err)
	}
}
