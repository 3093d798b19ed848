package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/executor/cloudrun"
	lambdaexec "github.com/hpsearch/hpsearch/internal/executor/lambda"
	"github.com/hpsearch/hpsearch/internal/executor/local"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// newExecutor returns the executor of the space file's backend and a
// function that releases it.
func newExecutor(ctx context.Context, sp *spec.Spec, ckpts *checkpoint.Store, logger *slog.Logger) (executor.Executor, func(), error) {
	b := sp.Backend
	switch b.Type {
	case spec.Lambda:
		e, err := lambdaexec.New(ctx, lambdaexec.Config{
			Function:    b.Function,
			Region:      b.Region,
			Concurrency: b.Concurrency,
			MemoryMB:    b.MemoryMB,
			Logger:      logger,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("backend lambda: %w", err)
		}
		return e, func() {}, nil
	case spec.CloudRun:
		e, err := cloudrun.New(ctx, cloudrun.Config{
			Project:     b.Project,
			Job:         b.Job,
			VCPU:        b.VCPU,
			MemoryMB:    b.MemoryMB,
			GPUs:        b.GPUs,
			Checkpoints: ckpts,
			Logger:      logger,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("backend cloudrun: %w", err)
		}
		return e, func() { e.Close() }, nil
	}
	e, err := local.New(local.Config{})
	return e, func() {}, err
}
