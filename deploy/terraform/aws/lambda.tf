# The trainer function: the same bootstrap binary that runs every backend's
# segments, on the provided.al2023 custom runtime. The coordinator invokes it
# synchronously, one segment per invocation.

resource "aws_cloudwatch_log_group" "trainer" {
  # The group Lambda writes to by default; created here so that it has a
  # retention and the role needs no logs:CreateLogGroup.
  name              = "/aws/lambda/${local.function_name}"
  retention_in_days = var.log_retention_days
}

resource "aws_lambda_function" "trainer" {
  function_name = local.function_name
  description   = "hpsearch trainer: runs one training segment per invocation"
  role          = aws_iam_role.trainer.arn

  runtime       = "provided.al2023"
  handler       = "bootstrap"
  architectures = [var.architecture]

  filename         = local.lambda_zip
  source_code_hash = filebase64sha256(local.lambda_zip)

  memory_size = var.memory_mb
  timeout     = var.timeout_seconds

  # -1: no reservation, the function shares the account's pool.
  reserved_concurrent_executions = var.reserve_concurrency ? var.concurrency : -1

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  environment {
    # Segment requests name their checkpoint store themselves; this one is
    # for people reading the configuration (and for the user's additions).
    variables = merge({ HPSEARCH_CHECKPOINT_STORE = local.checkpoint_store }, var.environment)
  }

  # The log group and the role's permissions exist before the first
  # invocation, so no log line and no checkpoint is lost to a race.
  depends_on = [
    aws_cloudwatch_log_group.trainer,
    aws_iam_role_policy.trainer,
  ]
}

# The coordinator invokes synchronously and retries segments itself, from
# their last checkpoint and fenced by attempt. Should anything invoke the
# function asynchronously, Lambda must not retry behind its back.
resource "aws_lambda_function_event_invoke_config" "trainer" {
  function_name          = aws_lambda_function.trainer.function_name
  maximum_retry_attempts = 0
}
