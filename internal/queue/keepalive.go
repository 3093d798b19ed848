package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// KeepLeased extends the lease of token at 0.8 x visibility (a heartbeat)
// until ctx ends, when it returns nil. It returns an error wrapping
// ErrLeaseLost when the lease is lost: another holder may have the job
// then, so the caller must stop working on it. Other errors of Extend (the
// queue briefly unreachable) are logged and tried again at the next beat.
func KeepLeased(ctx context.Context, q Queue, token string, visibility time.Duration, log *slog.Logger) error {
	tick := time.NewTicker(visibility * 4 / 5)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			_, err := q.Extend(ctx, token, visibility)
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, ErrLeaseLost):
				return fmt.Errorf("extend the lease: %w", err)
			default:
				log.Warn("could not extend the lease; trying again", "error", err)
			}
		}
	}
}
