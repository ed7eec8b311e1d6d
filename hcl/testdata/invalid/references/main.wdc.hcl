variable "n" {
  default = 1
}

variable "shards" {
  default = 2
}

locals {
  out = "out"
}

task "typos" {
  command = ["echo", var.shard] # ERROR: An input variable named "shard" is not declared. Did you mean "shards"?
  env     = { A = local.outt } # ERROR: A local value named "outt" is not declared in any locals { } block. Did you mean "out"?
}

task "a" {
  command = ["echo", var.m] # ERROR: undeclared input variable
  env     = { A = local.z } # ERROR: undeclared local value
  dir     = path.cwd # ERROR: path.root
}

task "b" {
  command = [foo.bar] # ERROR: There is no object named "foo"
}

task "c" {
  command = [task.a] # ERROR: only be referenced in depends_on
}

task "d" {
  command = [upper(1, 2)] # ERROR: Too many function arguments
}

task "e" {
  command = [nosuch("x")] # ERROR: Call to unknown function
}

pool "p" {
  provider = "local"
  labels   = { a = local.broken }
}

locals {
  broken = 1 / "x" # ERROR: Invalid operand
}
