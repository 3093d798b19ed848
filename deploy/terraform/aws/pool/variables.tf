# Inputs of the GPU worker pool. Three have no default: the checkpoint
# bucket (the aws/ stack's `bucket` output), the subnets the workers run in,
# and where the hpsearch binary is downloaded from.
#
# Not variables, because hpsearch requires them (internal/cli/sqs.go,
# internal/queue/sqsqueue): the queue's redrive policy has maxReceiveCount
# 10, and both queues keep messages for SQS's maximum, 14 days.

variable "region" {
  description = "AWS region to deploy to. null uses the region of the standard AWS configuration (AWS_REGION, AWS_PROFILE). Keep it the checkpoint bucket's region."
  type        = string
  default     = null
}

variable "name" {
  description = "Name prefix of every resource; with pool_name it names the queue, the Auto Scaling group, the launch template and the role: NAME-POOL (hpsearch-gpu)."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be 1 to 24 characters of a-z, 0-9 and -, starting with a letter."
  }
}

variable "pool_name" {
  description = "Name of the pool: the worker's --pool and pool.name in the space file. The queue and the Auto Scaling group are NAME-POOL_NAME."
  type        = string
  default     = "gpu"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.pool_name))
    error_message = "pool_name must be 1 to 24 characters of a-z, 0-9 and -, starting with a letter."
  }
}

variable "tags" {
  description = "Tags added to every resource and to the instances and volumes the pool launches (on top of hpsearch:stack = NAME and hpsearch:pool = POOL_NAME)."
  type        = map(string)
  default     = {}
}

# --- Queue -------------------------------------------------------------------

variable "visibility_timeout_seconds" {
  description = "How long a worker's lease on a job lasts without a heartbeat (the worker's --visibility; it extends the lease at 0.8 x this while the segment runs), and the queue's default visibility timeout. The job of a worker that died silently runs again this long after its last heartbeat."
  type        = number
  default     = 60

  validation {
    condition     = var.visibility_timeout_seconds >= 10 && var.visibility_timeout_seconds <= 43200 && floor(var.visibility_timeout_seconds) == var.visibility_timeout_seconds
    error_message = "visibility_timeout_seconds must be a whole number from 10 to 43200 (SQS's limit, 12 hours)."
  }
}

# --- Checkpoints -------------------------------------------------------------

variable "checkpoint_bucket" {
  description = "Name of the S3 bucket of the study's checkpoint store (the aws/ stack's `bucket` output). It also keeps the queue's job records, under sqsqueue/NAME-POOL/. The workers may use objects under those two prefixes, nothing else."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.checkpoint_bucket))
    error_message = "checkpoint_bucket must be an S3 bucket name (3 to 63 characters of a-z, 0-9, . and -), not an s3:// URI."
  }
}

variable "checkpoint_prefix" {
  description = "Key prefix of the checkpoint store in checkpoint_bucket; the workers' role reaches this prefix only, so a study's checkpoint.store must be s3://BUCKET/PREFIX or deeper."
  type        = string
  default     = "hpsearch"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.checkpoint_prefix))
    error_message = "checkpoint_prefix must be a non-empty key prefix without leading or trailing '/', e.g. \"hpsearch\" or \"team/hpsearch\"."
  }
}

# --- Worker ------------------------------------------------------------------

variable "worker_binary_url" {
  description = "Where instances download hpsearch at boot: an https:// URL or an s3://BUCKET/KEY object (the role may then read that one object), of a Linux build for `architecture`, either the binary itself or a .tar.gz/.tgz holding a file named hpsearch."
  type        = string

  validation {
    condition     = can(regex("^(https://[^[:space:]]+|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^[:space:]]+)$", var.worker_binary_url))
    error_message = "worker_binary_url must be an https:// URL or s3://BUCKET/KEY, without spaces."
  }
}

variable "worker_binary_sha256" {
  description = "SHA-256 of the file at worker_binary_url, as 64 hex digits. When set, an instance whose download does not match refuses to run it (and terminates). null skips the check."
  type        = string
  default     = null

  validation {
    condition     = var.worker_binary_sha256 == null || can(regex("^[0-9a-f]{64}$", var.worker_binary_sha256))
    error_message = "worker_binary_sha256 must be 64 lower-case hex digits, or null."
  }
}

