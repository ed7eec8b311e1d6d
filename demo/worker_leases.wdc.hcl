# The configuration `wdc demo worker-leases` plans and records, as apply
# would: one pool of two workers and one task. The demo plays both workers
# itself over worker protocol v1, so the command is never run.
pool "demo" {
  provider = "local"
  min      = 2
  max      = 2

  heartbeat {
    interval = "2s"
    ttl      = "10s"
  }
}

task "build" {
  command = ["echo", "built"]

  retry {
    max_lost = 3
    backoff  = "1s"
  }
}
