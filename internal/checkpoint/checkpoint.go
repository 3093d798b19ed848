// Package checkpoint stores the checkpoints of trials in a blob.Store.
//
// A checkpoint is a set of shards (named byte strings: "weights",
// "optimizer", or the files of a directory) and a manifest that lists them
// with their sizes and SHA-256 digests. Save uploads the shards in parallel
// and writes the manifest last, with a conditional create; only a manifest
// makes a checkpoint visible, so a save that dies half-way leaves nothing a
// reader would pick up.
//
// Layout under a trial's prefix (the caller's, e.g. "STUDY/trial-7"):
//
//	<prefix>/ckpt/<ID>/manifest.json
//	<prefix>/ckpt/<ID>/shards/<shard name>
//	<prefix>/results/<segment %06d>.<attempt %03d>.json
//
// An ID is "<segment %06d>.<attempt %03d>.<seq %04d>", so IDs sort as
// strings in (segment, attempt, seq) order and the newest checkpoint is the
// greatest. An invocation writes only under its own (segment, attempt): a
// zombie of an older attempt can neither replace nor outrank a newer
// attempt's checkpoint, and no key is ever written twice. Shards live in
// their own folder so that any file name, "manifest.json" included, can be
// a shard.
//
// Three words say how far a checkpoint has been checked:
//   - visible: it has a manifest;
//   - intact: its manifest decodes and matches its place, and every shard
//     it names exists with the recorded size (List, NewestOfAttempt,
//     Retain and Finish check this much from one listing, without reading
//     shard bytes);
//   - verified: intact, and every shard's bytes hash to the recorded
//     SHA-256 (Latest and Load hash exactly the bytes they hand over).
package checkpoint

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// ManifestVersion is the version of the manifest format that Save writes
// and the only one the loaders accept.
const ManifestVersion = 1

// ErrNoCheckpoint is returned when a trial has no checkpoint that passes
// the checks asked for.
var ErrNoCheckpoint = errors.New("no valid checkpoint")

// ErrNoResult is returned by GetResult for a segment attempt that wrote no
// result. It wraps blob.ErrNotFound.
var ErrNoResult = fmt.Errorf("no segment result: %w", blob.ErrNotFound)

// The kinds of Problem; a Problem's Err wraps one of them.
var (
	// ErrBadManifest: the manifest does not decode, has an unknown
	// version, or does not match the checkpoint it is stored in.
	ErrBadManifest = errors.New("bad manifest")
	// ErrMissingShard: a shard the manifest names does not exist.
	ErrMissingShard = errors.New("missing shard")
	// ErrSizeMismatch: a shard is shorter or longer than recorded.
	ErrSizeMismatch = errors.New("shard size mismatch")
	// ErrChecksumMismatch: a shard's bytes do not hash to the recorded
	// SHA-256.
	ErrChecksumMismatch = errors.New("shard checksum mismatch")
)

// Problem is a visible checkpoint that failed a check. Loaders report the
// problems of the newer checkpoints they skipped; they are not fatal.
type Problem struct {
	// Checkpoint is the ID of the checkpoint.
	Checkpoint ID
	// Manifest is the key of its manifest.
	Manifest string
	// Shard is the name of the shard at fault, or "" for the manifest.
	Shard string
	// Err wraps ErrBadManifest, ErrMissingShard, ErrSizeMismatch or
	// ErrChecksumMismatch.
	Err error
}

// Error says which checkpoint, which shard and what is wrong.
func (p Problem) Error() string {
	if p.Shard == "" {
		return fmt.Sprintf("checkpoint %s (%s): %v", p.Checkpoint, p.Manifest, p.Err)
	}
	return fmt.Sprintf("checkpoint %s (%s): shard %q: %v", p.Checkpoint, p.Manifest, p.Shard, p.Err)
}

// Unwrap returns Err.
func (p Problem) Unwrap() error { return p.Err }

// maxSeq is the largest sequence number of a checkpoint within an attempt.
const maxSeq = 9999

// ID names a checkpoint of a trial: the segment and attempt that wrote it,
// and its sequence number within that attempt. Segment is at most 999999,
// Attempt at most 999 and Seq at most 9999, so that IDs sort as strings.
type ID struct {
	Segment, Attempt, Seq int
}

// String returns the ID as "SSSSSS.AAA.QQQQ", e.g. "000003.001.0002".
func (id ID) String() string {
	return fmt.Sprintf("%06d.%03d.%04d", id.Segment, id.Attempt, id.Seq)
}

// Compare returns -1, 0 or +1 as id is older than, equal to or newer than o.
func (id ID) Compare(o ID) int {
	if c := cmp.Compare(id.Segment, o.Segment); c != 0 {
		return c
	}
	if c := cmp.Compare(id.Attempt, o.Attempt); c != 0 {
		return c
	}
	return cmp.Compare(id.Seq, o.Seq)
}

// Validate reports whether every part of id is within its range.
func (id ID) Validate() error {
	if err := checkAttempt(id.Segment, id.Attempt); err != nil {
		return err
	}
	if id.Seq < 0 || id.Seq > maxSeq {
		return fmt.Errorf("checkpoint seq %d is outside 0..%d", id.Seq, maxSeq)
	}
	return nil
}

func checkAttempt(segment, attempt int) error {
	if segment < 0 || segment > 999999 {
		return fmt.Errorf("segment %d is outside 0..999999", segment)
	}
	if attempt < 0 || attempt > 999 {
		return fmt.Errorf("attempt %d is outside 0..999", attempt)
	}
	return nil
}

