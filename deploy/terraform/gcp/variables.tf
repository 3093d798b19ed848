# Inputs of the GCP stack. project_id and image have no default: the project
# to deploy to, and the trainer image you pushed (see docs/deploy.md).

variable "project_id" {
  description = "ID of the Google Cloud project to deploy to."
  type        = string
}

variable "region" {
  description = "Region of the Cloud Run job and, unless bucket_location says otherwise, of the bucket. L4 GPUs for jobs are offered in a few regions only (us-central1 among them)."
  type        = string
  default     = "us-central1"
}

variable "name" {
  description = "Name prefix of every resource: the job is NAME-trainer, its service account NAME-trainer@..., the bucket PROJECT-NAME-checkpoints."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,17}$", var.name))
    error_message = "name must be 1 to 18 characters of a-z, 0-9 and -, starting with a letter (service account IDs are at most 30 characters)."
  }
}

variable "labels" {
  description = "Labels added to every resource that takes labels (on top of hpsearch-stack = name)."
  type        = map(string)
  default     = {}
}

variable "enable_apis" {
  description = "Enable the APIs the stack uses (Cloud Run, Cloud Storage, Secret Manager, IAM) in the project. They are left enabled on destroy."
  type        = bool
  default     = true
}

# --- Checkpoint bucket -------------------------------------------------------

variable "bucket_name" {
  description = "Name of the checkpoint bucket. null uses PROJECT-NAME-checkpoints (project IDs are globally unique, so is this)."
  type        = string
  default     = null
}

variable "bucket_location" {
  description = "Location of the bucket. null puts it in the job's region, so checkpoints move without inter-region transfer charges."
  type        = string
  default     = null
}

variable "checkpoint_prefix" {
  description = "Object name prefix under which trainers and the coordinator keep checkpoints and results."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.checkpoint_prefix))
    error_message = "checkpoint_prefix must be a non-empty prefix without leading or trailing '/', e.g. \"hpsearch\" or \"team/hpsearch\"."
  }
}

variable "checkpoint_retention_days" {
  description = "Days after which objects under the checkpoint prefix are deleted by the bucket's lifecycle rule, whatever the study's keep setting."
  type        = number
  default     = 30

  validation {
    condition     = var.checkpoint_retention_days >= 1 && floor(var.checkpoint_retention_days) == var.checkpoint_retention_days
    error_message = "checkpoint_retention_days must be a whole number of days, at least 1."
  }
}

variable "abort_incomplete_upload_days" {
  description = "Days after which Cloud Storage aborts multipart uploads (S3 API) left incomplete by a killed trainer, so their parts stop being billed."
  type        = number
  default     = 1

  validation {
    condition     = var.abort_incomplete_upload_days >= 1 && floor(var.abort_incomplete_upload_days) == var.abort_incomplete_upload_days
    error_message = "abort_incomplete_upload_days must be a whole number of days, at least 1."
  }
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete the bucket even if it still holds checkpoints. Off by default, so checkpoints are never lost by accident."
  type        = bool
  default     = false
}

# --- Trainer job -------------------------------------------------------------

variable "image" {
  description = "The trainer image (built from deploy/docker/Dockerfile), e.g. REGION-docker.pkg.dev/PROJECT/REPOSITORY/trainer:TAG. Prefer a digest or a unique tag: the job runs whatever the reference points to."
  type        = string

  validation {
    condition     = length(trimspace(var.image)) > 0
    error_message = "image must name the trainer image you pushed."
  }
}

variable "cpu" {
  description = "vCPUs of each task: 1, 2, 4, 6 or 8 (4 or more with a GPU). Billed per vCPU-second."
  type        = number
  default     = 2

  validation {
    condition     = contains([1, 2, 4, 6, 8], var.cpu)
    error_message = "cpu must be 1, 2, 4, 6 or 8."
  }
}

variable "memory_mb" {
  description = "Memory of each task in MiB: at most 4096 per vCPU; at least 2048 with 4 vCPUs, 4096 with 6 or 8, 16384 with a GPU. Billed per GiB-second."
  type        = number
  default     = 4096

  validation {
    condition     = var.memory_mb >= 512 && var.memory_mb <= 32768 && floor(var.memory_mb) == var.memory_mb
    error_message = "memory_mb must be a whole number from 512 to 32768."
  }
}

variable "gpu" {
  description = "Give each task one NVIDIA L4 GPU (needs cpu >= 4, memory_mb >= 16384, a region that offers it and GPU quota for Cloud Run jobs). Billed per GPU-second on top of CPU and memory."
  type        = bool
  default     = false
}

variable "task_timeout_seconds" {
  description = "Longest run of one task in seconds (Cloud Run allows 24 h). Segments are cut 30 s shorter (max_runtime in the space file) so the trainer checkpoints and returns before the task is killed."
  type        = number
  default     = 3600

  validation {
    condition     = var.task_timeout_seconds >= 60 && var.task_timeout_seconds <= 86400 && floor(var.task_timeout_seconds) == var.task_timeout_seconds
    error_message = "task_timeout_seconds must be a whole number from 60 to 86400."
  }
}

variable "max_retries" {
  description = "Times Cloud Run retries a failed task on its own. Keep 0: the coordinator retries segments itself, from their last checkpoint and fenced by attempt, and prices every try."
  type        = number
  default     = 0

  validation {
    condition     = var.max_retries >= 0 && var.max_retries <= 10 && floor(var.max_retries) == var.max_retries
    error_message = "max_retries must be a whole number from 0 to 10."
  }
}

variable "environment" {
  description = "Extra environment variables of the trainer container. Never put secrets here: they are visible to anyone who may read the job."
  type        = map(string)
  default     = {}
}

# --- Coordinator -------------------------------------------------------------

variable "coordinator_members" {
  description = "IAM principals that run `hpsearch run` against this job, e.g. [\"user:alice@example.com\", \"serviceAccount:ci@PROJECT.iam.gserviceaccount.com\"]. Each gets coordinator_job_role on the job and may read Cloud Run operations."
  type        = list(string)
  default     = []
}

variable "coordinator_job_role" {
  description = "Role granted to coordinator_members on the job alone: it must allow running with overrides and reading and cancelling executions (run.jobs.run, run.jobs.runWithOverrides, run.executions.get, run.executions.cancel). roles/run.developer on one job is the smallest predefined role that does; a custom role (projects/PROJECT/roles/ID) may replace it."
  type        = string
  default     = "roles/run.developer"
}

variable "create_coordinator_hmac_key" {
  description = "Create a coordinator service account with an HMAC key on the bucket, for the coordinator to reach the checkpoints through the S3 API (its own key, revocable without touching the trainer's)."
  type        = bool
  default     = true
}
