// Package boltqueue implements queue.Queue on bbolt, in its own file (Open)
// or in buckets of a database shared with other state (New).
//
// Jobs are delivered by visibility time, then by the order they were
// enqueued: ready jobs leave in the order they became visible, and a job
// whose lease expired takes its place in that order at its expiry time.
//
// # Layout
//
// All of a queue's data lives under one top-level bucket (DefaultBucket
// unless WithBucket names another), in three nested buckets:
//
//   - jobs: job ID → the job's record (JSON);
//   - index: visible-at (big-endian unix nanoseconds) + sequence → job ID,
//     one entry per job that is waiting or leased. A waiting job's entry is
//     the time it becomes visible and a leased job's is its lease expiry, so
//     Lease finds both ready jobs and expired leases with one cursor seek;
//   - leases: token → job ID, one entry per lease that has not ended.
//
// Expired leases are processed lazily: the next Lease that reaches one
// counts the failed attempt (and dead-letters the job if it was the last).
// Get, Stats and Dead report such a job in the state it is in at the time of
// the call. Each call is one bbolt transaction; the calls that write commit
// once, with an fsync.
package boltqueue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// DefaultBucket is the name of the top-level bucket that holds a queue
// unless WithBucket names another.
const DefaultBucket = "queue"

// lockTimeout is how long Open waits for the lock of a file that another
// process holds.
const lockTimeout = time.Second

// ErrInUse is returned by Open when another process has the file open.
var ErrInUse = errors.New("the state file is in use by another process")

var (
	jobsBucket   = []byte("jobs")
	indexBucket  = []byte("index")
	leasesBucket = []byte("leases")
)

// Option is a rarely needed setting of Open and New.
type Option func(*options)

type options struct {
	bucket string
}

// WithBucket names the top-level bucket that holds the queue, so that one
// database can hold several queues. Defaults to DefaultBucket.
func WithBucket(name string) Option {
	return func(o *options) { o.bucket = name }
}

// Queue is a queue.Queue stored in bbolt. Use one Queue per bucket in a
// process: a Lease waiting on one Queue is not woken by jobs enqueued
// through another.
type Queue struct {
	db     *bolt.DB
	ownsDB bool
	bucket []byte
	cfg    queue.Config

	mu sync.Mutex
	// changed is closed, and replaced, when a job may have become visible
	// sooner than a waiting Lease expects.
	changed chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

var _ queue.Queue = (*Queue)(nil)

// Open opens the queue in the bbolt file at path, creating the file if it
// does not exist. The file is locked while it is open: Open fails with an
// error wrapping ErrInUse if another process holds it. Close closes the file.
func Open(path string, cfg queue.Config, opts ...Option) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("boltqueue: open %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("boltqueue: open %s: %w (its lock was not released within %s; stop the other process or use another file): %w",
			path, ErrInUse, lockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("boltqueue: open %s: %w", path, err)
	}
	q, err := New(db, cfg, opts...)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	q.ownsDB = true
	return q, nil
}

// New returns the queue kept in db, creating its buckets if needed. Close
// does not close db.
func New(db *bolt.DB, cfg queue.Config, opts ...Option) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("boltqueue: %w", err)
	}
	o := options{bucket: DefaultBucket}
	for _, opt := range opts {
		opt(&o)
	}
	if o.bucket == "" {
		return nil, fmt.Errorf("boltqueue: empty bucket name: %w", queue.ErrInvalid)
	}
	q := &Queue{
		db:      db,
		bucket:  []byte(o.bucket),
		cfg:     cfg.WithDefaults(),
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	err := db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(q.bucket)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{jobsBucket, indexBucket, leasesBucket} {
			if _, err := root.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltqueue: create buckets in %q: %w", o.bucket, err)
	}
	return q, nil
}

