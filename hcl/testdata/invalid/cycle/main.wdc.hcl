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
  depends_on = [task.self[1]] # ERROR: task.self → task.self by depends_on element task.self[1] (testdata/invalid/cycle/main.wdc.hcl:19:17). # ERROR: To break the cycle, remove task.self[1] from the depends_on of task.self (testdata/invalid/cycle/main.wdc.hcl:19:17).
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

task "p" {
  command    = ["true"]
  outputs    = ["o.txt"]
  depends_on = [task.q] # ERROR: task.q → task.p by input "o" from task.p (testdata/invalid/cycle/main.wdc.hcl:43:14). # ERROR: To break the cycle, remove task.q from the depends_on of task.p (testdata/invalid/cycle/main.wdc.hcl:36:17).
}

task "q" {
  command = ["true"]

  input "o" {
    from   = task.p
    output = "o.txt"
  }
}
