# An unknown argument or block in a task does not hide the errors of the
# arguments beside it.
pool "p" {
  provider = "local"
}

task "f" {
  command = ["x"]
  extra   = 1                # ERROR: Unsupported argument
  timeout = "forever"        # ERROR: Invalid duration
  env     = { "A=B" = "x" }  # ERROR: Invalid env name
}

task "g" {
  count   = 1.5 # ERROR: Invalid number
  command = ["y"]
  retries {}    # ERROR: Unsupported block type
}
