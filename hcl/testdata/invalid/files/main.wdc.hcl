pool "p" {
  provider = "local"
}

task "up" {
  count   = 2
  command = ["true"]
  inputs  = ["../outside.txt"] # ERROR: cannot leave its folder
}

task "abs" {
  command = ["true"]
  inputs  = ["/etc/passwd"] # ERROR: not absolute
}

task "none" {
  command = ["true"]
  inputs  = ["data/*.csv"] # ERROR: matches no file
}

task "folder" {
  command = ["true"]
  inputs  = ["data"] # ERROR: matches the folder data
}

task "link" {
  command = ["true"]
  inputs  = ["data/escape.txt"] # ERROR: outside the configuration directory
}

task "outs" {
  command = ["true"]
  outputs = ["out/[x"] # ERROR: not a valid pattern
}

task "mount" {
  command = ["true"]

  input "all" {
    from   = task.up # ERROR: must name one instance
    output = "*"
  }
}

task "mount2" {
  command = ["true"]

  input "bad name!" { # ERROR: Invalid input name
    from   = task.abs
    output = "*"
  }
}

task "plain" {
  command = ["true"]
}

task "producer" {
  command = ["true"]
  outputs = ["out/a.json"]
}

task "from_no_outputs" {
  command = ["true"]

  input "x" {
    from   = task.plain # ERROR: declares no outputs
    output = "*"
  }
}

task "wrong_pattern" {
  command = ["true"]

  input "x" {
    from   = task.producer # ERROR: none of its declared outputs (out/a.json) can match it
    output = "out/*.csv"
  }
}

task "bad_from" {
  command = ["true"]

  input "x" {
    from   = task.nosuch # ERROR: input "x"'s from names task.nosuch
    output = "*"
  }
}
