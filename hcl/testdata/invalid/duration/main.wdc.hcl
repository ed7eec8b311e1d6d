pool "p" {
  provider      = "local"
  drain_timeout = "forever" # ERROR: Invalid duration
  heartbeat {
    ttl = "0s" # ERROR: must be greater than zero
  }
}

task "t" {
  command = ["true"]
  timeout = "10" # ERROR: Write timeout = "10s" for 10 seconds
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

task "bare" {
  command = ["true"]
  timeout = 30 # ERROR: 30 is a number, not a duration: a duration is a string with a unit. Write timeout = "30s"
  lease {
    grace = 0 # ERROR: "grace" must be greater than zero; got 0
  }
  retry {
    backoff     = "-1s" # ERROR: "backoff" must be zero or more
    max_backoff = "0s" # ERROR: "max_backoff" must be greater than zero
  }
}
