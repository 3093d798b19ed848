package front

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "-function"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"stray"}, 2, "unexpected arguments"},
		{[]string{"-log-level", "loud"}, 2, "-log-level"},
		{[]string{"-function", "name=f"}, 2, "bootstrap: required"},
		{[]string{"-rie", "/no/such/rie", "-function", "name=f,bootstrap=" + executable(t)}, 2, "go install github.com/aws/aws-lambda-runtime-interface-emulator"},
		{[]string{"-rie", os.Args[0]}, 2, "no function to serve"},
		{[]string{"-rie", os.Args[0], "-config", "/no/such/config.json"}, 2, "read the config file"},
	} {
		var out syncBuffer
		if code := Main(tc.args, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("Main(%q) = %d, output:\n%s\nwant %d and %q", tc.args, code, out.String(), tc.code, tc.want)
		}
	}
}
