// Command bootstrap is the hpsearch trainer as one static binary for every
// function platform. It picks its transport from the environment:
//
//   - AWS_LAMBDA_RUNTIME_API set: an AWS Lambda function on the
//     provided.al2023 custom runtime, whose bootstrap it is (package
//     functions/trainer/lambda); the same serves aws-lambda-rie;
//   - CLOUD_RUN_JOB set: a task of a Google Cloud Run job execution
//     (package functions/trainer/cloudrun);
//   - neither: one SegmentRequest as JSON on standard input and its
//     SegmentResult on standard output, as the local executor runs the
//     trainer, for running it by hand.
//
// Build it for Lambda with `make lambda-zip`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/functions/trainer/cloudrun"
	"github.com/hpsearch/hpsearch/functions/trainer/lambda"
)

func main() { os.Exit(run()) }

func run() int {
	var err error
	switch {
	case os.Getenv("AWS_LAMBDA_RUNTIME_API") != "":
		lambda.Start() // never returns
	case os.Getenv("CLOUD_RUN_JOB") != "":
		err = cloudrun.RunTask(context.Background())
	default:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = trainer.ServeStdio(ctx, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootstrap: %v\n", err)
		return 1
	}
	return 0
}
