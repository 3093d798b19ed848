# hpsearch's persistent GPU worker pool on AWS: the SQS queue the
# coordinator puts segment jobs on (with a dead-letter queue), and an Auto
# Scaling group of spot GPU instances, each running `hpsearch worker` as a
# systemd service, scaled on the queue's depth (scaling.tf), with a role
# that reaches this queue and the checkpoint prefix only (iam.tf). It uses
# the checkpoint bucket of the aws/ stack; it creates none. See
# docs/deploy.md, "GPU worker pool (AWS)".

data "aws_region" "current" {}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

locals {
  pool_id = "${var.name}-${var.pool_name}"

  tags = merge({ "hpsearch:stack" = var.name, "hpsearch:pool" = var.pool_name }, var.tags)

  region     = data.aws_region.current.name
  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id

  # The worker's --queue, and pool.queue in the space file: the SQS queue,
  # the bucket of its job records (hpsearch's sqsqueue keeps one small
  # record per job beside the message, under sqsqueue/QUEUE/), the region.
  worker_queue = "sqs://${aws_sqs_queue.jobs.name}?records=${var.checkpoint_bucket}&region=${local.region}"
  records_arn  = "${local.checkpoint_bucket_arn}/sqsqueue/${local.pool_id}/*"

  # hpsearch opens an SQS pool queue with MaxAttempts 10 and refuses a
  # queue whose redrive policy says otherwise (internal/cli/sqs.go); a
  # job handed back at an interruption gets a new message, so it does not
  # count. Retention: SQS's maximum, as sqsqueue.CreateQueues sets it.
  max_receive_count = 10
  retention_seconds = 1209600

  # Named from variables rather than read from the group, so that the
  # role's policy and the user data need not wait for the group (which
  # needs both first).
  asg_name   = local.pool_id
  asg_arn    = "arn:${local.partition}:autoscaling:${local.region}:${local.account_id}:autoScalingGroup:*:autoScalingGroupName/${local.asg_name}"
  drain_hook = "drain"

  # A spot instance gets two minutes between its interruption notice and
  # its end. The worker gets as long to checkpoint and hand its job back
  # whenever it is stopped; a scale-in waits that long and a minute more
  # before it terminates an instance.
  stop_timeout_seconds  = 120
  drain_timeout_seconds = local.stop_timeout_seconds + 60

  # Boot, download and start: the time before a new instance counts in the
  # scaling metric's denominator and in the group's health checks.
  instance_warmup_seconds = 300

  log_group = "/hpsearch/${local.pool_id}"

  checkpoint_bucket_arn  = "arn:${local.partition}:s3:::${var.checkpoint_bucket}"
  checkpoint_objects_arn = "${local.checkpoint_bucket_arn}/${var.checkpoint_prefix}/*"

  binary_from_s3    = startswith(var.worker_binary_url, "s3://")
  binary_object_arn = "arn:${local.partition}:s3:::${trimprefix(var.worker_binary_url, "s3://")}"

  # On-demand Linux list prices in us-east-1, USD per hour, of common
  # one-GPU instance types (the same as hpsearch's own table,
  # spec.PoolPricePerHour, where both list a type): each worker's
  # --price-per-hour for its type, and pool.price_per_hour (the dearest
  # listed type's). Upper bounds for spot. Other regions and types: set
  # price_per_hour.
  on_demand_prices = {
    "g4dn.xlarge"  = 0.526
    "g4dn.2xlarge" = 0.752
    "g4dn.4xlarge" = 1.204
    "g5.xlarge"    = 1.006
    "g5.2xlarge"   = 1.212
    "g5.4xlarge"   = 1.624
    "g6.xlarge"    = 0.8048
    "g6.2xlarge"   = 0.9776
    "g6e.xlarge"   = 1.861
    "g5g.xlarge"   = 0.42
    "p3.2xlarge"   = 3.06
  }
  unpriced_types  = [for t in var.instance_types : t if !contains(keys(local.on_demand_prices), t)]
  instance_prices = { for t in var.instance_types : t => coalesce(var.price_per_hour, lookup(local.on_demand_prices, t, 0)) }
  price_per_hour  = max(values(local.instance_prices)...)

  # The type pool.instance_type names: the first listed. Each worker
  # ledgers its own instance's type and price.
  first_instance_type = var.instance_types[0]

  # Graviton families carry a "g" after the generation: g5g, c7g, m7gd.
  arm64_types = [for t in var.instance_types : t if can(regex("^[a-z]+[0-9]+[a-z]*g[a-z]*\\.", t))]

  ami_parameter = "/aws/service/deeplearning/ami/${var.architecture}/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
  ami_id        = var.ami_id != null ? var.ami_id : data.aws_ssm_parameter.ami[0].insecure_value

  # The worker's command line, as systemd's ExecStart wants it: each
  # argument double-quoted, with \ and " escaped, % and $ doubled (systemd
  # would expand them); but for the instance's id, type and price, which
  # the boot script finds and systemd puts in from the environment.
  worker_argv = [
    "/usr/local/bin/hpsearch", "worker", "--pool", var.pool_name, "--queue", local.worker_queue,
    "--work-dir", "/var/lib/hpsearch/work", "--visibility", "${var.visibility_timeout_seconds}s", "--spot-notice",
  ]
  worker_exec = join(" ", concat(
    [for a in local.worker_argv : format("\"%s\"", replace(replace(replace(replace(a, "\\", "\\\\"), "\"", "\\\""), "%", "%%"), "$", "$$"))],
    ["--id", "$${HPSEARCH_INSTANCE_ID}", "--instance-type", "$${HPSEARCH_INSTANCE_TYPE}", "--price-per-hour", "$${HPSEARCH_PRICE_PER_HOUR}"],
    [for a in var.worker_args : format("\"%s\"", replace(replace(replace(replace(a, "\\", "\\\\"), "\"", "\\\""), "%", "%%"), "$", "$$"))],
  ))

  # The worker's environment file (systemd's EnvironmentFile syntax): the
  # region for the AWS SDK, then the user's variables, double-quoted with
  # \ " $ and ` escaped.
  worker_env = merge({ AWS_REGION = local.region }, var.worker_environment)
  worker_env_file = join("", [
    for k, v in local.worker_env : format("%s=\"%s\"\n", k, replace(replace(replace(replace(v, "\\", "\\\\"), "\"", "\\\""), "$", "\\$"), "`", "\\`"))
  ])

  user_data = templatefile("${path.module}/user_data.sh.tftpl", {
    region               = local.region
    pool_name            = var.pool_name
    binary_url           = var.worker_binary_url
    binary_sha256        = var.worker_binary_sha256 == null ? "" : var.worker_binary_sha256
    worker_exec          = local.worker_exec
    instance_prices      = local.instance_prices
    worker_env_file      = local.worker_env_file
    stop_timeout_seconds = local.stop_timeout_seconds
    asg_name             = local.asg_name
    drain_hook           = local.drain_hook
    cloudwatch_logs      = var.cloudwatch_logs
    log_group            = local.log_group
  })
}

