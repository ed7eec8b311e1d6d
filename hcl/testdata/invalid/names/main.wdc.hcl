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
