// Package fsblob implements blob.Store on a local directory: each object is
// a file under the store's root, at the key's path.
//
// Put writes a temporary file beside the final one (named ".blob-tmp-*"),
// fsyncs it, moves it into place with rename(2) — or, for IfNotExists,
// link(2), which fails atomically when the name is taken — and fsyncs the
// directory, so readers never see part of an object and a written object
// survives a crash. A crash in the middle of Put can leave a temporary file
// behind; List never shows them.
//
// A directory cannot be a file too, so a root cannot hold both an object
// "a" and objects under "a/"; such a Put fails with a clear error. Objects
// are created with mode 0600 and directories with mode 0755 (less the
// umask).
package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/internal/sized"
)

// tempPrefix starts the names of Put's temporary files. Keys may not have
// an element that starts with it.
const tempPrefix = ".blob-tmp-"

// copyBuffers holds the buffers Put copies objects through: 1 MiB, so a
// large object takes few write calls.
var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// onlyWriter hides *os.File's ReadFrom, which would copy through a 32 KiB
// buffer of its own.
type onlyWriter struct{ io.Writer }

// Store is a blob.Store on a local directory. It is safe for concurrent
// use, also by several processes sharing the root.
type Store struct {
	root string
}

var _ blob.Store = (*Store)(nil)

// New opens the store rooted at the directory root, creating it (and its
// parents) when missing. A relative root is taken from the working
// directory.
func New(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("fsblob: the root directory is empty; give the directory that holds the objects")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsblob: resolve root %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("fsblob: create root %s: %w (check that the path is a directory you can write)", abs, err)
	}
	return &Store{root: abs}, nil
}

// Root returns the store's absolute root directory.
func (s *Store) Root() string { return s.root }

// URI returns "file://" and the root, e.g. "file:///var/hpsearch/ckpt".
func (s *Store) URI() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(s.root)}).String()
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("fsblob: put: %w", err)
	}
	if size < 0 {
		return fmt.Errorf("fsblob: put %q: negative size %d", key, size)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	path := s.path(key)
	dir := filepath.Dir(path)
	tmp, err := s.createTemp(key, dir)
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	renamed := false
	defer func() {
		_ = tmp.Close()
		if !renamed {
			// After a link or a failure the temporary name must go.
			_ = os.Remove(tmpName)
		}
	}()
	bufp := copyBuffers.Get().(*[]byte)
	_, err = io.CopyBuffer(onlyWriter{tmp}, sized.NewReader(ctx, r, size), *bufp)
	copyBuffers.Put(bufp)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("fsblob: put %q: %w", key, ctxErr)
		}
		return fmt.Errorf("fsblob: put %q: write %s: %w", key, tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsblob: put %q: fsync %s: %w", key, tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("fsblob: put %q: close %s: %w", key, tmpName, err)
	}
	if opts.IfNotExists {
		err = os.Link(tmpName, path)
	} else {
		err = os.Rename(tmpName, path)
		renamed = err == nil
	}
	if err != nil {
		if fi, statErr := os.Lstat(path); statErr == nil && fi.IsDir() {
			return fmt.Errorf("fsblob: put %q: %s is a directory holding other objects (keys under %q/); the filesystem store cannot hold an object there too", key, path, key)
		}
		if opts.IfNotExists && errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("fsblob: put %q in %s: %w", key, s.URI(), blob.ErrExists)
		}
		return fmt.Errorf("fsblob: put %q: move the object into place: %w", key, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	return nil
}

// createTemp makes the directory dir of key's object and a temporary file
// in it.
func (s *Store) createTemp(key, dir string) (*os.File, error) {
	for attempt := 1; ; attempt++ {
		err := s.mkdirs(key, dir)
		if err == nil {
			var f *os.File
			f, err = os.CreateTemp(dir, tempPrefix+"*")
			if err == nil {
				return f, nil
			}
			err = fmt.Errorf("fsblob: put %q: create a temporary file in %s: %w (check that the directory is writable)", key, dir, err)
		}
		// A concurrent Delete removes the directories it empties; it may
		// have removed one of ours before we used it. Make them again.
		if !errors.Is(err, fs.ErrNotExist) || attempt == 100 {
			return nil, err
		}
	}
}

