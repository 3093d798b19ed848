// Command lambdazip packages a Lambda bootstrap executable as a deployment
// package: a zip whose only entry is "bootstrap", mode 0755, with a fixed
// modification time so that the same binary always gives the same zip
// (and the same CodeSha256).
//
//	go run ./scripts/lambdazip -o dist/trainer-lambda-arm64.zip dist/lambda/arm64/bootstrap
package main

import (
	"archive/zip"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// epoch is every entry's modification time: the earliest a zip can hold.
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("lambdazip", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the zip `file` to write (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lambdazip -o FILE.zip BOOTSTRAP")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if err := writeZip(*out, fs.Arg(0)); err != nil {
		fmt.Fprintf(stderr, "lambdazip: %v\n", err)
		return 1
	}
	return 0
}

// writeZip writes the deployment package of the executable bootstrap to
// out, through a temporary file so that out is never half written.
func writeZip(out, bootstrap string) error {
	bin, err := os.ReadFile(bootstrap)
	if err != nil {
		return fmt.Errorf("read the bootstrap: %w; build it first (make lambda-zip)", err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: epoch}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(bin)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return fmt.Errorf("zip %s: %w", bootstrap, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create the output folder: %w", err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
