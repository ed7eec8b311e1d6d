thing "x" { # ERROR: Unsupported block type
}

pool "p" {
  provider = "local"
  size     = 3 # ERROR: Unsupported argument
  docker { # ERROR: Unsupported block type
  }
}

task "t" {
  command = ["true"]
  cmd     = ["x"] # ERROR: Unsupported argument
  retry {
    attempts = 3 # ERROR: Unsupported argument
  }
  retries { # ERROR: Blocks of type "retries" are not expected here. Did you mean "retry"?
  }
}

pool "q" {
  provider = "local"
  heartbeating { # ERROR: Did you mean "heartbeat"?
  }
}

variables "v" { # ERROR: Did you mean "variable"?
}

wdc {
  state  = "s.db"
  stat   = "x" # ERROR: Unsupported argument
}

wdc { # ERROR: Duplicate wdc block
}
