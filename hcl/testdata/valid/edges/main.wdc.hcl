variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t"
}

pool "p" {
  provider = "local"
}

task "ci_doctor" {
  count   = 3
  command = ["sh", "-c", "echo doctor"]
}

task "ci_rerun" {
  proposed_only = true
  command       = ["sh", "-c", "echo rerun ${proposal.input.run} from ${proposal.source.task} attempt ${proposal.source.attempt}"]
  env           = { RUN = proposal.input.run, TOKEN = var.token }
  dir           = "work"
  outputs       = ["report.txt"]
  placement     = { pool = "p" }
  timeout       = "10m"
  retry {
    max_attempts = 2
  }
}

task "notify" {
  proposed_only = true
  command       = ["echo", proposal.input["who"]]
}

edge "flake_rerun" {
  from       = task.ci_doctor
  type       = "flake"
  propose    = task.ci_rerun
  input      = object({ run = string })
  approval   = "earned"
  earn_after = 3
}

edge "tell" {
  from    = task.ci_doctor
  type    = "notify"
  propose = task.notify
  input   = map(string)
}

# A proposed task's attempts may recommend too.
edge "chain" {
  from     = task.ci_rerun
  type     = "still_flaky"
  propose  = task.notify
  approval = "earned"
}