// Close wakes waiting Lease calls, makes further calls fail with
// queue.ErrClosed, and closes the file if Open opened it.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() {
		close(q.closed)
		if q.ownsDB {
			if err := q.db.Close(); err != nil {
				q.closeErr = fmt.Errorf("boltqueue: close: %w", err)
			}
		}
	})
	return q.closeErr
}

// Enqueue implements queue.Queue.
func (q *Queue) Enqueue(ctx context.Context, jobs ...queue.Job) (queue.EnqueueResult, error) {
	var res queue.EnqueueResult
	for _, j := range jobs {
		if err := j.Validate(); err != nil {
			return res, fmt.Errorf("boltqueue: enqueue: %w", err)
		}
	}
	if err := q.check(ctx); err != nil {
		return res, fmt.Errorf("boltqueue: enqueue: %w", err)
	}
	now := time.Now().UnixNano()
	err := q.update(func(b buckets) error {
		for _, j := range jobs {
			if b.jobs.Get([]byte(j.ID)) != nil {
				res.Existing = append(res.Existing, j.ID)
				continue
			}
			r := &record{
				ID:         j.ID,
				Payload:    j.Payload,
				Delay:      j.Delay,
				EnqueuedAt: now,
				State:      stateWaiting,
			}
			if err := b.schedule(r, now+int64(j.Delay)); err != nil {
				return err
			}
			if err := b.put(r); err != nil {
				return err
			}
			res.Added = append(res.Added, j.ID)
		}
		return nil
	})
	if err != nil {
		return queue.EnqueueResult{}, fmt.Errorf("boltqueue: enqueue: %w", err)
	}
	if len(res.Added) > 0 {
		q.notify()
	}
	return res, nil
}

// Lease implements queue.Queue.
func (q *Queue) Lease(ctx context.Context, p queue.LeaseParams) ([]queue.Lease, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("boltqueue: %w", err)
	}
	deadline := time.Now().Add(p.Wait)
	for {
		if err := q.check(ctx); err != nil {
			return nil, fmt.Errorf("boltqueue: lease: %w", err)
		}
		// Take the channel before looking, so that a change committed after
		// the look closes it.
		changed := q.changedChan()
		leases, next, err := q.lease(p)
		if err != nil || len(leases) > 0 {
			return leases, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, nil
		}
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		timer := time.NewTimer(wait)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
		case <-q.closed:
		}
		timer.Stop()
	}
}

