pool "p" {
  provider = "local"
}

task "t" {
  command = ["true"]
}
