pool "p" {
  provider = "local"
  max      = "lots" # ERROR: a number is required
  labels   = ["a"] # ERROR: map of string required
  capacity = 1.5 # ERROR: whole number
}

task "t" {
  command = "make test" # ERROR: list of string required
  env     = { A = [1] } # ERROR: Incorrect attribute value type
}

task "u" {
  command = ["true"]
  count   = "many" # ERROR: a number is required
  timeout = 10 # ERROR: Invalid duration
}
