# The example of DESIGN §5.
variable "shards" {
  default = 4
}

pool "builders" {
  provider = "local"
  min      = 1
  max      = 4
  capacity = 1
  labels   = { node = "lab", arch = "amd64", can = "build" }

  heartbeat {
    interval = "2s"
    ttl      = "10s"
  }
}

task "test" {
  count     = var.shards
  command   = ["go", "test", "-run", "Shard${count.index}", "./..."]
  dir       = "${path.root}/src"
  placement = { can = "build" }
  timeout   = "10m"

  retry {
    max_attempts = 3
    backoff      = "5s"
  }
}

task "report" {
  depends_on = [task.test]
  command    = ["sh", "-c", "cat reports/*.json > summary.json"]
}
