package fsblob_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/blobtest"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
)

func TestConformance(t *testing.T) {
	blobtest.Exercise(t, func(t *testing.T) blob.Store {
		s, err := fsblob.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestTempFilesHidden(t *testing.T) {
	root := t.TempDir()
	s, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.Put(ctx, "d/obj", strings.NewReader("x"), 1, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of Put leaves behind.
	if err := os.WriteFile(filepath.Join(root, "d", ".blob-tmp-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "")
	if err != nil || len(infos) != 1 || infos[0].Key != "d/obj" {
		t.Errorf("List = %+v, %v; want only d/obj", infos, err)
	}
	err = s.Put(ctx, "d/.blob-tmp-123", strings.NewReader("x"), 1, blob.PutOptions{})
	if !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Put of a temporary file's name = %v, want ErrInvalidKey", err)
	}
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	s, err := fsblob.New(filepath.Join(root, "new", "store"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.ToSlash(filepath.Join(root, "new", "store")); s.URI() != want {
		t.Errorf("URI() = %q, want %q", s.URI(), want)
	}
	ctx := t.Context()
	if err := s.Put(ctx, "a/b/c", strings.NewReader("abc"), 3, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.Root(), "a", "b", "c"))
	if err != nil || string(got) != "abc" {
		t.Errorf("the object's file holds %q, %v; want abc", got, err)
	}

	// A key cannot be both an object and a directory of objects.
	err = s.Put(ctx, "a/b/c/d", strings.NewReader("x"), 1, blob.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), `"a/b/c" holds an object`) {
		t.Errorf("Put under an object = %v, want an error naming a/b/c", err)
	}
	for _, ifNotExists := range []bool{false, true} {
		err = s.Put(ctx, "a/b", strings.NewReader("x"), 1, blob.PutOptions{IfNotExists: ifNotExists})
		if err == nil || errors.Is(err, blob.ErrExists) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("Put over a directory (IfNotExists %v) = %v, want an error saying it is a directory", ifNotExists, err)
		}
	}

	// Delete removes the directories it empties, not the root.
	if err := s.Delete(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(s.Root())
	if err != nil || len(entries) != 0 {
		t.Errorf("root after deleting its only object holds %v, %v; want nothing", entries, err)
	}

	// The root must be a directory.
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fsblob.New(file); err == nil {
		t.Errorf("New(%s), a file, succeeded", file)
	}
}

// Delete removes the directories it empties while other Puts make them
// again: neither may fail.
func TestPutDeleteRace(t *testing.T) {
	s, err := fsblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				key := fmt.Sprintf("x/y/z/%d-%d", w, i)
				if err := s.Put(ctx, key, strings.NewReader("v"), 1, blob.PutOptions{IfNotExists: i%2 == 0}); err != nil {
					t.Errorf("Put(%q) = %v", key, err)
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%q) = %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if infos, err := s.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("List after the race = %v, %v; want nothing", infos, err)
	}
}
