// Package boltstore is the bbolt implementation of store.Store: studies and
// trials as JSON records in one bbolt file, which the embedded default
// shares with its job queue.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

var (
	bucketStudies = []byte("studies")      // study ID -> JSON
	bucketNames   = []byte("study_names")  // study name -> study ID
	bucketTrials  = []byte("study_trials") // study ID -> bucket: big-endian number -> JSON
)

// Store keeps studies and trials in a bbolt database.
type Store struct {
	db *bolt.DB
}

// New returns a store over db, creating its buckets if needed.
func New(db *bolt.DB) (*Store, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketStudies, bucketNames, bucketTrials} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create store buckets: %w", err)
	}
	return &Store{db: db}, nil
}

// CreateStudy implements store.Store.
func (s *Store) CreateStudy(ctx context.Context, st *hptype.Study) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		studies, names := tx.Bucket(bucketStudies), tx.Bucket(bucketNames)
		if studies.Get([]byte(st.ID)) != nil {
			return fmt.Errorf("study id %q: %w", st.ID, hptype.ErrExists)
		}
		if names.Get([]byte(st.Name)) != nil {
			return fmt.Errorf("study name %q: %w", st.Name, hptype.ErrExists)
		}
		if err := putJSON(studies, []byte(st.ID), st); err != nil {
			return err
		}
		if err := names.Put([]byte(st.Name), []byte(st.ID)); err != nil {
			return err
		}
		_, err := tx.Bucket(bucketTrials).CreateBucket([]byte(st.ID))
		return err
	})
}

// GetStudy implements store.Store.
func (s *Store) GetStudy(ctx context.Context, idOrName string) (*hptype.Study, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var st hptype.Study
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketStudies).Get([]byte(idOrName))
		if raw == nil {
			if id := tx.Bucket(bucketNames).Get([]byte(idOrName)); id != nil {
				raw = tx.Bucket(bucketStudies).Get(id)
			}
		}
		if raw == nil {
			return fmt.Errorf("study %q: %w", idOrName, hptype.ErrNotFound)
		}
		return json.Unmarshal(raw, &st)
	})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// ListStudies implements store.Store.
func (s *Store) ListStudies(ctx context.Context) ([]*hptype.Study, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var list []*hptype.Study
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStudies).ForEach(func(_, raw []byte) error {
			var st hptype.Study
			if err := json.Unmarshal(raw, &st); err != nil {
				return err
			}
			list = append(list, &st)
			return nil
		})
	})
	sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt.Before(list[j].CreatedAt) })
	return list, err
}

// UpdateStudy implements store.Store.
func (s *Store) UpdateStudy(ctx context.Context, st *hptype.Study) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	next := *st
	next.Version++
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStudies)
		var cur hptype.Study
		if err := getJSON(b, []byte(st.ID), &cur); err != nil {
			return fmt.Errorf("study %q: %w", st.ID, err)
		}
		if cur.Version != st.Version {
			return fmt.Errorf("study %q version %d, stored %d: %w", st.ID, st.Version, cur.Version, hptype.ErrConflict)
		}
		return putJSON(b, []byte(st.ID), &next)
	})
	if err == nil {
		st.Version = next.Version
	}
	return err
}

// CreateTrial implements store.Store.
func (s *Store) CreateTrial(ctx context.Context, t *hptype.Trial) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := trialBucket(tx, t.Study)
		if err != nil {
			return err
		}
		key := trialKey(t.Number)
		if b.Get(key) != nil {
			return fmt.Errorf("trial %d of study %q: %w", t.Number, t.Study, hptype.ErrExists)
		}
		return putJSON(b, key, t)
	})
}

// GetTrial implements store.Store.
func (s *Store) GetTrial(ctx context.Context, studyID string, number int) (*hptype.Trial, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *hptype.Trial
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := trialBucket(tx, studyID)
		if err != nil {
			return err
		}
		raw := b.Get(trialKey(number))
		if raw == nil {
			return fmt.Errorf("trial %d of study %q: %w", number, studyID, hptype.ErrNotFound)
		}
		t, err = decodeTrial(raw)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ListTrials implements store.Store.
func (s *Store) ListTrials(ctx context.Context, studyID string) ([]*hptype.Trial, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var list []*hptype.Trial
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := trialBucket(tx, studyID)
		if err != nil {
			return err
		}
		return b.ForEach(func(_, raw []byte) error {
			t, err := decodeTrial(raw)
			if err != nil {
				return err
			}
			list = append(list, t)
			return nil
		})
	})
	return list, err
}

// UpdateTrial implements store.Store.
func (s *Store) UpdateTrial(ctx context.Context, t *hptype.Trial) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	next := *t
	next.Version++
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := trialBucket(tx, t.Study)
		if err != nil {
			return err
		}
		key := trialKey(t.Number)
		var cur hptype.Trial
		if err := getJSON(b, key, &cur); err != nil {
			return fmt.Errorf("trial %d of study %q: %w", t.Number, t.Study, err)
		}
		if cur.Version != t.Version {
			return fmt.Errorf("trial %d of study %q version %d, stored %d: %w", t.Number, t.Study, t.Version, cur.Version, hptype.ErrConflict)
		}
		return putJSON(b, key, &next)
	})
	if err == nil {
		t.Version = next.Version
	}
	return err
}

func trialBucket(tx *bolt.Tx, studyID string) (*bolt.Bucket, error) {
	b := tx.Bucket(bucketTrials).Bucket([]byte(studyID))
	if b == nil {
		return nil, fmt.Errorf("study %q: %w", studyID, hptype.ErrNotFound)
	}
	return b, nil
}

func trialKey(n int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func getJSON(b *bolt.Bucket, key []byte, v any) error {
	raw := b.Get(key)
	if raw == nil {
		return hptype.ErrNotFound
	}
	return json.Unmarshal(raw, v)
}

// decodeTrial decodes a trial and gives its parameters back their types:
// whole numbers as int64, other numbers as float64.
func decodeTrial(raw []byte) (*hptype.Trial, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var t hptype.Trial
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("decode trial: %w", err)
	}
	for k, v := range t.Params {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			t.Params[k] = i
		} else if f, err := n.Float64(); err == nil {
			t.Params[k] = f
		}
	}
	return &t, nil
}
