output "queue_url" {
  description = "HTTPS URL of the pool's SQS queue (for the AWS CLI and SDKs)."
  value       = aws_sqs_queue.jobs.url
}

output "queue_arn" {
  description = "ARN of the pool's SQS queue."
  value       = aws_sqs_queue.jobs.arn
}

output "worker_queue" {
  description = "The queue as hpsearch names it, sqs://NAME?records=BUCKET&region=REGION: the worker's --queue and pool.queue in the space file."
  value       = local.worker_queue
}

output "dlq_url" {
  description = "HTTPS URL of the dead-letter queue, where jobs that failed 10 times end up."
  value       = aws_sqs_queue.dead.url
}

output "dlq_arn" {
  description = "ARN of the dead-letter queue."
  value       = aws_sqs_queue.dead.arn
}

output "asg_name" {
  description = "Name of the Auto Scaling group of workers."
  value       = aws_autoscaling_group.pool.name
}

output "launch_template_id" {
  description = "ID of the workers' launch template."
  value       = aws_launch_template.worker.id
}

output "ami_id" {
  description = "AMI the workers boot from."
  value       = data.aws_ami.worker.id
}

output "worker_role_arn" {
  description = "ARN of the workers' IAM role."
  value       = aws_iam_role.worker.arn
}

output "security_group_id" {
  description = "ID of the workers' security group (no ingress)."
  value       = aws_security_group.worker.id
}

output "log_group" {
  description = "CloudWatch log group of the workers' journal; null unless cloudwatch_logs is on."
  value       = var.cloudwatch_logs ? aws_cloudwatch_log_group.worker[0].name : null
}

output "coordinator_policy_json" {
  description = "The policy the coordinator needs for this pool (open its queue, enqueue jobs and their records), as JSON, to attach to the identity that runs `hpsearch run` alongside the aws/ stack's coordinator policy."
  value       = data.aws_iam_policy_document.coordinator.json
}

output "price_per_hour" {
  description = "USD per instance-hour that the space file's pool.price_per_hour says: price_per_hour, or the highest built-in on-demand price among instance_types."
  value       = local.price_per_hour
}

output "space_yaml_pool" {
  description = "The pool section of a space file for this pool: paste `terraform output -raw space_yaml_pool` into the space file."
  value       = <<-EOT
    pool:
      name: ${var.pool_name}
      queue: ${local.worker_queue}
      instance_type: ${local.first_instance_type}
      price_per_hour: ${local.price_per_hour}
  EOT
}