# --- Queue -------------------------------------------------------------------

# Jobs that failed 10 times (a segment that kills its worker every time,
# say): hpsearch moves them here itself, and so does SQS's redrive policy
# for a message received 10 times. Kept for inspection.
resource "aws_sqs_queue" "dead" {
  # hpsearch's name for a queue's dead-letter queue (sqsqueue.DeadLetterSuffix).
  name                      = "${local.pool_id}-dead"
  message_retention_seconds = local.retention_seconds
  sqs_managed_sse_enabled   = true
}

resource "aws_sqs_queue" "jobs" {
  name                       = local.pool_id
  visibility_timeout_seconds = var.visibility_timeout_seconds
  message_retention_seconds  = local.retention_seconds
  # Long polling: an idle worker's receive waits up to 20 s for a job
  # instead of returning at once, billed as one request.
  receive_wait_time_seconds = 20
  # SSE-SQS: encrypted at rest with keys SQS manages, so no KMS permission
  # is needed by the workers or the coordinator.
  sqs_managed_sse_enabled = true

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead.arn
    maxReceiveCount     = local.max_receive_count
  })
}

# Only this pool's queue may send its failures to the dead-letter queue.
resource "aws_sqs_queue_redrive_allow_policy" "dead" {
  queue_url = aws_sqs_queue.dead.id

  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.jobs.arn]
  })
}

