variable "v" {
  default = 1
}

variable "v" { # ERROR: already declared at
  default = 2
}

pool "p" {
  provider = "local"
}

pool "p" { # ERROR: Duplicate pool "p"
  provider = "local"
}

task "t" {
  command = ["true"]
}

task "t" { # ERROR: main.wdc.hcl:17
  command = ["false"]
}

locals {
  a = 1
}

locals {
  a = 2 # ERROR: Duplicate local value
}
