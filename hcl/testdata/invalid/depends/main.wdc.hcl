task "a" {
  command    = ["true"]
  depends_on = [task.nope] # ERROR: no task "nope" is declared
}

task "b" {
  count      = 2
  command    = ["true"]
  depends_on = [task.a[0]] # ERROR: has no count argument
}

task "c" {
  command    = ["true"]
  depends_on = [task.b[2]] # ERROR: there is no task.b[2]
}

task "d" {
  command    = ["true"]
  depends_on = [pool.x] # ERROR: can only name tasks
}

task "e" {
  command    = ["true"]
  depends_on = task.a # ERROR: depends_on must be a list
}

task "f" {
  command    = ["true"]
  depends_on = ["task.a"] # ERROR: Invalid depends_on reference
}

task "g" {
  count      = 0
  command    = ["true"]
}

task "h" {
  command    = ["true"]
  depends_on = [task.g[0]] # ERROR: count = 0
}

task "typo" {
  command    = ["true"]
  depends_on = [task.cc] # ERROR: depends_on names task.cc, but no task "cc" is declared. Did you mean "c"?
}
