// Package queue defines the durable job queue that hpsearch puts segment jobs
// on: the Queue contract that every backend implements (bbolt in boltqueue,
// SQS), its types and its errors. It imports only the standard library so
// that any package can depend on it.
//
// # Life of a job
//
// Enqueue adds a job. It becomes visible Delay after it was enqueued. Lease
// hands visible jobs out, each under a lease: a fencing token that is valid
// until the lease expires. While the lease is valid no other Lease returns
// the job. The holder ends the lease with one of:
//
//   - Ack: the work is done; the job is removed.
//   - Nack: the attempt failed; the job is visible again after a backoff
//     (see Config.Backoff).
//   - Release: the holder gives the job back without a failure; it is
//     visible at once and the attempt does not count.
//
// A lease that expires without any of these (the holder died or stopped
// heartbeating with Extend) counts as a failed attempt, like a Nack, except
// that the job is visible again at once. When a job's failed attempts reach
// Config.MaxAttempts it goes to the dead-letter state: it is kept, listed by
// Dead, and never leased again.
//
// Delivery is at least once: a holder that is slow past its lease's expiry
// may find that the job went to someone else. Its token is then stale and
// every call made with it fails with ErrLeaseLost, so a stale holder cannot
// ack, extend or fail a job that is no longer its own.
//
// # Order
//
// The contract promises no order of delivery (an SQS standard queue keeps
// none). Implementations document the order they keep; boltqueue delivers
// by visibility time, then enqueue order.
package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// ErrLeaseLost is returned by Ack, Extend, Nack and Release when a token is
// stale or unknown: its lease expired, it was already ended, or the job was
// leased again since.
var ErrLeaseLost = errors.New("lease lost: the token is stale (expired, acked, or superseded by a newer lease)")

// ErrNotFound is returned by Get for a job that is not in the queue: it
// never was, or it was acked.
var ErrNotFound = errors.New("job not found")

// ErrInvalid is returned, wrapped in a message that says what is wrong, for
// a call with an invalid argument. Such a call changes nothing.
var ErrInvalid = errors.New("invalid argument")

// ErrClosed is returned by calls on a queue that was closed, including a
// Lease that was waiting when Close was called.
var ErrClosed = errors.New("queue closed")

// LeaseLostError lists the tokens of a call that were stale. It matches
// ErrLeaseLost with errors.Is.
type LeaseLostError struct {
	// Tokens are the stale tokens, in the order they were given.
	Tokens []string
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("%v: %s", ErrLeaseLost, strings.Join(e.Tokens, ", "))
}

// Unwrap returns ErrLeaseLost.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// Queue is a durable queue of jobs with leases. All methods are safe for
// concurrent use.
type Queue interface {
	// Enqueue adds jobs. A job whose ID is already in the queue, in any
	// state including dead (or earlier in the same call), is left unchanged
	// and reported in EnqueueResult.Existing; that is not an error. An acked
	// job is no longer in the queue, so its ID can be enqueued again. If any
	// job is invalid, nothing is enqueued and the error wraps ErrInvalid.
	Enqueue(ctx context.Context, jobs ...Job) (EnqueueResult, error)

	// Lease leases up to p.Max visible jobs for p.Visibility. When no job is
	// visible it waits up to p.Wait for one and returns as soon as it has
	// leased at least one; it returns no leases and no error when the wait
	// ends empty. A canceled ctx ends the wait with an error that wraps
	// ctx.Err(). It may return fewer than p.Max leases even when more jobs
	// are visible.
	Lease(ctx context.Context, p LeaseParams) ([]Lease, error)

	// Extend makes the lease of token expire visibility from now (a
	// heartbeat) and returns the new expiry. It can also shorten a lease.
	Extend(ctx context.Context, token string, visibility time.Duration) (time.Time, error)

	// Ack ends the leases of tokens as done and removes their jobs. A token
	// given twice is acked once. When some tokens are stale, Ack still acks
	// the valid ones and returns a *LeaseLostError that lists the stale ones.
	Ack(ctx context.Context, tokens ...string) error

	// Nack ends the lease of token as a failed attempt with cause (recorded
	// for Get and Dead). The job is visible again after Config.Backoff, or
	// goes to the dead-letter state if its failed attempts reach
	// Config.MaxAttempts.
	Nack(ctx context.Context, token, cause string) error

	// Release ends the lease of token without a failure: the job is visible
	// again at once and the attempt does not count toward MaxAttempts. A
	// coordinator uses it to give back its leases when it stops cleanly, and
	// to give back the leases of its dead previous process (found with Get).
	Release(ctx context.Context, token string) error

	// Get returns the state of the job with id, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, id string) (JobInfo, error)

	// Stats counts the jobs in each state.
	Stats(ctx context.Context) (Stats, error)

	// Dead lists the dead-lettered jobs, oldest death first.
	Dead(ctx context.Context) ([]JobInfo, error)

	// Close releases the queue's resources and wakes waiting Lease calls,
	// which return ErrClosed. Jobs and leases stay in the queue.
	Close() error
}

// Job is a unit of work.
type Job struct {
	// ID identifies the job in its queue. It must not be empty.
	ID string
	// Payload is the body of the job, opaque to the queue.
	Payload []byte
	// Delay keeps the job invisible until Delay after it was enqueued. Zero
	// means visible at once; it must not be negative.
	Delay time.Duration
}

// Validate reports whether j can be enqueued. Its error wraps ErrInvalid.
func (j Job) Validate() error {
	if j.ID == "" {
		return fmt.Errorf("job has an empty ID: %w", ErrInvalid)
	}
	if j.Delay < 0 {
		return fmt.Errorf("job %q: negative delay %s: %w", j.ID, j.Delay, ErrInvalid)
	}
	return nil
}

