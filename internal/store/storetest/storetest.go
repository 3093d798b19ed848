// Package storetest is the conformance suite every store.Store
// implementation runs.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/store"
)

// Exercise runs the suite. newStore returns an empty store for one subtest.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	study := func(id, name string) *hptype.Study {
		return &hptype.Study{ID: id, Name: name, State: hptype.StudyRunning, Spec: []byte("name: " + name), CreatedAt: time.Unix(1700000000, 0).UTC()}
	}
	trial := func(studyID string, n int) *hptype.Trial {
		return &hptype.Trial{Study: studyID, Number: n, State: hptype.TrialQueued, Params: hptype.Params{"lr": 0.1, "units": int64(32), "opt": "sgd"}}
	}

	t.Run("StudyCreateGetByIDAndName", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"id1", "alpha"} {
			got, err := s.GetStudy(ctx, key)
			if err != nil {
				t.Fatalf("GetStudy(%q): %v", key, err)
			}
			if got.ID != "id1" || got.Name != "alpha" || string(got.Spec) != "name: alpha" {
				t.Fatalf("GetStudy(%q) = %+v", key, got)
			}
		}
		if _, err := s.GetStudy(ctx, "nope"); !errors.Is(err, hptype.ErrNotFound) {
			t.Fatalf("GetStudy(nope) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("StudyDuplicateIDOrName", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		for _, dup := range []*hptype.Study{study("id1", "beta"), study("id2", "alpha")} {
			if err := s.CreateStudy(ctx, dup); !errors.Is(err, hptype.ErrExists) {
				t.Fatalf("CreateStudy(%s/%s) error = %v, want ErrExists", dup.ID, dup.Name, err)
			}
		}
		list, err := s.ListStudies(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListStudies = %d studies, %v; want 1", len(list), err)
		}
	})

	t.Run("StudyListOrder", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for i, name := range []string{"c", "a", "b"} {
			st := study(fmt.Sprintf("id-%s", name), name)
			st.CreatedAt = st.CreatedAt.Add(time.Duration(i) * time.Second)
			if err := s.CreateStudy(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		list, err := s.ListStudies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, st := range list {
			names = append(names, st.Name)
		}
		if fmt.Sprint(names) != "[c a b]" {
			t.Fatalf("ListStudies order = %v, want [c a b] (oldest first)", names)
		}
	})

	t.Run("StudyUpdateCompareAndSet", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		a, _ := s.GetStudy(ctx, "id1")
		b, _ := s.GetStudy(ctx, "id1")
		a.State = hptype.StudyCompleted
		if err := s.UpdateStudy(ctx, a); err != nil {
			t.Fatal(err)
		}
		b.State = hptype.StudyFailed
		if err := s.UpdateStudy(ctx, b); !errors.Is(err, hptype.ErrConflict) {
			t.Fatalf("stale UpdateStudy error = %v, want ErrConflict", err)
		}
		got, _ := s.GetStudy(ctx, "alpha")
		if got.State != hptype.StudyCompleted || got.Version != a.Version {
			t.Fatalf("after updates: state %s version %d, want completed version %d", got.State, got.Version, a.Version)
		}
		if err := s.UpdateStudy(ctx, study("missing", "missing")); !errors.Is(err, hptype.ErrNotFound) {
			t.Fatalf("UpdateStudy(missing) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("TrialCreateGetList", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 0, 10, 1} {
			if err := s.CreateTrial(ctx, trial("id1", n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateTrial(ctx, trial("id1", 2)); !errors.Is(err, hptype.ErrExists) {
			t.Fatalf("duplicate CreateTrial error = %v, want ErrExists", err)
		}
		if err := s.CreateTrial(ctx, trial("nostudy", 0)); !errors.Is(err, hptype.ErrNotFound) {
			t.Fatalf("CreateTrial in a missing study error = %v, want ErrNotFound", err)
		}
		list, err := s.ListTrials(ctx, "id1")
		if err != nil {
			t.Fatal(err)
		}
		var nums []int
		for _, tr := range list {
			nums = append(nums, tr.Number)
		}
		if fmt.Sprint(nums) != "[0 1 2 10]" {
			t.Fatalf("ListTrials order = %v, want [0 1 2 10]", nums)
		}
		got, err := s.GetTrial(ctx, "id1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if lr, _ := got.Params.Float("lr"); lr != 0.1 {
			t.Fatalf("param lr = %v, want 0.1", got.Params["lr"])
		}
		if u, _ := got.Params.Int("units"); u != 32 {
			t.Fatalf("param units = %v, want 32", got.Params["units"])
		}
		if _, err := s.GetTrial(ctx, "id1", 3); !errors.Is(err, hptype.ErrNotFound) {
			t.Fatalf("GetTrial(3) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("TrialCompareAndSetUnderContention", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTrial(ctx, trial("id1", 0)); err != nil {
			t.Fatal(err)
		}
		// Eight writers each try to complete the same running attempt; exactly
		// one wins, the others see ErrConflict.
		base, _ := s.GetTrial(ctx, "id1", 0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := *base
				v := float64(i)
				mine.Value = &v
				mine.State = hptype.TrialCompleted
				err := s.UpdateTrial(ctx, &mine)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, hptype.ErrConflict):
					conflicts++
				default:
					t.Errorf("UpdateTrial: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != 7 {
			t.Fatalf("wins=%d conflicts=%d, want 1 and 7", wins, conflicts)
		}
		got, _ := s.GetTrial(ctx, "id1", 0)
		if got.State != hptype.TrialCompleted || got.Version != base.Version+1 {
			t.Fatalf("trial = state %s version %d, want completed version %d", got.State, got.Version, base.Version+1)
		}
	})

	t.Run("ReturnedRecordsAreCopies", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.CreateStudy(ctx, study("id1", "alpha")); err != nil {
			t.Fatal(err)
		}
		tr := trial("id1", 0)
		if err := s.CreateTrial(ctx, tr); err != nil {
			t.Fatal(err)
		}
		tr.Params["lr"] = 99.0
		got, _ := s.GetTrial(ctx, "id1", 0)
		got.Params["lr"] = 42.0
		again, _ := s.GetTrial(ctx, "id1", 0)
		if lr, _ := again.Params.Float("lr"); lr != 0.1 {
			t.Fatalf("stored lr changed to %v without an update", lr)
		}
	})
}
