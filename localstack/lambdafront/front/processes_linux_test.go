package front

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// running reports whether process pid runs (exists and is no zombie).
func running(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(raw, ')')
	return i >= 0 && i+2 < len(raw) && raw[i+2] != 'Z'
}

// Close stops every aws-lambda-rie and the runtimes they started.
func TestCloseStopsEveryProcess(t *testing.T) {
	f, client := startFront(t, testFunctionConfig(t, "echo", 10*time.Second, 3))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { invoke(t, client, "echo", testEvent{Sleep: "200ms", Echo: "x"}) })
	}
	wg.Wait()
	var started []procInfo
	for _, e := range f.pools["echo"].all {
		if e.proc != nil {
			started = append(started, e.proc.tree()...)
		}
	}
	if len(started) < 2 {
		t.Fatalf("%d processes after three invocations, want aws-lambda-rie and a runtime at least", len(started))
	}
	f.Close()
	for _, p := range started {
		if running(p.pid) {
			t.Errorf("process %d (parent %d) is still running after Close", p.pid, p.ppid)
		}
	}
}

// lambdafront serves until SIGTERM, and then stops every aws-lambda-rie
// it started.
func TestMainStopsOnSIGTERM(t *testing.T) {
	requireRIE(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(t.TempDir(), "url")
	var out syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Main([]string{"-addr-file", addrFile, "-function", "name=echo,bootstrap=" + exe + ",timeout=10s,env=" + testFunctionEnv + "=1"}, &out)
	}()
	var url string
	waitFor(t, 30*time.Second, "the address file", func() bool {
		b, err := os.ReadFile(addrFile)
		url = strings.TrimSpace(string(b))
		return err == nil
	})
	resp, err := http.Post(url+"/2015-03-31/functions/echo/invocations", "application/json", strings.NewReader(`{"echo":"hi"}`))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		t.Fatalf("invoke: %s, function error %q; log:\n%s", resp.Status, resp.Header.Get("X-Amz-Function-Error"), out.String())
	}
	// Every process that runs now below this test's is the front's.
	tree := processTree(os.Getpid())[1:]
	if len(tree) < 2 {
		t.Fatalf("%d processes below the test, want aws-lambda-rie and its runtime", len(tree))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("Main returned %d after SIGTERM; log:\n%s", c, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("Main still runs a minute after SIGTERM; log:\n%s", out.String())
	}
	for _, p := range tree {
		if running(p.pid) {
			t.Errorf("process %d (parent %d) still runs after lambdafront stopped", p.pid, p.ppid)
		}
	}
}
