output "project" {
  description = "Project of the job and the bucket: backend.project in the space file."
  value       = var.project_id
}

output "region" {
  description = "Region of the job: backend.region in the space file."
  value       = google_cloud_run_v2_job.trainer.location
}

output "job_name" {
  description = "Name of the trainer job: backend.job in the space file."
  value       = google_cloud_run_v2_job.trainer.name
}

output "vcpu" {
  description = "vCPUs of each task: backend.vcpu in the space file, priced per vCPU-second."
  value       = var.cpu
}

output "memory_mb" {
  description = "Memory of each task in MiB: backend.memory_mb in the space file, priced per GiB-second."
  value       = var.memory_mb
}

output "gpus" {
  description = "NVIDIA L4 GPUs of each task, 0 or 1: backend.gpus in the space file, priced per GPU-second."
  value       = local.gpus
}

output "max_runtime" {
  description = "Longest segment, 30 s under the task timeout: backend.max_runtime in the space file."
  value       = local.max_runtime
}

output "bucket" {
  description = "Name of the checkpoint bucket."
  value       = google_storage_bucket.checkpoints.name
}

output "checkpoint_store" {
  description = "The checkpoint store URI, s3://BUCKET/PREFIX, reached through Cloud Storage's S3 API: checkpoint.store in the space file."
  value       = local.checkpoint_store
}

output "s3_endpoint" {
  description = "Cloud Storage's S3-compatible endpoint: AWS_ENDPOINT_URL_S3 for the coordinator."
  value       = local.s3_endpoint
}

output "trainer_service_account" {
  description = "Email of the trainer's service account."
  value       = google_service_account.trainer.email
}

output "trainer_hmac_access_id" {
  description = "Access ID of the trainer's HMAC key (its secret is in Secret Manager, given to the job only)."
  value       = google_storage_hmac_key.trainer.access_id
}

output "coordinator_hmac_access_id" {
  description = "Access ID of the coordinator's HMAC key: AWS_ACCESS_KEY_ID for `hpsearch run`; null when not created."
  value       = var.create_coordinator_hmac_key ? google_storage_hmac_key.coordinator[0].access_id : null
}

output "coordinator_hmac_secret" {
  description = "Secret of the coordinator's HMAC key: AWS_SECRET_ACCESS_KEY for `hpsearch run` (terraform output -raw coordinator_hmac_secret); null when not created."
  value       = var.create_coordinator_hmac_key ? google_storage_hmac_key.coordinator[0].secret : null
  sensitive   = true
}

output "space_yaml_backend" {
  description = "The backend and checkpoint sections of a space file for this stack: paste `terraform output -raw space_yaml_backend` in place of the space file's own."
  value       = <<-EOT
    backend:
      type: cloudrun
      project: ${var.project_id}
      region: ${google_cloud_run_v2_job.trainer.location}
      job: ${google_cloud_run_v2_job.trainer.name}
      vcpu: ${var.cpu}
      memory_mb: ${var.memory_mb}
      gpus: ${local.gpus}
      max_runtime: ${local.max_runtime}
    checkpoint:
      store: ${local.checkpoint_store}   # through Cloud Storage's S3 API: set AWS_ENDPOINT_URL_S3=${local.s3_endpoint} and the HMAC key as AWS credentials
  EOT
}
