package cli_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const tlsPoolSpace = `name: tls-pool
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.05, max: 0.3, log: true}
  epochs: {type: constant, value: 2}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: sobol, seed: 1}
resources: {gpu: 1}
pool: {name: gpu, listen: %q, instance_type: g5.xlarge}
max_trials: 2
`

// TestPoolQueueOverTLS serves a pool's queue over HTTPS (with
// HPSEARCH_POOL_TLS_CERT and HPSEARCH_POOL_TLS_KEY) to a worker that
// trusts the certificate through SSL_CERT_FILE: the study completes on the
// pool. A worker that does not trust it cannot lease.
func TestPoolQueueOverTLS(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := os.WriteFile(filepath.Join(dir, "space.yaml"), fmt.Appendf(nil, tlsPoolSpace, addr), 0o644); err != nil {
		t.Fatal(err)
	}

	worker := func(env ...string) (*exec.Cmd, *bytes.Buffer) {
		w := exec.Command("hpsearch", "worker", "--pool", "gpu", "--queue", "https://"+addr, "--work-dir", filepath.Join(dir, "w"))
		w.Env = append(os.Environ(), append(env, "HPSEARCH_TOKEN=pool-secret")...)
		var log bytes.Buffer
		w.Stderr = &log
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = w.Process.Signal(syscall.SIGTERM)
			_ = w.Wait()
		})
		return w, &log
	}
	doubter, untrusting := worker("SSL_CERT_FILE=/dev/null")
	worker("SSL_CERT_FILE=" + cert)

	out, errOut, code := hpsearch(t, dir, []string{"HPSEARCH_POOL_TOKEN=pool-secret", "HPSEARCH_POOL_TLS_CERT=" + cert, "HPSEARCH_POOL_TLS_KEY=" + key},
		"--state", filepath.Join(dir, "state"), "run", "space.yaml")
	if code != 0 || !strings.Contains(out, "pool gpu: workers lease from https://"+addr) || !strings.Contains(out, "trials     2 completed") || !strings.Contains(out, "pool       gpu: 2 trials") {
		t.Fatalf("hpsearch run over a TLS pool queue: exit %d\n%s\n%s", code, out, errOut)
	}
	// Stopped, its log is complete and no longer written to.
	_ = doubter.Process.Signal(syscall.SIGTERM)
	_ = doubter.Wait()
	if !strings.Contains(untrusting.String(), "certificate") || strings.Contains(untrusting.String(), "segment started") {
		t.Errorf("a worker that does not trust the certificate:\n%s", untrusting.String())
	}
}
