package blob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/blob"
)

func TestCheckKey(t *testing.T) {
	for _, key := range []string{"a", "a/b", "a/b.c", ".a", "a/..b", "a/b..", "...", "ü/ß", "a b"} {
		if err := blob.CheckKey(key); err != nil {
			t.Errorf("CheckKey(%q) = %v, want nil", key, err)
		}
	}
	for key, want := range map[string]string{
		"":       "empty",
		"/a":     "starts with a slash",
		"a//b":   "empty element",
		"a/":     "empty element",
		".":      `"." element`,
		"a/./b":  `"." element`,
		"..":     `".." element`,
		"a/../b": `".." element`,
		"a\x00":  "NUL",
		"a\xff":  "UTF-8",
	} {
		err := blob.CheckKey(key)
		if !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckKey(%q) = %v, want ErrInvalidKey saying %q", key, err, want)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, prefix := range []string{"", "a", "a/", "a/b", "a/.", "a/..", ".", ".."} {
		if err := blob.CheckPrefix(prefix); err != nil {
			t.Errorf("CheckPrefix(%q) = %v, want nil", prefix, err)
		}
	}
	for _, prefix := range []string{"/", "/a", "a//", "../", "a/../", "./", "a\x00"} {
		if err := blob.CheckPrefix(prefix); !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("CheckPrefix(%q) = %v, want ErrInvalidKey naming the prefix", prefix, err)
		}
	}
}
