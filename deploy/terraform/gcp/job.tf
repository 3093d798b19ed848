# The trainer as a Cloud Run job: the same bootstrap binary as on Lambda, in
# deploy/docker's image; it sees CLOUD_RUN_JOB and runs one segment per
# execution. The coordinator starts an execution per segment, with the
# segment's request as an override, and waits for it.

locals {
  limits = merge(
    {
      cpu    = tostring(var.cpu)
      memory = "${var.memory_mb}Mi"
    },
    local.gpus > 0 ? { "nvidia.com/gpu" = tostring(local.gpus) } : {},
  )

  trainer_env = merge(
    {
      # Reach the bucket through Cloud Storage's S3 API with the HMAC key.
      AWS_ENDPOINT_URL_S3 = local.s3_endpoint
      AWS_REGION          = "auto"
      AWS_ACCESS_KEY_ID   = google_storage_hmac_key.trainer.access_id
      # Cloud Storage rejects the SDK's default flexible checksums
      # (aws-chunked uploads with trailing CRC32): only when an API needs one.
      AWS_REQUEST_CHECKSUM_CALCULATION = "when_required"
      AWS_RESPONSE_CHECKSUM_VALIDATION = "when_required"
      HPSEARCH_CHECKPOINT_STORE        = local.checkpoint_store
    },
    var.environment,
  )
}

resource "google_cloud_run_v2_job" "trainer" {
  project  = var.project_id
  location = var.region
  name     = "${var.name}-trainer"

  # The job holds no data (checkpoints are in the bucket): let
  # `terraform destroy` remove it.
  deletion_protection = false

  template {
    # One segment per execution: one task.
    task_count  = 1
    parallelism = 1

    template {
      service_account = google_service_account.trainer.email
      timeout         = "${var.task_timeout_seconds}s"
      max_retries     = var.max_retries

      containers {
        image = var.image

        resources {
          limits = local.limits
        }

        dynamic "env" {
          for_each = local.trainer_env
          content {
            name  = env.key
            value = env.value
          }
        }

        env {
          name = "AWS_SECRET_ACCESS_KEY"
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.trainer_hmac.secret_id
              version = google_secret_manager_secret_version.trainer_hmac.version
            }
          }
        }
      }

      dynamic "node_selector" {
        for_each = var.gpu ? ["nvidia-l4"] : []
        content {
          accelerator = node_selector.value
        }
      }

      # As Google's GPU job example: no capacity held in a second zone. A
      # segment lost to a zone outage is retried from its checkpoint anyway.
      gpu_zonal_redundancy_disabled = var.gpu ? true : null
    }
  }

  lifecycle {
    precondition {
      condition     = var.memory_mb <= var.cpu * 4096
      error_message = "memory_mb ${var.memory_mb} is more than Cloud Run gives ${var.cpu} vCPU (at most 4096 MiB per vCPU): raise cpu or lower memory_mb."
    }
    precondition {
      condition     = var.cpu < 4 || var.memory_mb >= (var.cpu >= 6 ? 4096 : 2048)
      error_message = "Cloud Run needs at least 2048 MiB with 4 vCPU and 4096 MiB with 6 or 8: raise memory_mb."
    }
    precondition {
      condition     = !var.gpu || (var.cpu >= 4 && var.memory_mb >= 16384)
      error_message = "A GPU task needs cpu >= 4 and memory_mb >= 16384."
    }
  }

  # The service account must be able to read the secret when the job is
  # created, and to reach the bucket when it first runs.
  depends_on = [
    google_project_service.apis,
    google_secret_manager_secret_iam_member.trainer_hmac,
    google_storage_bucket_iam_member.trainer_objects,
  ]
}

# --- Coordinator -------------------------------------------------------------

# Run executions of this job with the segment as an override, read them, and
# cancel them: granted on the job alone, not the project.
resource "google_cloud_run_v2_job_iam_member" "coordinator" {
  for_each = toset(var.coordinator_members)

  project  = google_cloud_run_v2_job.trainer.project
  location = google_cloud_run_v2_job.trainer.location
  name     = google_cloud_run_v2_job.trainer.name
  role     = var.coordinator_job_role
  member   = each.value
}

# Running a job returns a long-running operation whose name is the
# project's (projects/P/locations/R/operations/ID), not the job's, so
# waiting on it needs run.operations.get on the project. This custom role
# holds that one read-only permission.
resource "google_project_iam_custom_role" "coordinator_operations" {
  count = length(var.coordinator_members) > 0 ? 1 : 0

  project     = var.project_id
  role_id     = "${replace(var.name, "-", "_")}_coordinator_operations"
  title       = "hpsearch coordinator: read Cloud Run operations"
  description = "Lets the hpsearch coordinator wait for the executions it starts."
  permissions = ["run.operations.get"]
}

resource "google_project_iam_member" "coordinator_operations" {
  for_each = toset(var.coordinator_members)

  project = var.project_id
  role    = google_project_iam_custom_role.coordinator_operations[0].name
  member  = each.value
}

# The coordinator's own S3 credentials for the bucket: a service account
# with the same object access as the trainer and nothing else, and its HMAC
# key. Revoke it (or taint it) without touching running trainers.
resource "google_service_account" "coordinator" {
  count = var.create_coordinator_hmac_key ? 1 : 0

  project      = var.project_id
  account_id   = "${var.name}-coordinator"
  display_name = "hpsearch coordinator (checkpoint access)"
  description  = "Holds the HMAC key the hpsearch coordinator uses for ${local.bucket_name}, nothing else."

  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_iam_member" "coordinator_objects" {
  count = var.create_coordinator_hmac_key ? 1 : 0

  bucket = google_storage_bucket.checkpoints.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.coordinator[0].email}"
}

resource "google_storage_hmac_key" "coordinator" {
  count = var.create_coordinator_hmac_key ? 1 : 0

  project               = var.project_id
  service_account_email = google_service_account.coordinator[0].email
}