variable "worker_args" {
  description = "Extra arguments of `hpsearch worker`, after the ones the module passes (--pool, --queue, --work-dir, --visibility, --spot-notice, and --id, --instance-type, --price-per-hour for the instance it runs on), which they override: e.g. [\"--price-per-hour\", \"0.45\"] to ledger spot prices."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.worker_args : !can(regex("[\\n\\r]", a))])
    error_message = "worker_args must not contain line breaks."
  }
}

variable "worker_environment" {
  description = "Extra environment variables of the worker (and of the trainers it starts), e.g. for a command workload. They end up in the launch template's user data, readable by anyone who may describe it: no secrets."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.worker_environment : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k)) && !can(regex("[\\n\\r]", v))])
    error_message = "worker_environment names must be shell-style identifiers (A-Z, a-z, 0-9, _), and values must not contain line breaks."
  }
}

# --- Instances ---------------------------------------------------------------

variable "architecture" {
  description = "Instruction set of the instances: x86_64 (g4dn, g5, g6, ...) or arm64 (g5g). It picks the default AMI, and every instance type and the binary must match it."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be \"x86_64\" or \"arm64\"."
  }
}

variable "ami_id" {
  description = "AMI of the workers. null uses the newest AWS Deep Learning Base OSS Nvidia Driver GPU AMI (Amazon Linux 2023) for `architecture`, read from its public SSM parameter at plan time: NVIDIA driver and CUDA installed, and the AWS CLI, which the boot script uses. Another AMI needs a GPU driver, curl, the AWS CLI, systemd and bash."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must be an AMI id (ami-0123456789abcdef0), or null."
  }
}

variable "instance_types" {
  description = "Instance types the pool may launch, any of which runs a segment (one GPU each by default: g5.xlarge = A10G 24 GB, g4dn.xlarge = T4 16 GB, g6.xlarge = L4 24 GB). The spot allocation strategy picks among them by price and spare capacity; the more types, the fewer interruptions."
  type        = list(string)
  default     = ["g5.xlarge", "g4dn.xlarge", "g6.xlarge"]

  validation {
    condition     = length(var.instance_types) >= 1 && length(var.instance_types) <= 20 && length(distinct(var.instance_types)) == length(var.instance_types)
    error_message = "instance_types must list 1 to 20 distinct instance types."
  }

  validation {
    condition     = alltrue([for t in var.instance_types : can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", t))])
    error_message = "instance_types must be EC2 instance type names, e.g. \"g5.xlarge\"."
  }
}

variable "price_per_hour" {
  description = "USD per instance-hour: pool.price_per_hour in the space file, and each worker's --price-per-hour. null: each worker its own type's us-east-1 on-demand price, and the space file the highest among instance_types (from a table in main.tf), upper bounds since spot instances cost less. Required when a listed type is not in that table."
  type        = number
  default     = null

  validation {
    condition     = var.price_per_hour == null ? true : var.price_per_hour > 0
    error_message = "price_per_hour must be a positive number of USD, or null."
  }
}

variable "root_volume_gb" {
  description = "Size of each instance's root volume in GiB (gp3, encrypted), which also holds the worker's work directory. The Deep Learning Base AMI needs at least 75."
  type        = number
  default     = 100

  validation {
    condition     = var.root_volume_gb >= 8 && var.root_volume_gb <= 16384 && floor(var.root_volume_gb) == var.root_volume_gb
    error_message = "root_volume_gb must be a whole number from 8 to 16384."
  }
}

variable "ebs_kms_key_arn" {
  description = "KMS key that encrypts the root volumes. null uses the account's default EBS key (aws/ebs). A customer managed key must let the Auto Scaling service-linked role use it, or launches fail."
  type        = string
  default     = null
}

# --- Network -----------------------------------------------------------------

variable "subnet_ids" {
  description = "Subnets the instances run in, one VPC, ideally one per availability zone (more zones, more spot capacity). They need a way out to SQS, S3 and worker_binary_url: private subnets with a NAT gateway (or VPC endpoints), or public subnets with associate_public_ip_address."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 1
    error_message = "subnet_ids must name at least one subnet."
  }
}

variable "associate_public_ip_address" {
  description = "Give each instance a public IPv4 address (billed per hour by AWS), for public subnets without NAT. Off by default: the security group admits nothing anyway."
  type        = bool
  default     = false
}

variable "egress_ports" {
  description = "TCP ports the instances may connect to, to egress_cidr_blocks. 443 covers SQS, S3, the binary's download, and the AL2023 package repositories; add others a command workload needs."
  type        = list(number)
  default     = [443]

  validation {
    condition     = alltrue([for p in var.egress_ports : p >= 1 && p <= 65535 && floor(p) == p])
    error_message = "egress_ports must be TCP port numbers (1 to 65535)."
  }
}

variable "egress_cidr_blocks" {
  description = "IPv4 ranges the instances may connect to on egress_ports. The instance metadata service and the VPC's DNS resolver are reachable whatever this says."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = alltrue([for c in var.egress_cidr_blocks : can(cidrnetmask(c))])
    error_message = "egress_cidr_blocks must be IPv4 CIDR blocks, e.g. \"0.0.0.0/0\"."
  }
}

