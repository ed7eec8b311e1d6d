variable "name" {
  type        = string
  default     = "default-name"
  description = "A name."
}

variable "replicas" {
  type    = number
  default = 1
}

variable "tags" {
  type    = list(string)
  default = []
}

variable "limits" {
  type    = map(number)
  default = { cpu = 1 }
}

variable "secret" {
  type      = string
  sensitive = true
  default   = "hunter2"
}

variable "opts" {
  type = object({
    verbose = bool
    level   = optional(number, 3)
  })
  default = { verbose = false }
}

variable "untyped" {
  default = "u"
}

task "run" {
  count   = var.replicas
  command = concat(["run", var.name], var.tags)
  env = {
    CPU     = var.limits["cpu"]
    VERBOSE = var.opts.verbose
    LEVEL   = var.opts.level
    U       = var.untyped
    SECRET  = var.secret
  }
}