# Refuse plain-HTTP requests to either queue, whoever makes them.
data "aws_iam_policy_document" "queue_tls" {
  for_each = { jobs = aws_sqs_queue.jobs.arn, dead = aws_sqs_queue.dead.arn }

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value]

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

resource "aws_sqs_queue_policy" "jobs" {
  queue_url = aws_sqs_queue.jobs.id
  policy    = data.aws_iam_policy_document.queue_tls["jobs"].json
}

resource "aws_sqs_queue_policy" "dead" {
  queue_url = aws_sqs_queue.dead.id
  policy    = data.aws_iam_policy_document.queue_tls["dead"].json
}

# --- Network -----------------------------------------------------------------

data "aws_subnet" "first" {
  id = var.subnet_ids[0]
}

# No ingress at all: the workers pull their work. Egress to HTTPS only, by
# default (SQS, S3, the binary, package repositories). Instance metadata
# and the VPC's DNS are not filtered by security groups.
resource "aws_security_group" "worker" {
  name_prefix = "${local.pool_id}-worker-"
  description = "hpsearch ${var.pool_name} pool workers: no ingress, egress on ${join(", ", [for p in var.egress_ports : tostring(p)])}"
  vpc_id      = data.aws_subnet.first.vpc_id

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_egress_rule" "worker" {
  for_each = { for pair in setproduct(var.egress_ports, var.egress_cidr_blocks) : "${pair[0]} ${pair[1]}" => pair }

  security_group_id = aws_security_group.worker.id
  description       = "TCP ${each.value[0]} to ${each.value[1]}"
  ip_protocol       = "tcp"
  from_port         = each.value[0]
  to_port           = each.value[0]
  cidr_ipv4         = each.value[1]
}

# --- Instances ---------------------------------------------------------------

data "aws_ssm_parameter" "ami" {
  count = var.ami_id == null ? 1 : 0

  name = local.ami_parameter
}

# The root device's name differs between images (/dev/xvda on Amazon
# Linux, /dev/sda1 on Ubuntu); the volume below must name it to resize and
# encrypt the root volume rather than add a second one.
data "aws_ami" "worker" {
  filter {
    name   = "image-id"
    values = [local.ami_id]
  }
}

resource "aws_launch_template" "worker" {
  name        = local.pool_id
  description = "hpsearch ${var.pool_name} pool worker: ${var.architecture} GPU instance running hpsearch worker"
  image_id    = data.aws_ami.worker.id
  # Instance types and the spot/on-demand split come from the group's
  # mixed-instances policy, so none here.

  iam_instance_profile {
    arn = aws_iam_instance_profile.worker.arn
  }

  network_interfaces {
    device_index                = 0
    associate_public_ip_address = var.associate_public_ip_address
    security_groups             = [aws_security_group.worker.id]
    delete_on_termination       = true
  }

  # IMDSv2 only, one hop: reachable from the host (the worker's spot notice
  # and role credentials), not from containers behind a bridge.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  block_device_mappings {
    device_name = data.aws_ami.worker.root_device_name

    ebs {
      volume_size           = var.root_volume_gb
      volume_type           = "gp3"
      encrypted             = true
      kms_key_id            = var.ebs_kms_key_arn
      delete_on_termination = true
    }
  }

  # A boot script that fails shuts the instance down, which then
  # terminates instead of idling, billed, without a worker.
  instance_initiated_shutdown_behavior = "terminate"

  user_data = base64encode(local.user_data)

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { Name = "${local.pool_id}-worker" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { Name = "${local.pool_id}-worker" })
  }

  update_default_version = true
}

