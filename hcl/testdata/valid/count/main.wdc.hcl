task "fetch" {
  count   = 3
  command = ["fetch", "--part", count.index]
  env     = { PART = "${count.index}" }
}

task "none" {
  count   = 0
  command = ["never"]
}

task "one" {
  depends_on = [task.fetch[1]]
  command    = ["one"]
}

task "all" {
  depends_on = [task.fetch, task.fetch[2], task.none, task.one, task.one]
  command    = ["all"]
}

task "shard" {
  count      = 2
  depends_on = [task.all]
  command    = ["shard", "${count.index + 1}/2"]
  placement  = { slot = count.index % 2 == 0 ? "even" : "odd" }
}

task "zero" {
  count   = 0
  command = ["never"]
}

task "after_zero" {
  depends_on = [task.zero]
  command    = ["after"]
}

task "unset" {
  count   = null
  command = ["unset"]
}
