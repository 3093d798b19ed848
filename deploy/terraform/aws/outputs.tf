output "function_name" {
  description = "Name of the trainer function."
  value       = aws_lambda_function.trainer.function_name
}

output "function_arn" {
  description = "ARN of the trainer function: backend.function in the space file."
  value       = aws_lambda_function.trainer.arn
}

output "region" {
  description = "Region of the function and the bucket: backend.region in the space file."
  value       = data.aws_region.current.name
}

output "memory_mb" {
  description = "Memory of the function in MB: backend.memory_mb in the space file, and what the ledger prices GB-seconds with."
  value       = aws_lambda_function.trainer.memory_size
}

output "architecture" {
  description = "Instruction set of the function (arm64 or x86_64): backend.architecture; it picks the price per GB-second."
  value       = var.architecture
}

output "max_runtime" {
  description = "Longest segment, 30 s under the function's timeout: backend.max_runtime in the space file."
  value       = local.max_runtime
}

output "concurrency" {
  description = "Invocations the coordinator may run at once: backend.concurrency in the space file."
  value       = var.concurrency
}

output "bucket" {
  description = "Name of the checkpoint bucket."
  value       = aws_s3_bucket.checkpoints.id
}

output "checkpoint_store" {
  description = "The checkpoint store URI, s3://BUCKET/PREFIX: checkpoint.store in the space file."
  value       = local.checkpoint_store
}

output "log_group" {
  description = "CloudWatch log group of the trainer function."
  value       = aws_cloudwatch_log_group.trainer.name
}

output "trainer_role_arn" {
  description = "ARN of the trainer's execution role."
  value       = aws_iam_role.trainer.arn
}

output "coordinator_policy_arn" {
  description = "ARN of the coordinator's managed policy, to attach to the user or role that runs `hpsearch run`; null when not created."
  value       = local.create_coordinator_policy ? aws_iam_policy.coordinator[0].arn : null
}

output "coordinator_policy_json" {
  description = "The coordinator's policy document as JSON, to attach by other means (a CI role, an SSO permission set)."
  value       = data.aws_iam_policy_document.coordinator.json
}

output "space_yaml_backend" {
  description = "The backend and checkpoint sections of a space file for this stack: paste `terraform output -raw space_yaml_backend` in place of the space file's own."
  value       = <<-EOT
    backend:
      type: lambda
      function: ${aws_lambda_function.trainer.arn}
      region: ${data.aws_region.current.name}
      memory_mb: ${aws_lambda_function.trainer.memory_size}
      architecture: ${var.architecture}
      max_runtime: ${local.max_runtime}
      concurrency: ${var.concurrency}
    checkpoint:
      store: ${local.checkpoint_store}
  EOT
}
