# Scaling on the queue's depth.
#
# The metric is AWS's "backlog per instance" (Amazon EC2 Auto Scaling user
# guide: target tracking with metric math), counting the jobs waiting
# (ApproximateNumberOfMessagesVisible) and the jobs running (NotVisible:
# leased by a worker) over the instances in service. With jobs_per_instance
# = 1 the group tracks one instance per outstanding job, within min_size
# and max_size, and shrinks to min_size (0) about 15 minutes after the
# queue runs dry. Instances taken out are drained first (the lifecycle
# hook in main.tf).
#
# Target tracking scales in proportion to the group's current capacity,
# which does not work from zero: the second policy starts the first
# instance when jobs are waiting and the group is empty, and target
# tracking takes over from there.

locals {
  queue_metrics = {
    visible   = "ApproximateNumberOfMessagesVisible"
    in_flight = "ApproximateNumberOfMessagesNotVisible"
  }
}

resource "aws_autoscaling_policy" "backlog" {
  name                   = "${local.pool_id}-backlog-per-instance"
  autoscaling_group_name = aws_autoscaling_group.pool.name
  policy_type            = "TargetTrackingScaling"

  target_tracking_configuration {
    target_value = var.jobs_per_instance

    customized_metric_specification {
      dynamic "metrics" {
        for_each = local.queue_metrics

        content {
          id          = metrics.key
          return_data = false

          metric_stat {
            stat = "Sum"

            metric {
              namespace   = "AWS/SQS"
              metric_name = metrics.value

              dimensions {
                name  = "QueueName"
                value = aws_sqs_queue.jobs.name
              }
            }
          }
        }
      }

      metrics {
        id          = "in_service"
        return_data = false

        metric_stat {
          stat = "Average"

          metric {
            namespace   = "AWS/AutoScaling"
            metric_name = "GroupInServiceInstances"

            dimensions {
              name  = "AutoScalingGroupName"
              value = aws_autoscaling_group.pool.name
            }
          }
        }
      }

      # An empty group counts as one instance, so that the metric stays
      # defined (and high while jobs wait) rather than dividing by zero.
      metrics {
        id          = "backlog_per_instance"
        label       = "Jobs waiting or running per in-service instance"
        expression  = "(visible + in_flight) / IF(in_service > 0, in_service, 1)"
        return_data = true
      }
    }
  }
}

# Wake from zero: add one instance when jobs wait and the group wants none.
resource "aws_autoscaling_policy" "wake" {
  name                   = "${local.pool_id}-wake-from-zero"
  autoscaling_group_name = aws_autoscaling_group.pool.name
  policy_type            = "StepScaling"
  adjustment_type        = "ChangeInCapacity"
  # A new instance counts as capacity at once: while it boots, the alarm
  # firing again adds no second one.
  estimated_instance_warmup = local.instance_warmup_seconds

  step_adjustment {
    metric_interval_lower_bound = 0
    scaling_adjustment          = 1
  }
}

resource "aws_cloudwatch_metric_alarm" "wake" {
  alarm_name        = "${local.pool_id}-wake-from-zero"
  alarm_description = "Jobs wait on ${aws_sqs_queue.jobs.name} and the ${local.asg_name} group wants no instance: start one (target tracking takes over then)."

  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  # No data (an idle queue stops reporting after a while): nothing waits.
  treat_missing_data = "notBreaching"

  metric_query {
    id = "visible"

    metric {
      namespace   = "AWS/SQS"
      metric_name = "ApproximateNumberOfMessagesVisible"
      period      = 60
      stat        = "Maximum"
      dimensions = {
        QueueName = aws_sqs_queue.jobs.name
      }
    }
  }

  metric_query {
    id = "desired"

    metric {
      namespace   = "AWS/AutoScaling"
      metric_name = "GroupDesiredCapacity"
      period      = 60
      stat        = "Maximum"
      dimensions = {
        AutoScalingGroupName = aws_autoscaling_group.pool.name
      }
    }
  }

  # Jobs waiting, counted only while the group wants no instance (a group
  # with nothing to report counts as wanting none).
  metric_query {
    id          = "waiting_on_empty_group"
    label       = "Jobs waiting while the group is empty"
    expression  = "IF(FILL(desired, 0) == 0, visible, 0)"
    return_data = true
  }

  alarm_actions = [aws_autoscaling_policy.wake.arn]
}
