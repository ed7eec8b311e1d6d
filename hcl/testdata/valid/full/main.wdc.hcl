wdc {
  state     = "var/state.db"
  listen    = "127.0.0.1:7070"
  advertise = "https://coordinator.example:7070"
  insecure  = false

  max_artifact_size = "64MiB"

  tls {
    cert_file = "tls/server.crt"
    key_file  = "/etc/wdc/server.key"
  }
}

pool "gpu" {
  provider      = "local"
  min           = 2
  max           = 8
  capacity      = 4
  labels        = { gpu = "a100", zone = "eu" }
  drain_timeout  = "5m"
  launch_timeout = "2m"

  heartbeat {
    interval = "500ms"
    ttl      = "3s"
  }

  local {
    env = { CUDA_VISIBLE_DEVICES = "0", N = 1 }
  }
}

task "train" {
  command   = ["python", "train.py"]
  env       = { EPOCHS = 10, MODE = "full" }
  dir       = "work/train"
  placement = { gpu = "a100" }
  timeout   = "90m"

  lease {
    grace = "30s"
  }

  retry {
    max_attempts = 5
    max_lost     = 0
    backoff      = "1s"
    max_backoff  = "1m"
  }
}

task "abs" {
  command = ["ls"]
  dir     = "/tmp"

  retry {
    max_attempts = 2
    backoff      = "0s" # retry at once
  }
}

pool "edge" {
  provider = "external"
  max      = 3
  labels   = { site = "edge" }
  external {}
}