# --- Capacity and scaling ----------------------------------------------------

variable "min_size" {
  description = "Fewest instances. 0 lets the pool scale to zero, and cost nothing, while the queue is empty."
  type        = number
  default     = 0

  validation {
    condition     = var.min_size >= 0 && floor(var.min_size) == var.min_size
    error_message = "min_size must be a whole number, at least 0."
  }
}

variable "max_size" {
  description = "Most instances: a ceiling on the pool's cost per hour (max_size x price_per_hour) and on the segments that run at once."
  type        = number
  default     = 4

  validation {
    condition     = var.max_size >= 1 && floor(var.max_size) == var.max_size
    error_message = "max_size must be a whole number, at least 1."
  }
}

variable "desired_capacity" {
  description = "Instances when the group is created. Scaling policies own the number afterwards: Terraform does not reset it on later applies."
  type        = number
  default     = 0

  validation {
    condition     = var.desired_capacity >= 0 && floor(var.desired_capacity) == var.desired_capacity
    error_message = "desired_capacity must be a whole number, at least 0."
  }
}

variable "on_demand_base_capacity" {
  description = "Instances that are on-demand, whatever the rest are. 0: all spot, as far as on_demand_percentage_above_base says."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_base_capacity >= 0 && floor(var.on_demand_base_capacity) == var.on_demand_base_capacity
    error_message = "on_demand_base_capacity must be a whole number, at least 0."
  }
}

variable "on_demand_percentage_above_base" {
  description = "Percentage of the instances above on_demand_base_capacity that are on-demand; the rest are spot. 0: all spot."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_percentage_above_base >= 0 && var.on_demand_percentage_above_base <= 100 && floor(var.on_demand_percentage_above_base) == var.on_demand_percentage_above_base
    error_message = "on_demand_percentage_above_base must be a whole number from 0 to 100."
  }
}

variable "jobs_per_instance" {
  description = "Target of the scaling policy: jobs (waiting plus running) per in-service instance. 1 matches a worker that runs one segment at a time: one instance per job, up to max_size. Higher values queue jobs behind busy workers instead of launching instances."
  type        = number
  default     = 1

  validation {
    condition     = var.jobs_per_instance > 0
    error_message = "jobs_per_instance must be positive."
  }
}

# --- Operations --------------------------------------------------------------

variable "cloudwatch_logs" {
  description = "Also ship the worker's journal to a CloudWatch log group, /hpsearch/NAME-POOL, through the CloudWatch agent (installed at boot, Amazon Linux only). Off: logs stay in each instance's journal and go with it."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the workers' logs when cloudwatch_logs is on (one of CloudWatch's allowed values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)."
  type        = number
  default     = 14

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch's retention values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "enable_ssm" {
  description = "Attach AmazonSSMManagedInstanceCore to the instances' role, for a shell through SSM Session Manager (the security group admits no SSH). It lets the instances talk to Systems Manager, a wider grant than the worker needs."
  type        = bool
  default     = false
}