// ParseID parses the form String returns. It accepts nothing else: the
// parts have exactly 6, 3 and 4 digits.
func ParseID(s string) (ID, error) {
	var id ID
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return id, fmt.Errorf("checkpoint ID %q is not SSSSSS.AAA.QQQQ", s)
	}
	for i, dst := range []*int{&id.Segment, &id.Attempt, &id.Seq} {
		p := parts[i]
		if len(p) != [3]int{6, 3, 4}[i] {
			return id, fmt.Errorf("checkpoint ID %q is not SSSSSS.AAA.QQQQ", s)
		}
		for _, c := range []byte(p) {
			if c < '0' || c > '9' {
				return id, fmt.Errorf("checkpoint ID %q is not SSSSSS.AAA.QQQQ", s)
			}
			*dst = *dst*10 + int(c-'0')
		}
	}
	return id, nil
}

// MarshalText encodes id as String does.
func (id ID) MarshalText() ([]byte, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	return []byte(id.String()), nil
}

// UnmarshalText decodes the form String returns.
func (id *ID) UnmarshalText(b []byte) error {
	parsed, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ShardInfo describes one stored shard of a checkpoint.
type ShardInfo struct {
	// Name is the shard's name: a slash-separated relative path.
	Name string `json:"name"`
	// Key is the blob key holding its bytes.
	Key string `json:"key"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 digest of its bytes.
	SHA256 string `json:"sha256"`
}

// Manifest describes a checkpoint. Its presence makes the checkpoint
// visible.
type Manifest struct {
	// Version is the manifest format, ManifestVersion.
	Version int `json:"version"`
	// Study and Trial say whose checkpoint it is.
	Study string `json:"study"`
	Trial int    `json:"trial"`
	// ID says which segment attempt wrote it, and in what order.
	ID ID `json:"id"`
	// Resource is the training resource reached (epochs, steps) when it
	// was taken.
	Resource float64 `json:"resource"`
	// Shards lists the shards, in the order they were given to Save.
	Shards []ShardInfo `json:"shards"`
	// CreatedAt is when Save finished uploading the shards.
	CreatedAt time.Time `json:"created_at"`
	// Metrics are the metrics the segment reported up to the checkpoint,
	// so the work it saved keeps its history if the segment dies later.
	Metrics []hptype.Metric `json:"metrics,omitempty"`
	// Key is the manifest's own blob key; it is not stored in the manifest
	// but filled in by Save and by the loaders.
	Key string `json:"-"`
}

// Bytes returns the total size of the shards.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, s := range m.Shards {
		n += s.Size
	}
	return n
}

// Shard returns the shard called name.
func (m *Manifest) Shard(name string) (ShardInfo, bool) {
	for _, s := range m.Shards {
		if s.Name == name {
			return s, true
		}
	}
	return ShardInfo{}, false
}

// check reports what makes m, decoded from the manifest of the checkpoint
// in dir, unusable; the error does not yet wrap ErrBadManifest.
func (m *Manifest) check(dir string, id ID) error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("manifest version %d is not %d, the one this hpsearch reads (a newer hpsearch wrote it?)", m.Version, ManifestVersion)
	}
	if m.ID != id {
		return fmt.Errorf("manifest names checkpoint %s but is stored as %s", m.ID, id)
	}
	names := make([]string, len(m.Shards))
	for i, s := range m.Shards {
		names[i] = s.Name
		if want := shardKey(dir, s.Name); s.Key != want {
			return fmt.Errorf("shard %q has key %q, not %q: a manifest names only shards of its own checkpoint", s.Name, s.Key, want)
		}
		if s.Size < 0 {
			return fmt.Errorf("shard %q has negative size %d", s.Name, s.Size)
		}
		if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("shard %q has SHA-256 %q, not 64 hex digits", s.Name, s.SHA256)
		}
	}
	return checkShardNames(names)
}

// checkShardNames reports a name that is not a valid relative path, a
// duplicate, or a name that is also a folder of another name (the two
// could not both be files).
func checkShardNames(names []string) error {
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if err := blob.CheckKey(name); err != nil {
			return fmt.Errorf("shard name %q is not a relative slash-separated path: %v", name, err)
		}
		if seen[name] {
			return fmt.Errorf("shard name %q is given twice", name)
		}
		seen[name] = true
	}
	for _, name := range names {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return fmt.Errorf("shard name %q is also the folder of shard %q; one name cannot be both a file and a folder", dir, name)
			}
		}
	}
	return nil
}

// Keys of the layout.

const (
	ckptDir      = "ckpt"
	resultsDir   = "results"
	manifestName = "manifest.json"
	shardsDir    = "shards"
)

func checkPrefix(prefix string) error {
	if err := blob.CheckKey(prefix); err != nil {
		return fmt.Errorf("checkpoint prefix %q is not a valid blob key (e.g. \"STUDY/trial-7\", no leading or trailing slash): %w", prefix, err)
	}
	return nil
}

func ckptRoot(prefix string) string     { return prefix + "/" + ckptDir + "/" }
func idDir(prefix string, id ID) string { return ckptRoot(prefix) + id.String() }
func manifestKey(dir string) string     { return dir + "/" + manifestName }
func shardKey(dir, name string) string  { return dir + "/" + shardsDir + "/" + name }
func resultKey(prefix string, segment, attempt int) string {
	return fmt.Sprintf("%s/%s/%06d.%03d.json", prefix, resultsDir, segment, attempt)
}
