# hpsearch on AWS: a checkpoint bucket, the trainer Lambda function with its
# log group and least-privilege role, and an optional policy for the
# coordinator (the machine that runs `hpsearch run`). See docs/deploy.md.

data "aws_region" "current" {}

locals {
  function_name = "${var.name}-trainer"

  # make lambda-zip names its packages after Go's GOARCH: arm64, amd64.
  zip_arch   = var.architecture == "arm64" ? "arm64" : "amd64"
  lambda_zip = coalesce(var.lambda_zip, "${path.module}/../../../dist/trainer-lambda-${local.zip_arch}.zip")

  bucket_arn       = aws_s3_bucket.checkpoints.arn
  checkpoint_store = "s3://${aws_s3_bucket.checkpoints.id}/${var.checkpoint_prefix}"

  # The longest segment the coordinator asks for: 30 s under the function's
  # timeout, so the trainer stops, checkpoints and answers before Lambda
  # kills it. A Go duration, as the space file wants it.
  max_runtime = "${var.timeout_seconds - 30}s"
}

# --- Checkpoint bucket -------------------------------------------------------

resource "aws_s3_bucket" "checkpoints" {
  bucket        = var.bucket_name
  bucket_prefix = var.bucket_name == null ? "${var.name}-checkpoints-" : null
  force_destroy = var.force_destroy
}

# ACLs off: the bucket owner owns every object, access is by IAM alone.
resource "aws_s3_bucket_ownership_controls" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# SSE-S3 (AES-256, keys managed by S3): no KMS key, so the roles below need
# no kms:* permission and no KMS request is billed per checkpoint shard.
resource "aws_s3_bucket_server_side_encryption_configuration" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

# Versioning stays off: checkpoints are immutable (the manifest is created
# with If-None-Match) and retention deletes old ones; with versioning on,
# every deleted shard would live on, billed, as a noncurrent version.
resource "aws_s3_bucket_versioning" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  versioning_configuration {
    status = "Disabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id

  rule {
    id     = "expire-hpsearch-checkpoints"
    status = "Enabled"

    filter {
      prefix = "${var.checkpoint_prefix}/"
    }

    # A safety net: the coordinator prunes checkpoints itself (keep_last,
    # keep), but a study abandoned half-way would otherwise be billed forever.
    expiration {
      days = var.checkpoint_retention_days
    }

    # Parts of uploads that a killed trainer never completed or aborted.
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_upload_days
    }
  }

  depends_on = [aws_s3_bucket_versioning.checkpoints]
}

# Refuse plain-HTTP requests, whoever makes them.
data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [local.bucket_arn, "${local.bucket_arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id
  policy = data.aws_iam_policy_document.bucket.json

  # S3 rejects a bucket policy while the public access block is being set.
  depends_on = [aws_s3_bucket_public_access_block.checkpoints]
}
