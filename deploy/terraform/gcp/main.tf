# hpsearch on Google Cloud: a checkpoint bucket, the trainer as a Cloud Run
# job with its own service account, an HMAC key through which the trainer
# (and the coordinator) reach the bucket with the same S3 code as on AWS,
# and the coordinator's access to the job. See docs/deploy.md.

locals {
  bucket_name     = coalesce(var.bucket_name, "${var.project_id}-${var.name}-checkpoints")
  bucket_location = coalesce(var.bucket_location, upper(var.region))

  checkpoint_store = "s3://${google_storage_bucket.checkpoints.name}/${var.checkpoint_prefix}"

  # Cloud Storage's S3-compatible XML API. The AWS SDK signs with any region
  # name: Cloud Storage ignores the location in the credential scope.
  s3_endpoint = "https://storage.googleapis.com"

  # The longest segment the coordinator asks for: 30 s under the task
  # timeout, so the trainer stops, checkpoints and exits before Cloud Run
  # kills it. A Go duration, as the space file wants it.
  max_runtime = "${var.task_timeout_seconds - 30}s"

  # GPUs per task, which the ledger prices per GPU-second.
  gpus = var.gpu ? 1 : 0

  apis = toset([
    "iam.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? local.apis : toset([])

  project = var.project_id
  service = each.value

  # Other things in the project may use them too.
  disable_on_destroy = false
}

# --- Checkpoint bucket -------------------------------------------------------

resource "google_storage_bucket" "checkpoints" {
  project       = var.project_id
  name          = local.bucket_name
  location      = local.bucket_location
  storage_class = "STANDARD"
  force_destroy = var.force_destroy

  # IAM only (no object ACLs), and never public whatever a policy says.
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  # Checkpoints are immutable and pruned by the coordinator; versions or
  # soft-deleted copies of pruned shards would be billed for nothing.
  versioning {
    enabled = false
  }

  soft_delete_policy {
    retention_duration_seconds = 0
  }

  # A safety net: the coordinator prunes checkpoints itself (keep_last,
  # keep), but a study abandoned half-way would otherwise be billed forever.
  lifecycle_rule {
    condition {
      age            = var.checkpoint_retention_days
      matches_prefix = ["${var.checkpoint_prefix}/"]
    }
    action {
      type = "Delete"
    }
  }

  # Parts of S3-API multipart uploads that a killed trainer never completed.
  lifecycle_rule {
    condition {
      age = var.abort_incomplete_upload_days
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }

  depends_on = [google_project_service.apis]
}

# --- Trainer identity --------------------------------------------------------

resource "google_service_account" "trainer" {
  project      = var.project_id
  account_id   = "${var.name}-trainer"
  display_name = "hpsearch trainer (Cloud Run job ${var.name}-trainer)"
  description  = "Runs hpsearch training segments: reads and writes checkpoints in ${local.bucket_name}, nothing else."

  depends_on = [google_project_service.apis]
}

# Least privilege: object access on this one bucket, granted on the bucket
# (not the project). roles/storage.objectUser is objectAdmin without the
# object IAM permissions, which uniform access makes moot anyway: get, list,
# create, delete objects and multipart uploads. Cloud Storage cannot limit
# listing to a prefix, which is why the bucket is hpsearch's alone.
resource "google_storage_bucket_iam_member" "trainer_objects" {
  bucket = google_storage_bucket.checkpoints.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.trainer.email}"
}

# The trainer's S3 credentials: an HMAC key of its service account. Its
# secret goes to Secret Manager and into the container from there, so it is
# not readable from the job's configuration. (Terraform state holds it too:
# keep the state private.)
resource "google_storage_hmac_key" "trainer" {
  project               = var.project_id
  service_account_email = google_service_account.trainer.email
}

resource "google_secret_manager_secret" "trainer_hmac" {
  project   = var.project_id
  secret_id = "${var.name}-trainer-hmac-secret"

  replication {
    auto {}
  }

  depends_on = [google_project_service.apis]
}

resource "google_secret_manager_secret_version" "trainer_hmac" {
  secret      = google_secret_manager_secret.trainer_hmac.id
  secret_data = google_storage_hmac_key.trainer.secret
}

# The trainer may read this one secret, nothing else of Secret Manager.
resource "google_secret_manager_secret_iam_member" "trainer_hmac" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.trainer_hmac.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.trainer.email}"
}
