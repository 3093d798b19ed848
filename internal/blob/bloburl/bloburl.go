// Package bloburl opens the blob.Store that a URI names:
//
//	file:///abs/path     a directory (fsblob)
//	file://rel/path      a directory relative to the working directory
//	rel/path, /abs/path  the same: a string without "://" is a path
//	s3://bucket/prefix   the keys under prefix in an S3 bucket (s3blob)
//
// "file://" is followed by the path itself: a host is not parsed, so
// file://localhost/x is the relative path localhost/x. Paths in file URIs
// are percent-decoded, so Open(store.URI()) opens the same store.
package bloburl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/fsblob"
	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
)

// Open opens the store named by uri (see the package doc). An S3 store is
// configured from the environment as s3blob.New says.
func Open(ctx context.Context, uri string) (blob.Store, error) {
	if uri == "" {
		return nil, errors.New("bloburl: the store URI is empty; give a directory, file:///path or s3://bucket/prefix")
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return fsblob.New(uri)
	}
	switch strings.ToLower(scheme) {
	case "file":
		path, err := url.PathUnescape(rest)
		if err != nil {
			return nil, fmt.Errorf("bloburl: store URI %q: %w (escape %% as %%25)", uri, err)
		}
		if path == "" {
			return nil, fmt.Errorf("bloburl: store URI %q names no directory; write file:///abs/path or file://rel/path", uri)
		}
		return fsblob.New(path)
	case "s3":
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("bloburl: store URI %q: %w", uri, err)
		}
		if u.Host == "" {
			return nil, fmt.Errorf("bloburl: store URI %q names no bucket; write s3://bucket/prefix", uri)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("bloburl: store URI %q: only s3://bucket/prefix is understood (no user, query or fragment); credentials and endpoint come from the AWS environment", uri)
		}
		return s3blob.New(ctx, u.Host, u.Path)
	default:
		return nil, fmt.Errorf("bloburl: store URI %q has scheme %q; supported: file:// (or a plain path) and s3://", uri, scheme)
	}
}
