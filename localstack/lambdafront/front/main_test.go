package front

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
)

// testFunctionEnv, set in a function's environment, makes the test binary
// run as that function (testFunction) instead of running the tests.
const testFunctionEnv = "LAMBDAFRONT_TEST_FUNCTION"

func TestMain(m *testing.M) {
	if os.Getenv(testFunctionEnv) == "1" {
		awslambda.Start(testFunction)
		return
	}
	code := m.Run()
	if bootstrapDir != "" {
		os.RemoveAll(bootstrapDir)
	}
	os.Exit(code)
}

// testEvent tells testFunction what to do.
type testEvent struct {
	Echo  string `json:"echo,omitempty"`  // answer {"echo": Echo}
	Print string `json:"print,omitempty"` // print this line first
	Sleep string `json:"sleep,omitempty"` // sleep this long first, ignoring the deadline
	Error string `json:"error,omitempty"` // return this error
	Panic string `json:"panic,omitempty"` // panic with this value
	Exit  int    `json:"exit,omitempty"`  // exit the runtime with this status
}

// testFunction is a Lambda function for the front's tests: it misbehaves
// as its event asks.
func testFunction(ctx context.Context, ev testEvent) (map[string]string, error) {
	if ev.Print != "" {
		fmt.Println(ev.Print)
	}
	if ev.Sleep != "" {
		d, err := time.ParseDuration(ev.Sleep)
		if err != nil {
			return nil, err
		}
		time.Sleep(d)
	}
	switch {
	case ev.Error != "":
		return nil, errors.New(ev.Error)
	case ev.Panic != "":
		panic(ev.Panic)
	case ev.Exit != 0:
		os.Exit(ev.Exit)
	}
	return map[string]string{"echo": ev.Echo}, nil
}

// testFunctionConfig is testFunction as a function the front serves: the
// test binary itself.
func testFunctionConfig(t *testing.T, name string, timeout time.Duration, concurrency int) Function {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	return Function{
		Name:        name,
		Bootstrap:   exe,
		MemoryMB:    256,
		Timeout:     Duration(timeout),
		Concurrency: concurrency,
		Env:         map[string]string{testFunctionEnv: "1"},
	}
}

// requireRIE skips the test when aws-lambda-rie is not on PATH, but fails
// it in CI (CI or HPSEARCH_REQUIRE_LAMBDA set), which must have it.
func requireRIE(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return
	}
	const install = "install it with: go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest, and put $(go env GOPATH)/bin on PATH"
	for _, name := range []string{"CI", "HPSEARCH_REQUIRE_LAMBDA"} {
		if v := os.Getenv(name); v != "" && v != "0" && v != "false" {
			t.Fatalf("aws-lambda-rie is not on PATH, and the Lambda tests may not be skipped (%s=%s): %s", name, v, install)
		}
	}
	t.Skipf("aws-lambda-rie is not on PATH: %s", install)
}

var (
	bootstrapOnce sync.Once
	bootstrapDir  string
	bootstrapPath string
	bootstrapErr  error
)

// trainerBootstrap builds the trainer's real bootstrap (once per test
// binary) and returns its path.
func trainerBootstrap(t *testing.T) string {
	t.Helper()
	bootstrapOnce.Do(func() {
		if bootstrapDir, bootstrapErr = os.MkdirTemp("", "lambdafront-test-"); bootstrapErr != nil {
			return
		}
		bootstrapPath = filepath.Join(bootstrapDir, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrapPath, "github.com/hpsearch/hpsearch/functions/trainer/cmd/bootstrap")
		if out, err := cmd.CombinedOutput(); err != nil {
			bootstrapErr = fmt.Errorf("build the trainer's bootstrap: %w\n%s", err, out)
		}
	})
	if bootstrapErr != nil {
		t.Fatal(bootstrapErr)
	}
	return bootstrapPath
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
