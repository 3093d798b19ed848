package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hpsearch/hpsearch/internal/blob"
)

// Destination receives a checkpoint as it is restored and verified. A
// loader calls Begin, then Shard for every shard (concurrently, up to the
// Store's parallelism), then Commit once every shard has passed its
// checks, or Discard when one has not; it may then Begin again with an
// older checkpoint. Memory and Dir are the usual destinations.
type Destination interface {
	// Begin starts receiving the checkpoint m.
	Begin(m *Manifest) error
	// Shard consumes r, the bytes of the shard described by info. The
	// bytes are hashed as they are read, and r fails (with a Problem, in
	// place of io.EOF) if they turn out not to match the manifest, so a
	// destination must treat nothing as restored before Commit.
	Shard(info ShardInfo, r io.Reader) error
	// Commit makes the checkpoint restored.
	Commit() error
	// Discard drops what Begin and Shard made.
	Discard()
}

// Latest restores into dst the newest checkpoint under prefix that passes
// every check: it walks the visible checkpoints newest first, skipping
// those with a bad manifest or a missing, truncated or corrupt shard, and
// returns the manifest of the one restored along with the problems of the
// newer ones it skipped. With no verified checkpoint it returns an error
// wrapping ErrNoCheckpoint (and the problems). A failure to read (the
// store unreachable, ctx done) is an error, not a problem, so that a
// transient fault never makes a trial fall back to an older checkpoint.
func (s *Store) Latest(ctx context.Context, prefix string, dst Destination) (*Manifest, []Problem, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	dirs, err := s.scan(ctx, prefix, ckptRoot(prefix))
	if err != nil {
		return nil, nil, err
	}
	var problems []Problem
	for _, st := range dirs {
		if !st.hasManifest {
			continue
		}
		m, p, err := s.readManifest(ctx, st)
		if err == nil && m != nil {
			p, err = s.restore(ctx, m, dst)
		}
		switch {
		case err != nil:
			return nil, problems, fmt.Errorf("checkpoint: load under %s: %w", prefix, err)
		case p != nil:
			problems = append(problems, *p)
		case m != nil:
			return m, problems, nil
		}
	}
	return nil, problems, fmt.Errorf("checkpoint: load under %s in %s: %w (%d visible checkpoints had problems)",
		prefix, s.blobs.URI(), ErrNoCheckpoint, len(problems))
}

// Load restores into dst the checkpoint id under prefix, after the checks
// Latest makes. A checkpoint that fails them is an error wrapping its
// Problem; one that does not exist wraps ErrNoCheckpoint.
func (s *Store) Load(ctx context.Context, prefix string, id ID, dst Destination) (*Manifest, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: load under %s: %w", prefix, err)
	}
	dirs, err := s.scan(ctx, prefix, idDir(prefix, id)+"/")
	if err != nil {
		return nil, err
	}
	var m *Manifest
	var p *Problem
	if len(dirs) == 1 && dirs[0].hasManifest {
		m, p, err = s.readManifest(ctx, dirs[0])
	}
	if err == nil && m != nil {
		p, err = s.restore(ctx, m, dst)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("checkpoint: load under %s: %w", prefix, err)
	case p != nil:
		return nil, fmt.Errorf("checkpoint: load under %s: %w", prefix, *p)
	case m == nil:
		return nil, fmt.Errorf("checkpoint: load %s under %s in %s: %w (it has no manifest)", id, prefix, s.blobs.URI(), ErrNoCheckpoint)
	}
	return m, nil
}

// List returns the manifests of the intact checkpoints under prefix, newest
// first, and the problems of the other visible ones. It reads manifests
// only, not shard bytes.
func (s *Store) List(ctx context.Context, prefix string) ([]*Manifest, []Problem, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: list: %w", err)
	}
	return s.list(ctx, prefix, ckptRoot(prefix), -1)
}

// NewestOfAttempt returns the manifest of the newest intact checkpoint
// that attempt of segment wrote under prefix (its CreatedAt and Resource
// say how much work a crashed attempt saved), and the problems of newer
// ones of that attempt. Without one it returns an error wrapping
// ErrNoCheckpoint.
func (s *Store) NewestOfAttempt(ctx context.Context, prefix string, segment, attempt int) (*Manifest, []Problem, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: list: %w", err)
	}
	if err := checkAttempt(segment, attempt); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: list under %s: %w", prefix, err)
	}
	within := fmt.Sprintf("%s%06d.%03d.", ckptRoot(prefix), segment, attempt)
	ms, problems, err := s.list(ctx, prefix, within, 1)
	if err != nil {
		return nil, problems, err
	}
	if len(ms) == 0 {
		return nil, problems, fmt.Errorf("checkpoint: segment %d attempt %d under %s: %w", segment, attempt, prefix, ErrNoCheckpoint)
	}
	return ms[0], problems, nil
}