// mkdirs makes dir and the missing directories between it and the root,
// fsyncing the parent of each one made so that they survive a crash.
func (s *Store) mkdirs(key, dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(s.root, dir)
	if err != nil {
		return fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	var made []string
	cur := s.root
	for elem := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, elem)
		err := os.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			made = append(made, parent)
		case errors.Is(err, fs.ErrExist):
			if fi, statErr := os.Stat(cur); statErr == nil && !fi.IsDir() {
				held := filepath.ToSlash(strings.TrimPrefix(cur, s.root+string(filepath.Separator)))
				return fmt.Errorf("fsblob: put %q: %q holds an object, and the filesystem store cannot also hold keys under it; choose keys where no key is a directory of another", key, held)
			}
		default:
			return fmt.Errorf("fsblob: put %q: create directory %s: %w (check that the store's root is writable)", key, cur, err)
		}
	}
	for _, d := range made {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("fsblob: put %q: %w", key, err)
		}
	}
	return nil
}

// Get implements blob.Store. Reading the object fails once ctx is done.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("fsblob: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsblob: get %q: %w", key, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("fsblob: get %q in %s: %w", key, s.URI(), blob.ErrNotFound)
		}
		return nil, fmt.Errorf("fsblob: get %q: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("fsblob: get %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("fsblob: get %q in %s: %w (the path is a directory)", key, s.URI(), blob.ErrNotFound)
	}
	return &reader{ctx: ctx, f: f}, nil
}

// reader is an object opened by Get; it stops once the Get's ctx is done.
type reader struct {
	ctx context.Context
	f   *os.File
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.f.Read(p)
}

func (r *reader) Close() error { return r.f.Close() }

// List implements blob.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Info, error) {
	if err := blob.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("fsblob: list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsblob: list %q: %w", prefix, err)
	}
	// The prefix is a directory (up to its last slash) and the start of a
	// name in it.
	dirKey, namePrefix := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey, namePrefix = prefix[:i], prefix[i+1:]
	}
	dir := s.root
	if dirKey != "" {
		dir = s.path(dirKey)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil
		}
		return nil, fmt.Errorf("fsblob: list %q: %w", prefix, err)
	}
	var infos []blob.Info
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), namePrefix) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(dir, e.Name()), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				// Deleted while we walked: not an object any more.
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return ctx.Err()
			}
			if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), tempPrefix) {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, err := filepath.Rel(s.root, path)
			if err != nil {
				return err
			}
			infos = append(infos, blob.Info{Key: filepath.ToSlash(rel), Size: fi.Size(), Modified: fi.ModTime()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fsblob: list %q in %s: %w", prefix, s.URI(), err)
		}
	}
	slices.SortFunc(infos, func(a, b blob.Info) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete implements blob.Store. It also removes the directories it leaves
// empty, up to the root.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		if err := checkKey(key); err != nil {
			return fmt.Errorf("fsblob: delete: %w", err)
		}
	}
	toSync := map[string]bool{}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("fsblob: delete %q: %w", key, err)
		}
		path := s.path(key)
		// unlink, not os.Remove: a directory is not an object, so it is
		// not deleted.
		err := syscall.Unlink(path)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
			errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EPERM):
			// No object under key (a missing path, or a directory:
			// Linux says EISDIR, POSIX allows EPERM).
			if fi, statErr := os.Lstat(path); statErr == nil && !fi.IsDir() {
				return fmt.Errorf("fsblob: delete %q: unlink %s: %w", key, path, err)
			}
			continue
		default:
			return fmt.Errorf("fsblob: delete %q: unlink %s: %w (check the directory's permissions)", key, path, err)
		}
		toSync[s.removeEmptyDirs(filepath.Dir(path))] = true
	}
	for dir := range toSync {
		if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fsblob: delete: %w", err)
		}
	}
	return nil
}

// removeEmptyDirs removes dir and its parents below the root while they
// are empty, and returns the first directory it left, whose entries changed.
func (s *Store) removeEmptyDirs(dir string) string {
	for dir != s.root {
		// rmdir, not os.Remove: never unlink an object that a concurrent
		// Put placed where a directory was.
		if syscall.Rmdir(dir) != nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	return dir
}

func (s *Store) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// checkKey applies blob.CheckKey and keeps the temporary files' names free.
func checkKey(key string) error {
	if err := blob.CheckKey(key); err != nil {
		return err
	}
	for elem := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(elem, tempPrefix) {
			return fmt.Errorf("%w: key %q has an element starting with %q, which the filesystem store keeps for its temporary files", blob.ErrInvalidKey, key, tempPrefix)
		}
	}
	return nil
}

// syncDir fsyncs a directory, making the entries made or removed in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s to fsync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
