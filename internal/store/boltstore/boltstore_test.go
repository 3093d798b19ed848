package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hpsearch/hpsearch/internal/store"
	"github.com/hpsearch/hpsearch/internal/store/boltstore"
	"github.com/hpsearch/hpsearch/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := boltstore.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
