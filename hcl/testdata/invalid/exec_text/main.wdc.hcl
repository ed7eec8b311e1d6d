variable "cmd" {
  default = ["echo", "a\u0000b"]
}

variable "token" {
  default   = "s3\u0000cret"
  sensitive = true
}

task "a" {
  command = [
    "echo",
    "a\u0000b", # ERROR: Element 1 of the command of task.a holds a NUL character
  ]
}

task "b" {
  command = var.cmd # ERROR: Element 1 of the command of task.b holds a NUL character
}

task "c" {
  command = ["true"]
  env = {
    "A=B" = "x"        # ERROR: The env name "A=B" of task.c holds "=": an environment holds NAME=VALUE strings, so the task would see the variable "A" instead
    ""    = "y"        # ERROR: An env name of task.c is empty
    "N\u0000M" = "z"   # ERROR: The env name "N\x00M" of task.c holds a NUL character
    OK    = "v\u0000w" # ERROR: The value of env "OK" of task.c holds a NUL character
    TOKEN = var.token  # ERROR: The value of env "TOKEN" of task.c holds a NUL character
  }
}

task "d" {
  command = ["true"]
  dir     = "x\u0000y" # ERROR: The dir of task.d holds a NUL character
}
