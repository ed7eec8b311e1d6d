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
