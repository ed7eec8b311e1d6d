task "a" {
  count   = 2
  command = ["true"]
}

task "b" {
  command = ["true"]
}

task "p" {
  proposed_only = true
  command       = ["echo", proposal.source.task]
}

edge "ok" {
  from    = task.a
  type    = "flake"
  propose = task.p
}

edge "ok" { # ERROR: Duplicate edge "ok"
  from    = task.a
  type    = "other"
  propose = task.p
}

edge "bad name!" { # ERROR: Invalid edge name
  from    = task.a
  type    = "x"
  propose = task.p
}

edge "same_key" { # ERROR: both take recommendations of type "flake" from task.a
  from    = task.a
  type    = "flake"
  propose = task.p
}

edge "missing" { # ERROR: The argument "propose" is required
  from = task.a
  type = "x"
}

edge "index" {
  from    = task.a[0] # ERROR: An edge names a whole task block
  type    = "i"
  propose = task.p
}

edge "not_task" {
  from    = pool.x # ERROR: from can only name a task
  type    = "nt"
  propose = task.p
}

edge "string_from" {
  from    = "task.a" # ERROR: Invalid from reference
  type    = "sf"
  propose = task.p
}

edge "undeclared" {
  from    = task.aa # ERROR: no task "aa" is declared. Did you mean "a"?
  type    = "u"
  propose = task.p
}

edge "normal_propose" {
  from    = task.a
  type    = "np"
  propose = task.b # ERROR: task.b is not proposed_only
}

edge "empty_type" {
  from    = task.a
  type    = "" # ERROR: type must not be empty
  propose = task.p
}

edge "long_type" {
  from    = task.a
  type    = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" # ERROR: at most 64 characters
  propose = task.p
}

edge "odd_type" {
  from    = task.a
  type    = "no spaces" # ERROR: is not a valid recommendation type
  propose = task.p
}

edge "var_type" {
  from    = task.a
  type    = var.x # ERROR: Variables not allowed
  propose = task.p
}

edge "list_input" {
  from    = task.a
  type    = "li"
  propose = task.p
  input   = list(string) # ERROR: a recommendation's input is a JSON object
}

edge "bad_input" {
  from    = task.a
  type    = "bi"
  propose = task.p
  input   = object({ run = strin }) # ERROR: Invalid type specification
}

edge "approval" {
  from     = task.a
  type     = "ap"
  propose  = task.p
  approval = "sometimes" # ERROR: it must be "always" (someone approves every proposal; the default) or "earned"
}

edge "earn_always" {
  from       = task.a
  type       = "ea"
  propose    = task.p
  earn_after = 2 # ERROR: earn_after without earned approval
}

edge "earn_zero" {
  from       = task.a
  type       = "ez"
  propose    = task.p
  approval   = "earned"
  earn_after = 0 # ERROR: must be at least 1
}

edge "earn_frac" {
  from       = task.a
  type       = "ef"
  propose    = task.p
  approval   = "earned"
  earn_after = 1.5 # ERROR: a whole number
}

edge "earn_null" {
  from       = task.a
  type       = "en"
  propose    = task.p
  earn_after = null
}
