task "normal" {
  command = ["echo", proposal.input.x] # ERROR: Reference to "proposal" outside a proposed_only task
}

locals {
  l = proposal.input # ERROR: only be used in a task block with proposed_only = true
}

pool "p" {
  provider = "local"
  labels   = { a = proposal.source.task } # ERROR: outside a proposed_only task
}

task "counted" {
  proposed_only = true
  count         = 2 # ERROR: it cannot have count
  command       = ["true"]
}

task "after" {
  proposed_only = true
  depends_on    = [task.normal] # ERROR: A proposed_only task runs when a proposal for it is approved; it cannot have depends_on.
  command       = ["true"]
}

task "reads" {
  proposed_only = true
  inputs        = ["*.txt"] # ERROR: it cannot have inputs
  command       = ["true"]
}

task "mounts" {
  proposed_only = true
  command       = ["true"]
  input "x" { # ERROR: it cannot have input blocks
    from   = task.normal
    output = "x"
  }
}

task "needs_rerun" {
  command    = ["true"]
  depends_on = [task.rerun] # ERROR: task.rerun is proposed_only: it runs only when a proposal is approved, so nothing can depend on it
}

task "mounts_rerun" {
  command = ["true"]
  input "r" {
    from   = task.rerun # ERROR: nothing can depend on it
    output = "r"
  }
}

task "rerun" {
  proposed_only = true
  command       = ["echo", proposal.input.nope] # ERROR: Unsupported attribute
  env           = { RUN = proposal.input.run, BAD = proposal.input.list } # ERROR: Incorrect attribute value type
  dir           = proposal.source.nope # ERROR: Unsupported attribute
  timeout       = proposal.input.run
  outputs       = [proposal.proposal] # ERROR: Invalid proposal reference
  placement     = { x = other.thing } # ERROR: proposal.input.KEY, proposal.source.task and proposal.source.attempt
}

task "loose" {
  proposed_only = true
  command       = proposal.input.cmd
  env           = { A = proposal.input.a.b.c }
}

edge "e" {
  from    = task.normal
  type    = "flake"
  propose = task.rerun
  input   = object({ run = string, list = list(string) })
}

edge "computed" {
  from     = task.normal
  type     = "other"
  propose  = task.rerun
  approval = proposal.input.x # ERROR: outside a proposed_only task
}
