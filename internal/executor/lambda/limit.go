package lambda

import (
	"context"
	"fmt"
	"sync"
)

// limits holds one semaphore per function for the whole process, so that
// the executors of every study that invokes a function share its limit.
var limits = struct {
	sync.Mutex
	byFunction map[string]chan struct{}
}{byFunction: map[string]chan struct{}{}}

// limitFor returns the semaphore of function, making it with n slots the
// first time. A second executor that asks for another size is refused, so
// that no study silently gets a limit other than the one it set.
func limitFor(function string, n int) (chan struct{}, error) {
	limits.Lock()
	defer limits.Unlock()
	slots, ok := limits.byFunction[function]
	if !ok {
		slots = make(chan struct{}, n)
		limits.byFunction[function] = slots
	}
	if cap(slots) != n {
		return nil, fmt.Errorf("lambda: function %s already has a concurrency limit of %d in this process, set by another executor, not %d: give every executor of a function the same Concurrency", function, cap(slots), n)
	}
	return slots, nil
}

// acquire takes a slot of slots, or returns ctx's cause when ctx ends first.
func acquire(ctx context.Context, slots chan struct{}) error {
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release gives back a slot that acquire took.
func release(slots chan struct{}) { <-slots }
