pool "p" {
  provider      = "local"
  drain_timeout = "forever" # ERROR: Invalid duration
  heartbeat {
    ttl = "0s" # ERROR: must be greater than zero
  }
}

task "t" {
  command = ["true"]
  timeout = "10" # ERROR: is not a duration
  lease {
    grace = "-1m" # ERROR: greater than zero
  }
  retry {
    backoff     = "1m"
    max_backoff = "10s" # ERROR: max_backoff is shorter than backoff
  }
}

task "overflow" {
  command = ["true"]
  timeout = "9999999h" # ERROR: "9999999h" is too large: a duration can be at most 2562047h
  lease {
    grace = "-9999999h" # ERROR: "grace" must be greater than zero
  }
}

task "spaces" {
  command = ["true"]
  timeout = " 5s" # ERROR: remove the leading or trailing spaces
  lease {
    grace = "5s " # ERROR: remove the leading or trailing spaces
  }
}
