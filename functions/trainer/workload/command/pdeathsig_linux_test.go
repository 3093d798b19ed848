package command

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// helperDirEnv, when set, makes TestPdeathsigHelper run a command in that
// directory instead of being skipped.
const helperDirEnv = "HPSEARCH_TEST_PDEATHSIG_DIR"

// TestPdeathsigHelper is the trainer that TestCommandDiesWithTrainer kills.
func TestPdeathsigHelper(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCommandDiesWithTrainer")
	}
	w := hptype.Workload{Command: []string{"sh", "-c", "echo $$ > cmd.pid; exec sleep 30"}, Dir: dir}
	Run(context.Background(), w, Inputs{}, func(hptype.Metric) {})
}

func TestCommandDiesWithTrainer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	trainer := exec.Command(os.Args[0], "-test.run=^TestPdeathsigHelper$")
	trainer.Env = append(os.Environ(), helperDirEnv+"="+dir)
	if err := trainer.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, dir, "cmd.pid")
	if err := trainer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	trainer.Wait()
	waitFor(t, "the command (pid "+strconv.Itoa(pid)+") to die with the trainer", func() bool { return gone(pid) })
}
