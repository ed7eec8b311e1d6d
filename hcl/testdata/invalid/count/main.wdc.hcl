task "a" {
  count   = -1 # ERROR: Negative count
  command = ["true"]
}

task "b" {
  count   = 1000000 # ERROR: must be at most 10000
  command = ["true"]
}

task "c" {
  command = ["echo", count.index] # ERROR: Reference to "count" in non-counted context
}

task "d" {
  count   = count.index # ERROR: non-counted context
  command = ["true"]
}

task "e" {
  count   = 2
  command = ["echo", count.value] # ERROR: The only attribute of "count" is count.index
}

locals {
  x = count.index # ERROR: non-counted context
}
