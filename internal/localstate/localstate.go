// Package localstate opens the embedded default's state: one bbolt file
// under a state directory that holds the studies, their trials and the job
// queue, plus a folder of trial logs.
package localstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/boltqueue"
	"github.com/hpsearch/hpsearch/internal/store/boltstore"
)

// DefaultDir is the state directory when neither --state nor
// HPSEARCH_STATE says otherwise.
const DefaultDir = ".hpsearch"

// ErrInUse is returned when another process holds the state file.
var ErrInUse = errors.New("state directory is in use by another hpsearch process")

// State is an open state directory.
type State struct {
	Dir    string
	LogDir string
	Store  *boltstore.Store
	db     *bolt.DB
	qcfg   queue.Config
}

// Open opens (creating if needed) the state in dir. Only one process at a
// time may hold it; a second gets ErrInUse.
func Open(dir string, qcfg queue.Config) (*State, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 500 * time.Millisecond})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w (a study is running there); wait for it to finish or stop it, or pass --state DIR to use another directory", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	st, err := boltstore.New(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &State{Dir: dir, LogDir: filepath.Join(dir, "logs"), Store: st, db: db, qcfg: qcfg}, nil
}

// Queue returns the job queue of the study with the given name; each study
// has its own, so a stopped study's jobs never reach another.
func (s *State) Queue(study string) (*boltqueue.Queue, error) {
	q, err := boltqueue.New(s.db, s.qcfg, boltqueue.WithBucket("queue/"+study))
	if err != nil {
		return nil, fmt.Errorf("open the job queue of study %q: %w", study, err)
	}
	return q, nil
}

// poolQueueConfig is the retry policy of pool queues. A job whose lease
// expired (its worker died) is answered by the next worker as a lost
// attempt, so failed deliveries are rare; the limit only stops a job that
// no worker can even decode.
var poolQueueConfig = queue.Config{MaxAttempts: 10}

// PoolQueue returns the queue of the worker pool with the given name: the
// segment jobs of the trials placed on it, which hpsearch run serves to the
// pool's workers.
func (s *State) PoolQueue(pool string) (*boltqueue.Queue, error) {
	q, err := boltqueue.New(s.db, poolQueueConfig, boltqueue.WithBucket("pool/"+pool))
	if err != nil {
		return nil, fmt.Errorf("open the queue of pool %q: %w", pool, err)
	}
	return q, nil
}

// Close closes the state file.
func (s *State) Close() error {
	return s.db.Close()
}
