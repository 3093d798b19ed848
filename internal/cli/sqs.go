package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/hpsearch/hpsearch/internal/blob/s3blob"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/sqsqueue"
)

// sqsPoolConfig is the retry policy of an SQS pool queue; the queue's
// redrive policy must have maxReceiveCount 10 (deploy/terraform/aws/pool
// sets it).
var sqsPoolConfig = queue.Config{MaxAttempts: 10}

// openSQSQueue opens sqs://QUEUE?records=BUCKET[&region=REGION]: the SQS
// queue named QUEUE, whose job records live in the S3 bucket BUCKET. The
// region, when given and AWS_REGION is not set, becomes AWS_REGION;
// credentials and endpoints come from the environment as for the AWS CLI.
func openSQSQueue(ctx context.Context, uri string) (*sqsqueue.Queue, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "sqs" || u.Host == "" {
		return nil, fmt.Errorf("queue %q: want sqs://QUEUE?records=BUCKET", uri)
	}
	bucket := u.Query().Get("records")
	if bucket == "" {
		return nil, fmt.Errorf("queue %q: add records=BUCKET, the S3 bucket that keeps the jobs' records", uri)
	}
	if r := u.Query().Get("region"); r != "" && os.Getenv("AWS_REGION") == "" {
		if err := os.Setenv("AWS_REGION", r); err != nil {
			return nil, err
		}
	}
	sqsClient, err := sqsqueue.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	s3Client, err := s3blob.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	q, err := sqsqueue.New(ctx, sqsqueue.Options{SQS: sqsClient, QueueName: u.Host, S3: s3Client, Bucket: bucket}, sqsPoolConfig)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", uri, err)
	}
	return q, nil
}
