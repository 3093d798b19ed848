package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/hpsearch/hpsearch/functions/trainer"
)

// TestMain makes the test binary the trainer the local executor starts
// (`SELF trainer`), so the browser test's study runs real trainer
// processes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "trainer" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := trainer.ServeStdio(ctx, os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
