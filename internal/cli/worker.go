package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/executor/local"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/httpqueue"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/worker"
)

// envToken is the bearer token a worker presents to an HTTP pool queue.
const envToken = "HPSEARCH_TOKEN"

// defaultIMDS is the EC2 instance metadata service.
const defaultIMDS = "http://169.254.169.254"

func newWorkerCmd(g *globals) *cobra.Command {
	var (
		poolName, queueURL, workDir, id, instanceType string
		price                                         float64
		visibility, spotPoll                          time.Duration
		spotNotice                                    bool
	)
	cmd := &cobra.Command{
		Use:   "worker --pool NAME --queue URL",
		Short: "Run segments of a worker pool's trials on this machine until stopped",
		Long: `worker runs on a (GPU) machine of a pool: it leases the segment jobs of the
trials placed on the pool, runs each with the trainer runtime (checkpoints
and results go to the study's checkpoint store, named in each job), and
extends its lease while it runs.

The queue is the one hpsearch run serves for the pool (pool.queue: http):
--queue http://HOST:PORT (pool.listen), or https://HOST:PORT when the
coordinator has HPSEARCH_POOL_TLS_CERT and HPSEARCH_POOL_TLS_KEY (trust its
certificate through the system's roots or SSL_CERT_FILE), with the pool's
secret in $HPSEARCH_TOKEN; or an SQS queue: --queue sqs://QUEUE?records=BUCKET.

On SIGTERM or SIGINT (or, with --spot-notice, a spot interruption notice
from the EC2 instance metadata service), the running segment checkpoints,
its job goes back to the coordinator, and the worker exits; another worker
continues the trial from the checkpoint. Machines are billed by the hour,
busy or idle: the worker records both in its ledger.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if poolName == "" || queueURL == "" {
				return usageError(fmt.Errorf("worker needs --pool and --queue"))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// A worker is a daemon: its log is its record of what it ran.
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			q, err := openWorkerQueue(ctx, queueURL)
			if err != nil {
				return usageError(err)
			}
			defer q.Close()
			exec, err := local.New(local.Config{})
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("price-per-hour") {
				price = spec.PoolPricePerHour[instanceType]
			}
			if spotNotice {
				base := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
				if base == "" {
					base = defaultIMDS
				}
				sctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go worker.SpotNotice(sctx, &http.Client{Timeout: 2 * time.Second}, base, spotPoll, logger, func(action string) {
					logger.Warn("spot interruption notice; checkpointing and stopping", "action", action)
					stop()
				})
			}
			return worker.Run(ctx, worker.Config{
				Pool: poolName, ID: id, Queue: q, Executor: exec,
				OpenStore:    bloburl.Open,
				WorkDir:      workDir,
				InstanceType: instanceType, PricePerHour: price,
				Visibility: visibility, Logger: logger,
			})
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&poolName, "pool", "", "the pool's name (pool.name in the space file)")
	f.StringVar(&queueURL, "queue", "", "the pool's queue: http://HOST:PORT (token in $HPSEARCH_TOKEN) or sqs://QUEUE?records=BUCKET")
	f.StringVar(&workDir, "work-dir", filepath.Join(os.TempDir(), "hpsearch-worker"), "directory for trial logs")
	f.StringVar(&id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "the worker's name in its pool's ledger")
	f.StringVar(&instanceType, "instance-type", "", "the machine type, e.g. g5.xlarge (sets the default price)")
	f.Float64Var(&price, "price-per-hour", 0, "what the machine costs per hour, busy or idle (default: the list price of --instance-type)")
	f.DurationVar(&visibility, "visibility", 30*time.Second, "lease visibility timeout; the lease is extended at 0.8 x this")
	f.BoolVar(&spotNotice, "spot-notice", false, "stop (checkpointing) on an EC2 spot interruption notice from the instance metadata service")
	f.DurationVar(&spotPoll, "spot-poll", 5*time.Second, "how often --spot-notice polls the metadata service")
	return cmd
}

// openWorkerQueue opens the queue a worker leases from.
func openWorkerQueue(ctx context.Context, uri string) (queue.Queue, error) {
	switch {
	case strings.HasPrefix(uri, "sqs://"):
		return openSQSQueue(ctx, uri)
	case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
		token := os.Getenv(envToken)
		if token == "" {
			return nil, fmt.Errorf("set %s to the pool's secret (the coordinator's %s)", envToken, envPoolToken)
		}
		return httpqueue.NewClient(uri, httpqueue.ClientOptions{Token: token}), nil
	}
	return nil, fmt.Errorf("--queue %q: want http://HOST:PORT or sqs://QUEUE?records=BUCKET", uri)
}
