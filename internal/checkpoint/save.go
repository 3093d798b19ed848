package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
)

// cleanupTimeout bounds the best-effort deletions and checks Save makes
// after a failure, which run even when the caller's ctx is done.
const cleanupTimeout = 30 * time.Second

// Shard is a named byte string to save. Shards may be large: Save streams
// each one from Open and holds none of it in memory.
type Shard struct {
	// Name names the shard within its checkpoint: a slash-separated
	// relative path ("weights", "opt/adam.bin").
	Name string
	// Size is the exact number of bytes Open's reader yields.
	Size int64
	// Open returns a reader of the shard's bytes. Save calls it once, from
	// the goroutine uploading the shard, and closes the reader.
	Open func() (io.ReadCloser, error)
}

// BytesShard returns a shard holding b, which must not change until Save
// returns.
func BytesShard(name string, b []byte) Shard {
	return Shard{Name: name, Size: int64(len(b)), Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

// DirShards returns every regular file under dir, recursively, as a shard
// named by its slash-separated path relative to dir. A symbolic link to a
// regular file inside dir is saved as a copy of that file; a link that
// points outside dir or to a directory, and any other kind of file, is an
// error. Empty directories are not saved. The files must not change until
// Save returns.
func DirShards(dir string) ([]Shard, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: checkpoint directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("checkpoint: checkpoint directory %s: %w", dir, err)
	}
	var shards []Shard
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			shards = append(shards, fileShard(name, p, info.Size()))
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("symbolic link %s: %w", name, err)
			}
			if trel, err := filepath.Rel(root, target); err != nil || !filepath.IsLocal(trel) {
				return fmt.Errorf("symbolic link %s points to %s, outside the checkpoint directory; copy the file in instead", name, target)
			}
			info, err := os.Stat(target)
			if err != nil {
				return err
			}
			if !info.Mode().IsRegular() {
				return fmt.Errorf("symbolic link %s points to %s, which is not a regular file; checkpoints hold regular files only", name, target)
			}
			shards = append(shards, fileShard(name, target, info.Size()))
			return nil
		default:
			return fmt.Errorf("%s is a %v, not a regular file; checkpoints hold regular files only", name, d.Type())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: checkpoint directory %s: %w", dir, err)
	}
	return shards, nil
}

func fileShard(name, path string, size int64) Shard {
	return Shard{Name: name, Size: size, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// Save writes a checkpoint under prefix: it uploads the shards in
// parallel, computing each one's SHA-256 as it streams, then writes the
// manifest with a conditional create, which makes the checkpoint visible.
// From m it takes ID, Study, Trial and Resource; it fills in Version,
// Shards, CreatedAt and Key, and returns the manifest written.
//
// An ID is written once: when the checkpoint's folder already holds
// objects, or another writer creates them meanwhile, Save fails with an
// error wrapping blob.ErrExists and replaces nothing (a caller reusing a
// seq, or a zombie attempt). When Save fails after uploading some shards it
// deletes them, best effort: an upload cut off by ctx may still land, and
// Retain removes what is left after the orphan age.
func (s *Store) Save(ctx context.Context, prefix string, m Manifest, shards []Shard) (*Manifest, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("checkpoint: save: %w", err)
	}
	if err := m.ID.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: save under %s: %w", prefix, err)
	}
	fail := func(err error) (*Manifest, error) {
		return nil, fmt.Errorf("checkpoint: save %s under %s: %w", m.ID, prefix, err)
	}
	names := make([]string, len(shards))
	for i, sh := range shards {
		names[i] = sh.Name
		if sh.Size < 0 || sh.Open == nil {
			return fail(fmt.Errorf("shard %q has a negative size or no Open function", sh.Name))
		}
	}
	if err := checkShardNames(names); err != nil {
		return fail(err)
	}
	dir := idDir(prefix, m.ID)
	// Fail before uploading anything when the ID is taken; the conditional
	// Puts below catch a writer that races this check.
	existing, err := s.blobs.List(ctx, dir+"/")
	if err != nil {
		return fail(fmt.Errorf("check that the checkpoint does not exist: %w", err))
	}
	if len(existing) > 0 {
		return fail(fmt.Errorf("%s already holds %s: %w (a checkpoint ID is written once: save under the next seq; an older attempt still running is a zombie)",
			s.blobs.URI(), existing[0].Key, blob.ErrExists))
	}

	infos := make([]ShardInfo, len(shards))
	var (
		mu      sync.Mutex
		written []string
	)
	// The uploads run on the caller's ctx, not on the one parallel cancels
	// at the first error: an upload cut off in flight may still land (S3
	// can complete a request whose response is lost), and then Save would
	// not know it wrote the object. Letting the uploads under way finish
	// keeps the list of what to delete exact; no new one starts.
	err = s.parallel(ctx, len(shards), func(_ context.Context, i int) error {
		sh := shards[i]
		key := shardKey(dir, sh.Name)
		rc, err := sh.Open()
		if err != nil {
			return fmt.Errorf("shard %q: open: %w", sh.Name, err)
		}
		defer rc.Close()
		h := sha256.New()
		cr := &countingReader{r: io.TeeReader(rc, h)}
		if err := s.blobs.Put(ctx, key, cr, sh.Size, blob.PutOptions{IfNotExists: true}); err != nil {
			return fmt.Errorf("shard %q: %w", sh.Name, err)
		}
		mu.Lock()
		written = append(written, key)
		mu.Unlock()
		if cr.n != sh.Size {
			return fmt.Errorf("shard %q: the blob store %s accepted %d bytes after reading %d; its Put breaks the size contract",
				sh.Name, s.blobs.URI(), sh.Size, cr.n)
		}
		infos[i] = ShardInfo{Name: sh.Name, Key: key, Size: sh.Size, SHA256: hex.EncodeToString(h.Sum(nil))}
		return nil
	})
	if err != nil {
		return fail(s.cleanup(ctx, err, written))
	}

	out := m
	out.Version = ManifestVersion
	out.Shards = infos
	out.CreatedAt = s.now().UTC()
	out.Key = manifestKey(dir)
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fail(s.cleanup(ctx, err, written))
	}
	err = s.blobs.Put(ctx, out.Key, bytes.NewReader(data), int64(len(data)), blob.PutOptions{IfNotExists: true})
	switch {
	case err == nil:
		return &out, nil
	case errors.Is(err, blob.ErrExists):
		return fail(s.cleanup(ctx, fmt.Errorf("write the manifest: %w (another writer saved this ID meanwhile)", err), written))
	}
	// The Put failed without saying whether the manifest landed (a timeout,
	// a lost response): look before deleting shards it may name.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	got, rerr := s.readDoc(cctx, out.Key)
	switch {
	case rerr == nil && bytes.Equal(got, data):
		return &out, nil
	case errors.Is(rerr, blob.ErrNotFound):
		return fail(s.cleanup(ctx, fmt.Errorf("write the manifest: %w", err), written))
	}
	return fail(fmt.Errorf("write the manifest: %w; whether it was written is unknown, so its shards are left in place (Retain deletes them after the orphan age if it was not)", err))
}

// cleanup deletes the shards a failed Save wrote, best effort, and returns
// cause with what went wrong.
func (s *Store) cleanup(ctx context.Context, cause error, written []string) error {
	if len(written) == 0 {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.blobs.Delete(ctx, written...); err != nil {
		return fmt.Errorf("%w (deleting the %d shards written also failed: %v; Retain deletes them after the orphan age)", cause, len(written), err)
	}
	return cause
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
