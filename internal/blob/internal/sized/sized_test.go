package sized_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob/internal/sized"
)

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		body    string
		size    int64
		wantErr error
	}{
		{"", 0, nil},
		{"abc", 3, nil},
		{"ab", 3, io.ErrUnexpectedEOF},
		{"", 1, io.ErrUnexpectedEOF},
		{"abcd", 3, sized.ErrTooLong},
		{"a", 0, sized.ErrTooLong},
	} {
		got, err := io.ReadAll(sized.NewReader(t.Context(), strings.NewReader(tc.body), tc.size))
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("reading %q as %d bytes: error %v, want %v", tc.body, tc.size, err, tc.wantErr)
		}
		if tc.wantErr == nil && string(got) != tc.body {
			t.Errorf("reading %q as %d bytes gave %q", tc.body, tc.size, got)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := io.ReadAll(sized.NewReader(ctx, strings.NewReader("abc"), 3)); !errors.Is(err, context.Canceled) {
		t.Errorf("reading with a canceled ctx: %v, want context.Canceled", err)
	}
}

func TestReadAll(t *testing.T) {
	for _, tc := range []struct {
		body    string
		size    int64
		wantErr error
	}{
		{"", 0, nil},
		{"abc", 3, nil},
		{"ab", 3, io.ErrUnexpectedEOF},
		{"abcd", 3, sized.ErrTooLong},
		{"a", 0, sized.ErrTooLong},
	} {
		got, err := sized.ReadAll(t.Context(), strings.NewReader(tc.body), tc.size)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("ReadAll(%q, %d): error %v, want %v", tc.body, tc.size, err, tc.wantErr)
		}
		if tc.wantErr == nil && string(got) != tc.body {
			t.Errorf("ReadAll(%q, %d) = %q", tc.body, tc.size, got)
		}
	}
}
