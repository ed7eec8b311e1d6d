pool "a" {
  provider = "local"
  min      = 3 # ERROR: min must not be greater than max
  max      = 2
}

pool "b" {
  provider = "local"
  max      = 0 # ERROR: must be at least 1
  capacity = 0 # ERROR: must be at least 1
  min      = -1 # ERROR: must be at least 0
}

pool "c" {
  provider = "local"
  heartbeat {
    interval = "10s" # ERROR: interval must be shorter than the ttl
    ttl      = "5s"
  }
}

pool "d" {
  provider = "local"
  min      = 2 # ERROR: min = 2 and max = 1
}
