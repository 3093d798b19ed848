package cli_test

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is a real `hpsearch serve` process on 127.0.0.1.
type server struct {
	url    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// startServer runs `hpsearch serve` on a free port and waits until it
// listens. (A test script cannot learn the port of a background process,
// so this is a Go test; the hpsearch in PATH is this binary as the CLI.)
func startServer(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	cmd := exec.Command("hpsearch", append([]string{"--state", filepath.Join(dir, "state"), "serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(pipe)
		url := regexp.MustCompile(`msg=listening url=(\S+)`)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := url.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
		close(listening)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	u, ok := <-listening
	if !ok {
		cmd.Wait()
		t.Fatalf("hpsearch serve did not start:\n%s", s.log())
	}
	s.url = u
	return s
}

// stop sends SIGTERM and waits for the server to exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-s.done
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("hpsearch serve after SIGTERM: %v\n%s", err, s.log())
	}
}

// hpsearch runs the CLI with env added, and returns its output and exit
// code.
func hpsearch(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("hpsearch", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

const serveSpace = `name: tiny
objective: {metric: val_accuracy, goal: maximize}
parameters:
  learning_rate: {type: float, min: 0.05, max: 0.3, log: true}
  hidden_units: {type: int, min: 16, max: 32, step: 16}
  epochs: {type: constant, value: 2}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: sobol, seed: 1}
max_trials: 3
max_concurrency: 2
`

// hpsearch serve with the CLI's remote mode: run, studies, trials and
// best through the server print what they print locally.
func TestServeRemote(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "space.yaml"), []byte(serveSpace), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("name: bad\nobjective: {metric: x, goal: up}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token, _, code := hpsearch(t, dir, nil, "token", "--tokens-file", "tokens")
	token = strings.TrimSpace(token)
	if code != 0 || !strings.HasPrefix(token, "hps_") {
		t.Fatalf("hpsearch token: %d %q", code, token)
	}
	srv := startServer(t, dir, "--tokens-file", "tokens")
	env := []string{"HPSEARCH_SERVER=" + srv.url, "HPSEARCH_TOKEN=" + token}

	out, errOut, code := hpsearch(t, dir, env, "run", "space.yaml")
	if code != 0 {
		t.Fatalf("remote run: exit %d\n%s\n%s\nserver:\n%s", code, out, errOut, srv.log())
	}
	for _, want := range []string{
		`study tiny: 3 trials, 2 at a time, sobol sampler, maximize val_accuracy`,
		`trial 2 completed: val_accuracy=0\.\d{4}`,
		`Best trial: #\d  val_accuracy = 0\.\d+ \(maximize\)`,
		`Study tiny: completed`,
		`trials     3 completed, 0 failed, 0 interrupted, 0 queued of 3`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("remote run output lacks %q:\n%s", want, out)
		}
	}
	// Running it again resumes it, which runs nothing more.
	out, _, code = hpsearch(t, dir, env, "run", "space.yaml")
	if code != 0 || !strings.Contains(out, "resuming study tiny: 3/3 trials done") || strings.Contains(out, "started") {
		t.Fatalf("remote run again: exit %d\n%s", code, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"studies"}, `(?m)^tiny\s+completed\s+3/3\s+0\s+val_accuracy=0\.\d+ \(#\d\)`},
		{[]string{"trials", "tiny"}, `(?m)^2\s+completed\s+0\.\d{4}\s+1\s+1\s+`},
		{[]string{"best", "tiny"}, `(?m)^trial \d: val_accuracy = 0\.\d+ \(maximize\)\n  learning_rate`},
		{[]string{"best", "tiny", "--json"}, `"state": "completed"`},
		{[]string{"studies", "--json"}, `"name": "tiny"`},
	} {
		out, errOut, code := hpsearch(t, dir, env, tc.args...)
		if code != 0 || !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("remote %v: exit %d, want %q in\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}

	// Refusals read as they do locally.
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{[]string{"HPSEARCH_TOKEN=hps_wrong"}, []string{"studies"}, 1, "refused the request: the bearer token is not valid"},
		{nil, []string{"best", "nosuch"}, 2, `no study named "nosuch"`},
		{nil, []string{"run", "bad.yaml"}, 2, "bad.yaml:2:"},
		{nil, []string{"run", "bad.yaml"}, 2, "problem(s) found; nothing was run"},
		{nil, []string{"--server", "127.0.0.1:1", "studies"}, 2, "--server"},
	} {
		_, errOut, code := hpsearch(t, dir, append(env, tc.env...), tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("remote %v: exit %d, want %d and %q in\n%s", tc.args, code, tc.code, tc.want, errOut)
		}
	}
	// The server holds the state directory.
	if _, errOut, code := hpsearch(t, dir, nil, "--state", "state", "studies"); code != 1 || !strings.Contains(errOut, "in use") {
		t.Errorf("local studies while serving: exit %d\n%s", code, errOut)
	}

	srv.stop(t)
	if log := srv.log(); !strings.Contains(log, "msg=stopped") {
		t.Errorf("server log after SIGTERM:\n%s", log)
	}
	// Unreachable servers are reported as such.
	if _, errOut, code := hpsearch(t, dir, env, "studies"); code != 1 || !strings.Contains(errOut, "cannot reach the server at "+srv.url) {
		t.Errorf("studies with the server gone: exit %d\n%s", code, errOut)
	}
}

// With a certificate and key hpsearch serve speaks HTTPS; clients trust
// the certificate through SSL_CERT_FILE. --no-auth serves loopback without
// tokens.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	for name, data := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, dir, "--no-auth", "--tls-cert", "cert.pem", "--tls-key", "key.pem")
	if !strings.HasPrefix(srv.url, "https://127.0.0.1:") {
		t.Fatalf("server URL %s, want https on 127.0.0.1", srv.url)
	}
	env := []string{"HPSEARCH_SERVER=" + srv.url, "SSL_CERT_FILE=" + filepath.Join(dir, "cert.pem")}
	if out, errOut, code := hpsearch(t, dir, env, "studies"); code != 0 || !strings.HasPrefix(out, "STUDY") {
		t.Fatalf("studies over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	// A client that does not trust the certificate gets no answer.
	if _, errOut, code := hpsearch(t, dir, []string{"HPSEARCH_SERVER=" + srv.url, "SSL_CERT_FILE=/dev/null"}, "studies"); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("studies with an untrusted certificate: exit %d\n%s", code, errOut)
	}
	srv.stop(t)
}

// selfSigned makes a certificate for 127.0.0.1 and its key, in PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hpsearch test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