// lease leases up to p.Max visible jobs in one transaction. When it leases
// none, next is when the first job becomes visible (zero if there is none).
func (q *Queue) lease(p queue.LeaseParams) (leases []queue.Lease, next time.Time, err error) {
	now := time.Now().UnixNano()
	expires := now + int64(p.Visibility)
	err = q.update(func(b buckets) error {
		for len(leases) < p.Max {
			// Every due entry is removed or moved past now below, so the
			// first entry is always the next one to look at.
			k, v := b.index.Cursor().First()
			if k == nil {
				break
			}
			if at := keyTime(k); at > now {
				next = time.Unix(0, at)
				break
			}
			r, err := b.get(v)
			if err != nil {
				return err
			}
			if r.State == stateLeased {
				if err := b.leases.Delete([]byte(r.Token)); err != nil {
					return err
				}
				q.expire(r)
				if r.State == stateDead {
					if err := b.unschedule(r); err != nil {
						return err
					}
					if err := b.put(r); err != nil {
						return err
					}
					continue
				}
			}
			token := rand.Text()
			if err := b.unschedule(r); err != nil {
				return err
			}
			r.State, r.Token, r.Owner = stateLeased, token, p.Owner
			if err := b.schedule(r, expires); err != nil {
				return err
			}
			if err := b.leases.Put([]byte(token), []byte(r.ID)); err != nil {
				return err
			}
			if err := b.put(r); err != nil {
				return err
			}
			leases = append(leases, queue.Lease{
				Job:     r.job(),
				Token:   token,
				Attempt: r.Failures + 1,
				Expires: time.Unix(0, expires),
			})
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("boltqueue: lease: %w", err)
	}
	return leases, next, nil
}

// Extend implements queue.Queue.
func (q *Queue) Extend(ctx context.Context, token string, visibility time.Duration) (time.Time, error) {
	if err := queue.ValidateVisibility(visibility); err != nil {
		return time.Time{}, fmt.Errorf("boltqueue: extend: %w", err)
	}
	if err := q.check(ctx); err != nil {
		return time.Time{}, fmt.Errorf("boltqueue: extend: %w", err)
	}
	now := time.Now().UnixNano()
	expires := now + int64(visibility)
	err := q.update(func(b buckets) error {
		r, err := b.holder(token, now)
		if err != nil {
			return err
		}
		if err := b.unschedule(r); err != nil {
			return err
		}
		if err := b.schedule(r, expires); err != nil {
			return err
		}
		return b.put(r)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("boltqueue: extend: %w", err)
	}
	return time.Unix(0, expires), nil
}

// Ack implements queue.Queue.
func (q *Queue) Ack(ctx context.Context, tokens ...string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("boltqueue: ack: %w", err)
	}
	var stale []string
	now := time.Now().UnixNano()
	err := q.update(func(b buckets) error {
		seen := make(map[string]bool, len(tokens))
		for _, token := range tokens {
			if seen[token] {
				continue
			}
			seen[token] = true
			r, err := b.holder(token, now)
			if errors.Is(err, queue.ErrLeaseLost) {
				stale = append(stale, token)
				continue
			}
			if err != nil {
				return err
			}
			if err := b.unschedule(r); err != nil {
				return err
			}
			if err := b.leases.Delete([]byte(token)); err != nil {
				return err
			}
			if err := b.jobs.Delete([]byte(r.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltqueue: ack: %w", err)
	}
	if len(stale) > 0 {
		return fmt.Errorf("boltqueue: ack: %w", &queue.LeaseLostError{Tokens: stale})
	}
	return nil
}

// Nack implements queue.Queue.
func (q *Queue) Nack(ctx context.Context, token, cause string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("boltqueue: nack: %w", err)
	}
	now := time.Now().UnixNano()
	err := q.update(func(b buckets) error {
		r, err := b.end(token, now)
		if err != nil {
			return err
		}
		r.Failures++
		r.Cause = cause
		if r.Failures >= q.cfg.MaxAttempts {
			r.State, r.DiedAt = stateDead, now
		} else if err := b.schedule(r, now+int64(q.cfg.Backoff(r.Failures))); err != nil {
			return err
		}
		return b.put(r)
	})
	if err != nil {
		return fmt.Errorf("boltqueue: nack: %w", err)
	}
	q.notify()
	return nil
}

// Release implements queue.Queue.
func (q *Queue) Release(ctx context.Context, token string) error {
	if err := q.check(ctx); err != nil {
		return fmt.Errorf("boltqueue: release: %w", err)
	}
	now := time.Now().UnixNano()
	err := q.update(func(b buckets) error {
		r, err := b.end(token, now)
		if err != nil {
			return err
		}
		if err := b.schedule(r, now); err != nil {
			return err
		}
		return b.put(r)
	})
	if err != nil {
		return fmt.Errorf("boltqueue: release: %w", err)
	}
	q.notify()
	return nil
}

// Get implements queue.Queue.
func (q *Queue) Get(ctx context.Context, id string) (queue.JobInfo, error) {
	if err := q.check(ctx); err != nil {
		return queue.JobInfo{}, fmt.Errorf("boltqueue: get %q: %w", id, err)
	}
	var info queue.JobInfo
	now := time.Now().UnixNano()
	err := q.view(func(b buckets) error {
		v := b.jobs.Get([]byte(id))
		if v == nil {
			return queue.ErrNotFound
		}
		r, err := decode(v)
		if err != nil {
			return err
		}
		info = q.info(r, now)
		return nil
	})
	if err != nil {
		return queue.JobInfo{}, fmt.Errorf("boltqueue: get %q: %w", id, err)
	}
	return info, nil
}

// Stats implements queue.Queue. It reads every job.
func (q *Queue) Stats(ctx context.Context) (queue.Stats, error) {
	if err := q.check(ctx); err != nil {
		return queue.Stats{}, fmt.Errorf("boltqueue: stats: %w", err)
	}
	var st queue.Stats
	now := time.Now().UnixNano()
	err := q.view(func(b buckets) error {
		return b.jobs.ForEach(func(_, v []byte) error {
			r, err := decode(v)
			if err != nil {
				return err
			}
			switch q.info(r, now).State {
			case queue.StateReady:
				st.Ready++
			case queue.StateDelayed:
				st.Delayed++
			case queue.StateLeased:
				st.Leased++
			case queue.StateDead:
				st.Dead++
			}
			return nil
		})
	})
	if err != nil {
		return queue.Stats{}, fmt.Errorf("boltqueue: stats: %w", err)
	}
	return st, nil
}

// Dead implements queue.Queue. It reads every job.
func (q *Queue) Dead(ctx context.Context) ([]queue.JobInfo, error) {
	if err := q.check(ctx); err != nil {
		return nil, fmt.Errorf("boltqueue: dead: %w", err)
	}
	var dead []queue.JobInfo
	now := time.Now().UnixNano()
	err := q.view(func(b buckets) error {
		return b.jobs.ForEach(func(_, v []byte) error {
			r, err := decode(v)
			if err != nil {
				return err
			}
			if info := q.info(r, now); info.State == queue.StateDead {
				dead = append(dead, info)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltqueue: dead: %w", err)
	}
	slices.SortStableFunc(dead, func(a, b queue.JobInfo) int { return a.DiedAt.Compare(b.DiedAt) })
	return dead, nil
}

// expire applies the expiry of r's lease to r: a failed attempt that leaves
// the job waiting at its index entry, or dead if it was its last attempt.
// The caller deletes the lease and, for a dead job, the index entry.
func (q *Queue) expire(r *record) {
	r.Failures++
	if r.Owner != "" {
		r.Cause = fmt.Sprintf("lease of %s expired", r.Owner)
	} else {
		r.Cause = "lease expired"
	}
	r.Token, r.Owner = "", ""
	r.State = stateWaiting
	if r.Failures >= q.cfg.MaxAttempts {
		r.State, r.DiedAt = stateDead, r.At
	}
}

// info describes r as it is at now, counting an expired lease as ended.
func (q *Queue) info(r *record, now int64) queue.JobInfo {
	if r.State == stateLeased && r.At <= now {
		q.expire(r)
	}
	info := queue.JobInfo{
		Job:        r.job(),
		EnqueuedAt: time.Unix(0, r.EnqueuedAt),
		Failures:   r.Failures,
		Cause:      r.Cause,
	}
	switch r.State {
	case stateWaiting:
		info.State = queue.StateReady
		if r.At > now {
			info.State = queue.StateDelayed
		}
		info.VisibleAt = time.Unix(0, r.At)
	case stateLeased:
		info.State = queue.StateLeased
		info.Token, info.Owner, info.Expires = r.Token, r.Owner, time.Unix(0, r.At)
	case stateDead:
		info.State = queue.StateDead
		info.DiedAt = time.Unix(0, r.DiedAt)
	}
	return info
}

// check returns an error if ctx is done or q is closed.
func (q *Queue) check(ctx context.Context) error {
	select {
	case <-q.closed:
		return queue.ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != err {
			return fmt.Errorf("%w: %w", err, cause)
		}
		return err
	}
	return nil
}

func (q *Queue) changedChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

// notify wakes the Lease calls that wait.
func (q *Queue) notify() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *Queue) update(fn func(buckets) error) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		b, err := q.buckets(tx)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func (q *Queue) view(fn func(buckets) error) error {
	return q.db.View(func(tx *bolt.Tx) error {
		b, err := q.buckets(tx)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func (q *Queue) buckets(tx *bolt.Tx) (buckets, error) {
	root := tx.Bucket(q.bucket)
	if root == nil {
		return buckets{}, fmt.Errorf("bucket %q is missing", q.bucket)
	}
	b := buckets{
		jobs:   root.Bucket(jobsBucket),
		index:  root.Bucket(indexBucket),
		leases: root.Bucket(leasesBucket),
	}
	if b.jobs == nil || b.index == nil || b.leases == nil {
		return buckets{}, fmt.Errorf("bucket %q lacks one of its jobs, index and leases buckets", q.bucket)
	}
	return b, nil
}

// buckets are a queue's buckets in one transaction.
type buckets struct {
	jobs, index, leases *bolt.Bucket
}

func (b buckets) get(id []byte) (*record, error) {
	v := b.jobs.Get(id)
	if v == nil {
		return nil, fmt.Errorf("job %q: record missing", id)
	}
	return decode(v)
}

func (b buckets) put(r *record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("job %q: encode record: %w", r.ID, err)
	}
	return b.jobs.Put([]byte(r.ID), v)
}

// schedule gives r an index entry at at. The caller puts r.
func (b buckets) schedule(r *record, at int64) error {
	seq, err := b.index.NextSequence()
	if err != nil {
		return err
	}
	r.At, r.Seq = at, seq
	return b.index.Put(indexKey(at, seq), []byte(r.ID))
}

// unschedule deletes r's index entry. The caller puts r.
func (b buckets) unschedule(r *record) error {
	if err := b.index.Delete(indexKey(r.At, r.Seq)); err != nil {
		return err
	}
	r.At, r.Seq = 0, 0
	return nil
}

// holder returns the job that token holds a valid lease on, or
// queue.ErrLeaseLost.
func (b buckets) holder(token string, now int64) (*record, error) {
	id := b.leases.Get([]byte(token))
	if id == nil {
		return nil, queue.ErrLeaseLost
	}
	r, err := b.get(id)
	if err != nil {
		return nil, err
	}
	if r.State != stateLeased || r.Token != token || r.At <= now {
		return nil, queue.ErrLeaseLost
	}
	return r, nil
}

// end ends the valid lease of token and returns its job, waiting and with
// no index entry. The caller schedules it again or marks it dead, and puts
// it.
func (b buckets) end(token string, now int64) (*record, error) {
	r, err := b.holder(token, now)
	if err != nil {
		return nil, err
	}
	if err := b.unschedule(r); err != nil {
		return nil, err
	}
	if err := b.leases.Delete([]byte(token)); err != nil {
		return nil, err
	}
	r.State, r.Token, r.Owner = stateWaiting, "", ""
	return r, nil
}

// The states a record is stored in. Ready and delayed are both waiting; the
// time tells them apart, as it tells an expired lease from a valid one.
const (
	stateWaiting = "waiting"
	stateLeased  = "leased"
	stateDead    = "dead"
)

// record is a job as stored in the jobs bucket.
type record struct {
	ID         string        `json:"id"`
	Payload    []byte        `json:"payload,omitempty"`
	Delay      time.Duration `json:"delay,omitempty"`
	EnqueuedAt int64         `json:"enqueued_at"`
	State      string        `json:"state"`
	// At and Seq make the job's index entry while it is waiting (At is when
	// it becomes visible) or leased (At is when the lease expires).
	At       int64  `json:"at,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Failures int    `json:"failures,omitempty"`
	Cause    string `json:"cause,omitempty"`
	Token    string `json:"token,omitempty"`
	Owner    string `json:"owner,omitempty"`
	DiedAt   int64  `json:"died_at,omitempty"`
}

func decode(v []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decode job record: %w", err)
	}
	return &r, nil
}

func (r *record) job() queue.Job {
	return queue.Job{ID: r.ID, Payload: r.Payload, Delay: r.Delay}
}

func indexKey(at int64, seq uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(at))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

func keyTime(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k))
}
