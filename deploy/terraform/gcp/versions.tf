terraform {
  # Preconditions and variable validations are all this needs of Terraform.
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.47 added gpu_zonal_redundancy_disabled to google_cloud_run_v2_job.
      version = "~> 6.47"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = merge({ "hpsearch-stack" = var.name }, var.labels)
}
