// Package blob is the object-storage contract checkpoints are written to:
// a flat namespace of keys holding immutable byte strings. Implementations:
// the local filesystem (file://) and S3 (s3://bucket/prefix).
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotFound is returned for a key that holds no object.
var ErrNotFound = errors.New("blob not found")

// ErrExists is returned by a conditional Put (IfNotExists) whose key already
// holds an object.
var ErrExists = errors.New("blob already exists")

// ErrInvalidKey is returned for a key or list prefix that breaks the key
// rules of Store; CheckKey and CheckPrefix say which rule.
var ErrInvalidKey = errors.New("invalid blob key")

// Info describes a stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// PutOptions are the rarer arguments of Put.
type PutOptions struct {
	// IfNotExists makes Put fail with ErrExists when the key holds an
	// object (S3: If-None-Match: *), so a writer can never replace what
	// another wrote.
	IfNotExists bool
}

// Store is an object store. Keys are slash-separated paths relative to the
// store's root; they must not be empty, start with a slash, or contain
// empty, "." or ".." elements, and must be valid UTF-8 without NUL bytes
// (see CheckKey). Objects are written whole: a reader never sees part of
// an object.
//
// Every method wraps ErrInvalidKey for a key that breaks these rules and
// returns an error matching ctx.Err() once ctx is done.
type Store interface {
	// Put writes size bytes from r under key. size must be exact: a reader
	// that ends early or holds more is an error. Large objects may be
	// uploaded in parts. When Put fails, for any reason, the key keeps what
	// it held before (nothing, or the previous object).
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error
	// Get opens the object under key, or returns an error wrapping
	// ErrNotFound. The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns the objects whose keys start with prefix, in key order.
	// The prefix is a plain string prefix: it may end in the middle of an
	// element ("a/b" matches "a/b1/x" and "a/bc"); "" lists everything.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the objects under keys; a missing key is not an error.
	Delete(ctx context.Context, keys ...string) error
	// URI names the store, e.g. "file:///var/hpsearch/ckpt" or "s3://bucket/prefix".
	URI() string
}

// CheckKey reports whether key follows the key rules of Store. The error
// wraps ErrInvalidKey and names the rule broken.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	}
	if p := pathProblem(key); p != "" {
		return fmt.Errorf("%w: key %q %s", ErrInvalidKey, key, p)
	}
	return nil
}

// CheckPrefix reports whether prefix can start a valid key: "" (every key),
// or a string that a valid key begins with, such as "a/", "a/b" or "a/.b".
// The error wraps ErrInvalidKey and names the rule broken.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	// The last element may be cut short anywhere (or be empty after a
	// trailing slash), so check the prefix as the start of a longer key.
	if p := pathProblem(prefix + "x"); p != "" {
		return fmt.Errorf("%w: prefix %q %s", ErrInvalidKey, prefix, p)
	}
	return nil
}

// pathProblem says which key rule s breaks, or "" when it breaks none.
func pathProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsRune(s, 0):
		return "contains a NUL byte"
	case strings.HasPrefix(s, "/"):
		return "starts with a slash (keys are relative to the store's root)"
	}
	for elem := range strings.SplitSeq(s, "/") {
		switch elem {
		case "":
			return "has an empty element (a doubled or trailing slash)"
		case ".", "..":
			return fmt.Sprintf("has a %q element (keys name objects directly, without . or ..)", elem)
		}
	}
	return ""
}
