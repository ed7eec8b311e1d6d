pool "p" {
  provider = "local"
}

task "build" {
  count   = 2
  command = ["sh", "-c", "mkdir -p out && cat data/*.txt > out/all.txt"]
  inputs  = ["data/*.txt", "data/sub/c.txt", "data/a.txt"]
  outputs = ["out/*.txt"]
}

task "report" {
  command = ["cat", "from-build/out/all.txt"]
  outputs = ["report.html"]

  input "from-build" {
    from   = task.build[1]
    output = "out/*.txt"
  }
}

task "plain" {
  command = ["true"]
  dir     = "/tmp"
  inputs  = ["data/b.txt"]
}
