wdc {
  max_artifact_size = "4B"
}

pool "p" {
  provider = "local"
}

task "big" {
  command = ["cat", "data.txt"]
  inputs  = ["data.txt"] # ERROR: data.txt is 6 B, more than max_artifact_size (4 B in the wdc block)
}