resource "aws_autoscaling_group" "pool" {
  name                = local.asg_name
  vpc_zone_identifier = var.subnet_ids

  min_size         = var.min_size
  max_size         = var.max_size
  desired_capacity = var.desired_capacity
  # An apply must not wait for spot GPU capacity to turn up.
  wait_for_capacity_timeout = "0"

  # Launch a replacement when EC2 says a spot instance is at elevated risk
  # of interruption, then drain the old one (the drain hook below) before
  # the two-minute notice would come.
  capacity_rebalance = true

  health_check_type         = "EC2"
  health_check_grace_period = local.instance_warmup_seconds
  default_instance_warmup   = local.instance_warmup_seconds

  # The scaling metric and the wake-up alarm read these (free, per minute).
  enabled_metrics     = ["GroupDesiredCapacity", "GroupInServiceInstances", "GroupPendingInstances", "GroupTerminatingInstances", "GroupTotalInstances"]
  metrics_granularity = "1Minute"

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = var.on_demand_base_capacity
      on_demand_percentage_above_base_capacity = var.on_demand_percentage_above_base
      on_demand_allocation_strategy            = "lowest-price"
      # Spot pools least likely to be interrupted, and of those the
      # cheapest: AWS's recommendation for interruptible batch work.
      spot_allocation_strategy = "price-capacity-optimized"
    }

    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.worker.id
        version            = aws_launch_template.worker.latest_version
      }

      dynamic "override" {
        for_each = var.instance_types

        content {
          instance_type = override.value
        }
      }
    }
  }

  # Whenever Auto Scaling terminates an instance (scale-in, capacity
  # rebalancing, instance refresh), it first waits in Terminating:Wait:
  # the instance's hpsearch-drain service sees that in the instance
  # metadata, stops the worker (SIGTERM: checkpoint, hand the job back)
  # and completes this hook. Should it not, the termination goes on after
  # drain_timeout_seconds.
  initial_lifecycle_hook {
    name                 = local.drain_hook
    lifecycle_transition = "autoscaling:EC2_INSTANCE_TERMINATING"
    heartbeat_timeout    = local.drain_timeout_seconds
    default_result       = "CONTINUE"
  }

  # A changed launch template (a new binary, AMI or setting) replaces the
  # running instances, half at a time, each drained as above.
  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 50
      instance_warmup        = local.instance_warmup_seconds
    }
  }

  dynamic "tag" {
    for_each = merge(local.tags, { Name = "${local.pool_id}-worker" })

    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = false # the launch template tags instances and volumes
    }
  }

  lifecycle {
    # The scaling policies own the capacity once the group exists.
    ignore_changes = [desired_capacity]

    precondition {
      condition     = var.min_size <= var.desired_capacity && var.desired_capacity <= var.max_size
      error_message = "Need min_size <= desired_capacity <= max_size; got ${var.min_size}, ${var.desired_capacity}, ${var.max_size}."
    }

    precondition {
      condition     = var.price_per_hour != null || length(local.unpriced_types) == 0
      error_message = "No built-in price for ${join(", ", local.unpriced_types)}: set price_per_hour (USD per instance-hour, for pool.price_per_hour in the space file)."
    }

    precondition {
      condition     = var.architecture == "arm64" ? length(local.arm64_types) == length(var.instance_types) : length(local.arm64_types) == 0
      error_message = "instance_types must all be ${var.architecture} types to match architecture (Graviton types such as g5g are arm64, the others x86_64)."
    }

    precondition {
      condition     = data.aws_ami.worker.architecture == var.architecture
      error_message = "The AMI ${data.aws_ami.worker.id} is ${data.aws_ami.worker.architecture}, but architecture is ${var.architecture}."
    }
  }

  depends_on = [
    aws_iam_role_policy.worker,
  ]
}

# --- Logs (optional) ---------------------------------------------------------

resource "aws_cloudwatch_log_group" "worker" {
  count = var.cloudwatch_logs ? 1 : 0

  name              = local.log_group
  retention_in_days = var.log_retention_days
}
