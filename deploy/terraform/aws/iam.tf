# Least privilege. The trainer's role and the coordinator's policy reach
# only what hpsearch uses:
#   - objects under s3://BUCKET/PREFIX/ (not the rest of the bucket);
#   - listing the bucket's keys, which is how the checkpoint store finds
#     checkpoints, and which makes S3 answer 404 (not 403) for a result
#     not written yet;
#   - the trainer: writing to its own log group, nothing else of CloudWatch;
#   - the coordinator: invoking this one function.
# Nothing may create or delete buckets, change policies, or touch KMS.

locals {
  objects_arn = "${local.bucket_arn}/${var.checkpoint_prefix}/*"
}

# --- Trainer execution role --------------------------------------------------

data "aws_iam_policy_document" "trainer_assume" {
  statement {
    sid     = "LambdaAssumesTheTrainerRole"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "trainer" {
  name               = "${var.name}-trainer"
  description        = "hpsearch trainer function: its checkpoint prefix and its log group, nothing else"
  assume_role_policy = data.aws_iam_policy_document.trainer_assume.json
}

data "aws_iam_policy_document" "trainer" {
  # Restore, write and prune checkpoints and segment results. PutObject also
  # covers the multipart upload calls (create, upload part, complete);
  # AbortMultipartUpload lets a failed large upload clean up after itself.
  statement {
    sid    = "CheckpointObjects"
    effect = "Allow"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
    ]
    resources = [local.objects_arn]
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
    resources = [local.bucket_arn]
  }

  # The runtime's own log lines and the REPORT line the ledger reads. The
  # group exists already (lambda.tf), so no logs:CreateLogGroup.
  statement {
    sid       = "OwnLogGroup"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.trainer.arn}:*"]
  }
}

resource "aws_iam_role_policy" "trainer" {
  name   = "${var.name}-trainer"
  role   = aws_iam_role.trainer.id
  policy = data.aws_iam_policy_document.trainer.json
}

# --- Coordinator -------------------------------------------------------------

locals {
  create_coordinator_policy = var.create_coordinator_policy || var.coordinator_user_name != null
}

data "aws_iam_policy_document" "coordinator" {
  # Run segments (synchronous Invoke with the log tail, which carries the
  # REPORT line the ledger bills from). The ":*" form covers a qualified
  # ARN (a version or alias) of the same function, in case one is named.
  statement {
    sid       = "InvokeTrainer"
    effect    = "Allow"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.trainer.arn, "${aws_lambda_function.trainer.arn}:*"]
  }

  # Reconcile results stored by trainers, read checkpoint manifests, and
  # delete what the study's keep setting does not keep.
  statement {
    sid    = "CheckpointObjects"
    effect = "Allow"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
    ]
    resources = [local.objects_arn]
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
    resources = [local.bucket_arn]
  }
}

resource "aws_iam_policy" "coordinator" {
  count = local.create_coordinator_policy ? 1 : 0

  name        = "${var.name}-coordinator"
  description = "hpsearch coordinator: invoke the ${local.function_name} function and use its checkpoint prefix"
  policy      = data.aws_iam_policy_document.coordinator.json
}

resource "aws_iam_user_policy_attachment" "coordinator" {
  count = var.coordinator_user_name != null ? 1 : 0

  user       = var.coordinator_user_name
  policy_arn = aws_iam_policy.coordinator[0].arn
}
