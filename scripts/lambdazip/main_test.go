package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteZip(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	content := []byte("\x7fELF not really")
	if err := os.WriteFile(bin, content, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dist", "fn.zip")
	var stderr bytes.Buffer
	if code := run([]string{"-o", out, bin}, &stderr); code != 0 {
		t.Fatalf("run = %d: %s", code, stderr.String())
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
		t.Fatalf("entries %v, want bootstrap alone", zr.File)
	}
	f := zr.File[0]
	if f.Mode() != 0o755 {
		t.Errorf("mode %v, want 0755 whatever the file's own", f.Mode())
	}
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, content) {
		t.Errorf("content %q, want %q", got, content)
	}

	first, _ := os.ReadFile(out)
	if code := run([]string{"-o", out, bin}, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Errorf("the same bootstrap gave two different zips")
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"-o", "x.zip"}, {"bootstrap"}, {"-o", "x.zip", "a", "b"}} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage") {
			t.Errorf("run(%q) = %d, %q; want 2 and the usage", args, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"-o", filepath.Join(t.TempDir(), "x.zip"), "/no/such/bootstrap"}, &stderr); code != 1 || !strings.Contains(stderr.String(), "make lambda-zip") {
		t.Errorf("missing bootstrap: %d, %q", code, stderr.String())
	}
}
