pool "1p" { # ERROR: Invalid pool name
  provider = "local"
}

task "has space" { # ERROR: Invalid task name
  command = ["true"]
}

task "ok" {
  count   = 2
  command = ["true"]
  retry {
    max_attempts = 0 # ERROR: must be at least 1
    max_lost     = -1 # ERROR: must be at least 0
  }
}

pool "p\u200dx" { # ERROR: "p\u200dx" is not a valid pool name: a name starts with an ASCII letter
  provider = "local"
}

task "café" { # ERROR: Invalid task name
  command = ["true"]
}

variable "v\u200dx" { # ERROR: Invalid variable name
}

task "" { # ERROR: a name must not be empty
  command = ["true"]
}

task "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" { # ERROR: a name is at most 128 characters long
  command = ["true"]
}

task "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy" {
  command = ["true"]
}
