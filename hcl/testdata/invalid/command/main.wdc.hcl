task "a" {
  command = [] # ERROR: Empty command
}

task "b" {
  command = ["", "x"] # ERROR: first element of the command
}

task "c" { # ERROR: The argument "command" is required
}

task "d" {
  command = ["echo", null] # ERROR: must not be null
}

task "e" {
  command = null # ERROR: must not be null
}
