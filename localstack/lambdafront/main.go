// Command lambdafront is the local stack's AWS Lambda data plane: the
// Lambda Invoke API on 127.0.0.1, in front of aws-lambda-rie processes
// that run the functions' real bootstraps (package
// localstack/lambdafront/front). Point an AWS SDK at it with
// AWS_ENDPOINT_URL_LAMBDA.
//
//	lambdafront -addr 127.0.0.1:0 -addr-file front.url \
//	    -function name=hpsearch-trainer,bootstrap=dist/lambda/amd64/bootstrap,memory=1024,timeout=30s,concurrency=4,env=AWS_ENDPOINT_URL=http://127.0.0.1:4566 \
//	    -control-plane http://127.0.0.1:4566
//
// It stops every aws-lambda-rie it started on SIGTERM or SIGINT.
package main

import (
	"os"

	"github.com/hpsearch/hpsearch/localstack/lambdafront/front"
)

func main() { os.Exit(front.Main(os.Args[1:], os.Stderr)) }
