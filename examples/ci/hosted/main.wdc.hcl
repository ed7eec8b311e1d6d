# The configuration examples/ci/wdc-hosted.yml applies from hosted
# runners: its state lives in an S3-compatible bucket (backend "s3"), so
# the plan job and the apply job, each on a fresh machine, see one state,
# and two pipelines never apply at once (the backend's lock).
#
# The bucket and the store come from the workflow (WDC_VAR_state_bucket,
# WDC_VAR_state_endpoint, WDC_VAR_state_path_style); the credentials from
# the environment only (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).

variable "state_bucket" {
  type        = string
  description = "The bucket that holds the state (it must exist)."
}

variable "state_endpoint" {
  type        = string
  default     = "https://s3.amazonaws.com"
  description = "The store's URL: AWS S3, or another S3-compatible store."
}

variable "state_path_style" {
  type    = bool
  default = false
}

wdc {
  backend "s3" {
    bucket     = var.state_bucket
    key        = "wdc/hosted/state.db"
    endpoint   = var.state_endpoint
    path_style = var.state_path_style
  }
}

pool "runner" {
  provider = "local"
  max      = 2
}

task "build" {
  count   = 2
  command = ["sh", "-c", "echo building part ${count.index}"]
  timeout = "5m"
}

task "report" {
  depends_on = [task.build]
  command    = ["sh", "-c", "echo all parts built"]
}
