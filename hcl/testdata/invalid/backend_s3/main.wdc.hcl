wdc {
  state = "x.db" # ERROR: State file and backend both set
  backend "s3" { # ERROR: needs bucket and key
    endpoint   = "127.0.0.1:9000" # ERROR: Invalid endpoint
    access_key = "AKIAEXAMPLE" # ERROR: never read from the configuration
    lock_ttl   = "10ms" # ERROR: at least 1s
  }
}

task "t" {
  command = ["true"]
}
