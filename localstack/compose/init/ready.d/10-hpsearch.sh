#!/usr/bin/env bash
# LocalStack init hook (ready stage): creates what hpsearch's AWS backends
# expect, with awslocal, inside the LocalStack container:
#   - the bucket "hpsearch" for checkpoints;
#   - the SQS queue "hpsearch-gpu" and its dead-letter queue
#     "hpsearch-gpu-dead" (a message received 10 times goes there, as a
#     pool's SQS queue must be set up);
#   - the trainer function "hpsearch-trainer": provided.al2023, x86_64,
#     handler bootstrap, 1024 MB, 30 s, from the zip mounted by compose,
#     reaching S3 at http://localstack:4566 from its own container.
# It runs at every start and is idempotent: what exists is kept (the function
# gets the mounted zip's code again).
set -euo pipefail

BUCKET=hpsearch
QUEUE=hpsearch-gpu
DLQ=hpsearch-gpu-dead
MAX_RECEIVES=10
FUNCTION=hpsearch-trainer
ROLE=hpsearch-trainer
# Where compose mounts the zip; overridable to try the hook elsewhere.
ZIP=${HPSEARCH_TRAINER_ZIP:-/opt/hpsearch/trainer-lambda-amd64.zip}

log() { echo "hpsearch init: $*"; }

if [[ ! -s "$ZIP" ]]; then
	log "$ZIP is missing or empty: build the trainer's x86_64 zip at the repository root (dist/trainer-lambda-amd64.zip) and start again" >&2
	exit 1
fi

# --- Bucket ---------------------------------------------------------------

if awslocal s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
	log "bucket $BUCKET exists"
else
	awslocal s3api create-bucket --bucket "$BUCKET" >/dev/null
	log "created bucket $BUCKET"
fi

# --- Queues ---------------------------------------------------------------

# create-queue returns the existing queue's URL when the attributes match.
dlq_url=$(awslocal sqs create-queue --queue-name "$DLQ" --query QueueUrl --output text)
dlq_arn=$(awslocal sqs get-queue-attributes --queue-url "$dlq_url" \
	--attribute-names QueueArn --query Attributes.QueueArn --output text)

attributes=$(mktemp)
trap 'rm -f "$attributes"' EXIT
# RedrivePolicy is a JSON document inside a JSON string.
cat >"$attributes" <<JSON
{
  "VisibilityTimeout": "30",
  "RedrivePolicy": "{\"deadLetterTargetArn\":\"$dlq_arn\",\"maxReceiveCount\":\"$MAX_RECEIVES\"}"
}
JSON
queue_url=$(awslocal sqs create-queue --queue-name "$QUEUE" --query QueueUrl --output text)
awslocal sqs set-queue-attributes --queue-url "$queue_url" --attributes "file://$attributes"
log "queue $queue_url (dead letters to $dlq_arn after $MAX_RECEIVES receives)"

# --- Trainer function -----------------------------------------------------

if role_arn=$(awslocal iam get-role --role-name "$ROLE" --query Role.Arn --output text 2>/dev/null); then
	log "role $role_arn exists"
else
	role_arn=$(awslocal iam create-role --role-name "$ROLE" \
		--assume-role-policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}' \
		--query Role.Arn --output text)
	log "created role $role_arn"
fi

if awslocal lambda get-function --function-name "$FUNCTION" >/dev/null 2>&1; then
	awslocal lambda update-function-code --function-name "$FUNCTION" \
		--zip-file "fileb://$ZIP" >/dev/null
	awslocal lambda wait function-updated-v2 --function-name "$FUNCTION"
	log "updated the code of function $FUNCTION"
else
	awslocal lambda create-function \
		--function-name "$FUNCTION" \
		--runtime provided.al2023 \
		--architectures x86_64 \
		--handler bootstrap \
		--memory-size 1024 \
		--timeout 30 \
		--role "$role_arn" \
		--zip-file "fileb://$ZIP" \
		--environment '{"Variables":{"AWS_ENDPOINT_URL":"http://localstack:4566"}}' >/dev/null
	log "created function $FUNCTION"
fi
awslocal lambda wait function-active-v2 --function-name "$FUNCTION"
log "function $FUNCTION is active; ready"
