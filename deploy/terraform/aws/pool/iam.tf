# Least privilege. The workers' role reaches only what `hpsearch worker`
# (its SQS queue, internal/queue/sqsqueue, and the checkpoint store) and
# the instance's boot and drain scripts use:
#   - this pool's queue: receive, delete, extend a lease
#     (ChangeMessageVisibility), send (a job handed back, or failed and
#     retried later, gets a new message), read the redrive policy, and look
#     the URL up from the name in sqs://NAME?records=...;
#   - the dead-letter queue: look it up, and send a job there that failed
#     its last attempt;
#   - the job records under s3://BUCKET/sqsqueue/NAME-POOL/: read, write
#     and delete (conditional writes need nothing more);
#   - objects under s3://BUCKET/PREFIX/ (not the rest of the bucket), and
#     listing only keys under PREFIX/;
#   - the binary's one object, when it comes from S3;
#   - completing the drain lifecycle hook of this one Auto Scaling group;
#   - optionally: writing to the pool's own log group, and SSM's managed
#     instance policy.
# Nothing may create, delete or reconfigure a queue or a bucket, or use KMS.

data "aws_iam_policy_document" "worker_assume" {
  statement {
    sid     = "EC2AssumesTheWorkerRole"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "worker" {
  name               = "${local.pool_id}-worker"
  description        = "hpsearch ${var.pool_name} pool workers: their queue, their checkpoint prefix, their drain hook"
  assume_role_policy = data.aws_iam_policy_document.worker_assume.json
}

resource "aws_iam_instance_profile" "worker" {
  name = "${local.pool_id}-worker"
  role = aws_iam_role.worker.name
}

data "aws_iam_policy_document" "worker" {
  # Lease jobs, heartbeat, hand back, finish. The batch calls
  # (DeleteMessageBatch, ...) are authorized by the same actions.
  statement {
    sid    = "ConsumeJobs"
    effect = "Allow"
    actions = [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:SendMessage",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
    ]
    resources = [aws_sqs_queue.jobs.arn]
  }

  statement {
    sid       = "DeadLetterJobs"
    effect    = "Allow"
    actions   = ["sqs:SendMessage", "sqs:GetQueueUrl"]
    resources = [aws_sqs_queue.dead.arn]
  }

  # The queue's record of each job: its state and lease, the truth that
  # fences a stale worker.
  statement {
    sid       = "JobRecords"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = [local.records_arn]
  }

  # Restore, write and prune checkpoints and segment results. PutObject also
  # covers the multipart upload calls; AbortMultipartUpload lets a failed
  # large upload clean up after itself.
  statement {
    sid    = "CheckpointObjects"
    effect = "Allow"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
    ]
    resources = [local.checkpoint_objects_arn]
  }

  # List keys (names only) to find the newest valid checkpoint. On the
  # whole bucket, not only the prefix: S3 answers a read of a key that does
  # not exist (a segment result not written yet, which hpsearch polls for)
  # with 404 only to a caller allowed to list the bucket, and with 403 to
  # any other, and a prefix condition does not apply to reads.
  statement {
    sid       = "ListCheckpointBucket"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [local.checkpoint_bucket_arn]
  }

  # The drain service tells Auto Scaling that the worker has stopped.
  statement {
    sid       = "CompleteDrainHook"
    effect    = "Allow"
    actions   = ["autoscaling:CompleteLifecycleAction"]
    resources = [local.asg_arn]
  }

  dynamic "statement" {
    for_each = local.binary_from_s3 ? [local.binary_object_arn] : []

    content {
      sid       = "DownloadWorkerBinary"
      effect    = "Allow"
      actions   = ["s3:GetObject"]
      resources = [statement.value]
    }
  }

  # The CloudWatch agent writes the worker's journal to the pool's own
  # group (created by Terraform, so no logs:CreateLogGroup).
  dynamic "statement" {
    for_each = var.cloudwatch_logs ? [aws_cloudwatch_log_group.worker[0].arn] : []

    content {
      sid       = "OwnLogGroup"
      effect    = "Allow"
      actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
      resources = ["${statement.value}:*"]
    }
  }
}

resource "aws_iam_role_policy" "worker" {
  name   = "${local.pool_id}-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count = var.enable_ssm ? 1 : 0

  role       = aws_iam_role.worker.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

# What the coordinator needs of the pool, to attach to the identity that
# runs `hpsearch run` next to the aws/ stack's coordinator policy (which
# covers the checkpoint prefix): open the queue (its URL, its redrive
# policy, its dead-letter queue's URL) and enqueue jobs, each a record
# (created with If-None-Match, then marked sent) and a message.
data "aws_iam_policy_document" "coordinator" {
  statement {
    sid    = "EnqueueJobs"
    effect = "Allow"
    actions = [
      "sqs:SendMessage",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
    ]
    resources = [aws_sqs_queue.jobs.arn]
  }

  statement {
    sid       = "FindDeadLetterQueue"
    effect    = "Allow"
    actions   = ["sqs:GetQueueUrl"]
    resources = [aws_sqs_queue.dead.arn]
  }

  statement {
    sid       = "JobRecords"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = [local.records_arn]
  }
}