// list returns the manifests of up to limit (-1: all) intact checkpoints
// whose keys start with within, newest first, and the problems of the
// visible ones it read that were not intact.
func (s *Store) list(ctx context.Context, prefix, within string, limit int) ([]*Manifest, []Problem, error) {
	dirs, err := s.scan(ctx, prefix, within)
	if err != nil {
		return nil, nil, err
	}
	var (
		ms       []*Manifest
		problems []Problem
	)
	for _, st := range dirs {
		if len(ms) == limit {
			break
		}
		if !st.hasManifest {
			continue
		}
		m, p, err := s.readManifest(ctx, st)
		switch {
		case err != nil:
			return nil, problems, fmt.Errorf("checkpoint: list under %s: %w", prefix, err)
		case p != nil:
			problems = append(problems, *p)
		case m != nil:
			ms = append(ms, m)
		}
	}
	return ms, problems, nil
}

// restore hands the shards of the intact checkpoint m to dst, verifying
// them, and commits dst. It returns the Problem of a shard that fails its
// checks (having discarded dst), or an error when something other than the
// checkpoint failed.
func (s *Store) restore(ctx context.Context, m *Manifest, dst Destination) (*Problem, error) {
	if err := dst.Begin(m); err != nil {
		return nil, fmt.Errorf("restore checkpoint %s: %w", m.ID, err)
	}
	err := s.parallel(ctx, len(m.Shards), func(ctx context.Context, i int) error {
		return s.restoreShard(ctx, m, m.Shards[i], dst)
	})
	if err != nil {
		dst.Discard()
		var p Problem
		if errors.As(err, &p) {
			return &p, nil
		}
		return nil, err
	}
	if err := dst.Commit(); err != nil {
		return nil, fmt.Errorf("restore checkpoint %s: %w", m.ID, err)
	}
	return nil, nil
}

// restoreShard streams one shard into dst through a verifier. It returns a
// Problem when the shard fails its checks and another error when reading
// it or writing dst fails.
func (s *Store) restoreShard(ctx context.Context, m *Manifest, info ShardInfo, dst Destination) error {
	problem := func(err error) Problem {
		return Problem{Checkpoint: m.ID, Manifest: m.Key, Shard: info.Name, Err: err}
	}
	rc, err := s.blobs.Get(ctx, info.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return problem(fmt.Errorf("%w: no object %s", ErrMissingShard, info.Key))
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: shard %q: %w", m.ID, info.Name, err)
	}
	defer rc.Close()
	v := &verifier{r: rc, h: sha256.New(), info: info, problem: problem}
	err = dst.Shard(info, v)
	if err == nil {
		// The destination may stop after Size bytes without reading the
		// end: the size and digest checks happen there.
		_, err = io.Copy(io.Discard, v)
	}
	switch {
	case v.failed != nil:
		return *v.failed
	case err != nil:
		return fmt.Errorf("checkpoint %s: restore shard %q: %w", m.ID, info.Name, err)
	}
	return nil
}

// verifier reads a shard, hashing and counting its bytes. At the end of the
// object it returns io.EOF only if the size and the digest match the
// manifest, and a Problem otherwise; it never passes on bytes beyond the
// recorded size.
type verifier struct {
	r       io.Reader
	h       hash.Hash
	info    ShardInfo
	problem func(error) Problem
	n       int64
	// err is returned by every Read once set: io.EOF, a Problem, or the
	// error of the underlying reader.
	err error
	// failed is the Problem found, if any.
	failed *Problem
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	// Ask for at most one byte beyond the recorded size, to notice a
	// longer object.
	if left := v.info.Size - v.n; int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := v.r.Read(p)
	if over := v.n + int64(n) - v.info.Size; over > 0 {
		n -= int(over)
		v.h.Write(p[:n])
		v.n += int64(n)
		return n, v.fail(fmt.Errorf("%w: %s holds more than the %d bytes the manifest says", ErrSizeMismatch, v.info.Key, v.info.Size))
	}
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case err == io.EOF:
		if v.n < v.info.Size {
			return n, v.fail(fmt.Errorf("%w: %s ends after %d of the %d bytes the manifest says", ErrSizeMismatch, v.info.Key, v.n, v.info.Size))
		}
		if sum := hex.EncodeToString(v.h.Sum(nil)); sum != v.info.SHA256 {
			return n, v.fail(fmt.Errorf("%w: %s hashes to SHA-256 %s, the manifest says %s", ErrChecksumMismatch, v.info.Key, sum, v.info.SHA256))
		}
		v.err = io.EOF
	case err != nil:
		v.err = fmt.Errorf("read %s: %w", v.info.Key, err)
	}
	return n, v.err
}

