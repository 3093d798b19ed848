# Inputs of the AWS stack. Every input has a default: a plain
# `terraform apply` after `make lambda-zip` gives a working stack.

variable "region" {
  description = "AWS region to deploy to. null uses the region of the standard AWS configuration (AWS_REGION, AWS_PROFILE)."
  type        = string
  default     = null
}

variable "name" {
  description = "Name prefix of every resource: the function is NAME-trainer, its role NAME-trainer, the coordinator policy NAME-coordinator."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be 1 to 24 characters of a-z, 0-9 and -, starting with a letter (it prefixes the bucket's name, which S3 limits)."
  }
}

variable "tags" {
  description = "Tags added to every resource (on top of hpsearch:stack = name)."
  type        = map(string)
  default     = {}
}

# --- Checkpoint bucket -------------------------------------------------------

variable "bucket_name" {
  description = "Name of the checkpoint bucket. null creates one named NAME-checkpoints-<random suffix>."
  type        = string
  default     = null
}

variable "checkpoint_prefix" {
  description = "Key prefix under which trainers and the coordinator keep checkpoints and results; the IAM policies grant access to this prefix only."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.checkpoint_prefix))
    error_message = "checkpoint_prefix must be a non-empty key prefix without leading or trailing '/', e.g. \"hpsearch\" or \"team/hpsearch\"."
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
  description = "Days after which S3 aborts multipart uploads left incomplete under the checkpoint prefix (a trainer killed mid-upload), so their parts stop being billed."
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

# --- Trainer function --------------------------------------------------------

variable "lambda_zip" {
  description = "Path of the trainer's deployment package (the bootstrap binary zipped by `make lambda-zip`). null uses dist/trainer-lambda-arm64.zip (or -amd64 for x86_64) at the repository root. A relative path is relative to this directory when run with -chdir."
  type        = string
  default     = null
}

variable "architecture" {
  description = "Instruction set of the function: arm64 (Graviton, about 20% cheaper per GB-second) or x86_64. The zip must hold a bootstrap built for it."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be \"arm64\" or \"x86_64\"."
  }
}

variable "memory_mb" {
  description = "Memory of the function in MB (128 to 10240). Lambda gives CPU in proportion: one full vCPU at 1769 MB, six at 10240 MB. Billed per GB-second."
  type        = number
  default     = 2048

  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 10240 && floor(var.memory_mb) == var.memory_mb
    error_message = "memory_mb must be a whole number from 128 to 10240."
  }
}

variable "timeout_seconds" {
  description = "Longest invocation in seconds (Lambda allows at most 900). Segments are cut 30 s shorter (max_runtime in the space file) so the trainer checkpoints and returns before Lambda kills it."
  type        = number
  default     = 900

  validation {
    condition     = var.timeout_seconds >= 60 && var.timeout_seconds <= 900 && floor(var.timeout_seconds) == var.timeout_seconds
    error_message = "timeout_seconds must be a whole number from 60 to 900 (Lambda's limit)."
  }
}

variable "ephemeral_storage_mb" {
  description = "Size of the function's /tmp in MB (512 to 10240), where checkpoints are restored and written before upload."
  type        = number
  default     = 512

  validation {
    condition     = var.ephemeral_storage_mb >= 512 && var.ephemeral_storage_mb <= 10240 && floor(var.ephemeral_storage_mb) == var.ephemeral_storage_mb
    error_message = "ephemeral_storage_mb must be a whole number from 512 to 10240."
  }
}

variable "concurrency" {
  description = "How many trainer invocations may run at once: the backend's concurrency in the space file and, with reserve_concurrency, the function's reserved concurrency."
  type        = number
  default     = 10

  validation {
    condition     = var.concurrency >= 1 && floor(var.concurrency) == var.concurrency
    error_message = "concurrency must be a whole number, at least 1."
  }
}

variable "reserve_concurrency" {
  description = "Reserve `concurrency` executions for the function: it can then never be throttled by other functions of the account, nor run more copies than that (a cost ceiling). New accounts whose concurrency quota is 10 cannot reserve any: set false there."
  type        = bool
  default     = true
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the trainer's logs (one of CloudWatch's allowed values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)."
  type        = number
  default     = 14

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch's retention values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "environment" {
  description = "Extra environment variables of the trainer function, e.g. for a command workload's own settings. Never put secrets here: they are visible to anyone who may read the function's configuration."
  type        = map(string)
  default     = {}
}

# --- Coordinator -------------------------------------------------------------

variable "create_coordinator_policy" {
  description = "Create a managed IAM policy with what the coordinator needs (invoke this function, read and write the checkpoint prefix), to attach to the user or role that runs `hpsearch run`."
  type        = bool
  default     = true
}

variable "coordinator_user_name" {
  description = "Name of an existing IAM user to attach the coordinator policy to (the policy is then created whatever create_coordinator_policy says). null attaches it to nobody."
  type        = string
  default     = null
}