// EnqueueResult tells what Enqueue did with each job it was given.
type EnqueueResult struct {
	// Added lists the IDs of the jobs that were added, in the order given.
	Added []string
	// Existing lists the IDs that were already in the queue and were left
	// unchanged, in the order given.
	Existing []string
}

// LeaseParams are the arguments of Queue.Lease.
type LeaseParams struct {
	// Max is the most jobs to lease. It must be at least 1.
	Max int
	// Visibility is how long the leases last unless extended. It must be
	// positive. Implementations may round it up to their granularity (SQS:
	// whole seconds).
	Visibility time.Duration
	// Wait is how long to wait for a job when none is visible (a long
	// poll). Zero returns at once; it must not be negative.
	Wait time.Duration
	// Owner names the leaser (a process, a worker). It is optional and
	// recorded for inspection with Get.
	Owner string
}

// Validate reports whether p is a valid argument of Lease. Its error wraps
// ErrInvalid.
func (p LeaseParams) Validate() error {
	switch {
	case p.Max < 1:
		return fmt.Errorf("lease max %d is less than 1: %w", p.Max, ErrInvalid)
	case p.Visibility <= 0:
		return fmt.Errorf("lease visibility %s is not positive: %w", p.Visibility, ErrInvalid)
	case p.Wait < 0:
		return fmt.Errorf("lease wait %s is negative: %w", p.Wait, ErrInvalid)
	}
	return nil
}

// ValidateVisibility reports whether d is a valid visibility for Extend. Its
// error wraps ErrInvalid.
func ValidateVisibility(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("visibility %s is not positive: %w", d, ErrInvalid)
	}
	return nil
}

// Lease is a job handed to a holder for a limited time.
type Lease struct {
	// Job is the job as it was enqueued.
	Job Job
	// Token fences the lease: Ack, Extend, Nack and Release need it. Every
	// lease gets a new token, so the token of an expired lease is stale.
	Token string
	// Attempt is 1 on the first delivery and counts the leases of the job
	// that ended in a Nack or expired: a released lease does not count.
	Attempt int
	// Expires is when the lease ends unless extended.
	Expires time.Time
}

// State is where a job is in its life.
type State string

// The states of a job.
const (
	// StateDelayed is a job that waits for its delay or backoff to end.
	StateDelayed State = "delayed"
	// StateReady is a visible job: the next Lease may return it.
	StateReady State = "ready"
	// StateLeased is a job under a valid lease.
	StateLeased State = "leased"
	// StateDead is a job whose failed attempts reached MaxAttempts.
	StateDead State = "dead"
)

// JobInfo describes a job and its state, for inspection.
type JobInfo struct {
	// Job is the job as it was enqueued.
	Job Job
	// State is the job's state now.
	State State
	// EnqueuedAt is when the job was added.
	EnqueuedAt time.Time
	// VisibleAt is when a delayed job becomes visible, or when a ready job
	// became visible. It is zero for other states.
	VisibleAt time.Time
	// Failures counts the attempts that failed: leases that ended in a Nack
	// or expired.
	Failures int
	// Cause is the cause of the last failed attempt: the one given to Nack,
	// or a note that the lease expired. It is empty before any failure.
	Cause string
	// Token is the token of a leased job's lease. A restarted owner can use
	// it to release or ack the leases its previous process held.
	Token string
	// Owner is the LeaseParams.Owner of a leased job's lease.
	Owner string
	// Expires is when a leased job's lease ends.
	Expires time.Time
	// DiedAt is when a dead job went to the dead-letter state.
	DiedAt time.Time
}

// Stats counts the jobs of a queue in each state.
type Stats struct {
	// Ready counts visible jobs.
	Ready int
	// Delayed counts jobs waiting for their delay or backoff to end.
	Delayed int
	// Leased counts jobs under a valid lease.
	Leased int
	// Dead counts dead-lettered jobs.
	Dead int
}

// Defaults of Config.
const (
	DefaultMaxAttempts = 3
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
)

// Config configures a queue's retry policy. The zero value is the default
// policy.
type Config struct {
	// MaxAttempts is how many failed attempts (a Nack or an expired lease) a
	// job gets before it goes to the dead-letter state. Defaults to 3.
	MaxAttempts int
	// BackoffBase is the backoff after a job's first failed attempt; it
	// doubles with every further failure. Defaults to 1 second.
	BackoffBase time.Duration
	// BackoffMax caps the backoff. It must not be less than BackoffBase.
	// Defaults to 5 minutes.
	BackoffMax time.Duration
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffBase)
	}
	return c
}

// Validate reports whether c, with defaults applied, is valid. Its error
// wraps ErrInvalid.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.MaxAttempts < 1:
		return fmt.Errorf("queue config: MaxAttempts %d is less than 1: %w", c.MaxAttempts, ErrInvalid)
	case c.BackoffBase < 0:
		return fmt.Errorf("queue config: BackoffBase %s is negative: %w", c.BackoffBase, ErrInvalid)
	case c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("queue config: BackoffMax %s is less than BackoffBase %s: %w", c.BackoffMax, c.BackoffBase, ErrInvalid)
	}
	return nil
}

// Backoff returns how long a job stays invisible after its failures-th
// failed attempt: BackoffBase * 2^(failures-1), capped at BackoffMax, of
// which a random half is taken off (jitter), so the result lies between half
// of that and all of it. Call it on a Config with defaults applied.
func (c Config) Backoff(failures int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < failures && d < c.BackoffMax; i++ {
		if d > c.BackoffMax/2 {
			d = c.BackoffMax
			break
		}
		d *= 2
	}
	d = min(d, c.BackoffMax)
	if d <= 1 {
		return d
	}
	half := d / 2
	return d - half + rand.N(half+1)
}