func (v *verifier) fail(err error) error {
	p := v.problem(err)
	v.failed = &p
	v.err = p
	return p
}

// Memory is a Destination that keeps a checkpoint's shards in memory. The
// zero value is ready to use; after a restore, Bytes returns the shards.
type Memory struct {
	mu     sync.Mutex
	shards map[string][]byte
}

var _ Destination = (*Memory)(nil)

// Bytes returns the restored shard called name.
func (d *Memory) Bytes(name string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.shards[name]
	return b, ok
}

// Begin implements Destination; it drops the shards of an earlier restore.
func (d *Memory) Begin(*Manifest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shards = map[string][]byte{}
	return nil
}

// Shard implements Destination.
func (d *Memory) Shard(info ShardInfo, r io.Reader) error {
	// The listing showed an object of this size, so the allocation is
	// what the shard holds.
	b := make([]byte, info.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shards[info.Name] = b
	return nil
}

// Commit implements Destination.
func (d *Memory) Commit() error { return nil }

// Discard implements Destination.
func (d *Memory) Discard() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shards = nil
}

// Dir is a Destination that restores a checkpoint's shards as files under
// the directory Path, which must not exist or be empty. The files are
// written into a temporary directory beside Path (".<base>.restore-*"),
// which Commit renames to Path once every shard has passed its checks, so
// Path never holds part of a checkpoint or a shard that failed them.
type Dir struct {
	// Path is the directory to restore into.
	Path string

	staging string
}

var _ Destination = (*Dir)(nil)

// Begin implements Destination.
func (d *Dir) Begin(*Manifest) error {
	if d.Path == "" {
		return errors.New("restore into a directory: Dir.Path is empty")
	}
	if err := checkEmptyDir(d.Path); err != nil {
		return err
	}
	parent := filepath.Dir(d.Path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	staging, err := os.MkdirTemp(parent, "."+filepath.Base(d.Path)+".restore-*")
	if err != nil {
		return fmt.Errorf("restore into %s: %w (its parent directory must be writable)", d.Path, err)
	}
	d.staging = staging
	return nil
}

// Shard implements Destination.
func (d *Dir) Shard(info ShardInfo, r io.Reader) error {
	rel := filepath.FromSlash(info.Name)
	if !filepath.IsLocal(rel) {
		return fmt.Errorf("restore into %s: shard name %q is not a local path", d.Path, info.Name)
	}
	p := filepath.Join(d.staging, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	return nil
}

// Commit implements Destination: it moves the restored files to Path.
func (d *Dir) Commit() error {
	if err := os.Chmod(d.staging, 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	if err := checkEmptyDir(d.Path); err != nil {
		return err
	}
	// Rename replaces an empty directory on Linux but not everywhere.
	if err := os.Remove(d.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore into %s: %w", d.Path, err)
	}
	if err := os.Rename(d.staging, d.Path); err != nil {
		return fmt.Errorf("restore into %s: move %s into place: %w", d.Path, d.staging, err)
	}
	d.staging = ""
	return nil
}

// Discard implements Destination.
func (d *Dir) Discard() {
	if d.staging != "" {
		_ = os.RemoveAll(d.staging)
		d.staging = ""
	}
}

// checkEmptyDir fails unless dir is missing or an empty directory.
func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fmt.Errorf("restore into %s: %w (it must be a directory, empty or missing)", dir, err)
	case len(names) > 0:
		return fmt.Errorf("restore into %s: the directory is not empty (it holds %s); restore into a new or empty directory", dir, names[0])
	}
	return nil
}
