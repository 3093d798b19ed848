terraform {
  # Preconditions and variable validations are all this needs of Terraform.
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

provider "aws" {
  # null: the region of the standard AWS configuration (AWS_REGION,
  # AWS_PROFILE, ~/.aws/config), as for every other AWS tool.
  region = var.region

  default_tags {
    tags = local.tags
  }
}
