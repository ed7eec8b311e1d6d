task "a" {
  command    = ["true"]
  depends_on = [task.c] # ERROR: task.a → task.c → task.b → task.a
}

task "b" {
  command    = ["true"]
  depends_on = [task.a]
}

task "c" {
  command    = ["true"]
  depends_on = [task.b]
}

task "self" {
  count      = 3
  command    = ["true"]
  depends_on = [task.self[1]] # ERROR: task.self → task.self
}

task "x" {
  count      = 0
  command    = ["true"]
  depends_on = [task.x]
}

locals {
  p = local.q # ERROR: local.p → local.q → local.p
  q = local.p
}
