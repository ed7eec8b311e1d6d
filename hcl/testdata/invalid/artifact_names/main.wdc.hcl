pool "p" {
  provider = "local"
}

task "dotdot" {
  command = ["true"]
  outputs = ["out/.."] # ERROR: has a "." or ".." part
}

task "nul" {
  command = ["true"]
  outputs = ["out/a\u0000b"] # ERROR: holds a NUL byte
}

task "empty_part" {
  command = ["true"]
  outputs = ["out//x"] # ERROR: has an empty part
}

task "trailing_slash" {
  command = ["true"]
  outputs = ["out/"] # ERROR: has an empty part
}

task "backslash" {
  command = ["true"]
  outputs = ["out\\x"] # ERROR: holds a backslash
}

task "empty" {
  command = ["true"]
  outputs = [""] # ERROR: is empty
}

task "abs" {
  command = ["true"]
  outputs = ["/tmp/x"] # ERROR: not absolute
}

task "producer" {
  command = ["true"]
  outputs = ["out/*"]
}

task "mount_dotdot" {
  command = ["true"]

  input "x" {
    from   = task.producer
    output = "out/.." # ERROR: has a "." or ".." part
  }
}

task "mount_nul" {
  command = ["true"]

  input "y" {
    from   = task.producer
    output = "out/\u0000" # ERROR: holds a NUL byte
  }
}

task "input_nul" {
  command = ["true"]
  inputs  = ["main.wdc.hcl\u0000"] # ERROR: holds a NUL byte
}
