locals {
  # Declared before what it uses: evaluated in dependency order.
  greeting = "${local.prefix}, ${upper(var.who)}"
  cmd      = ["sh", "-c", "echo ${local.greeting}"]
}

task "greet" {
  command = local.cmd
  dir     = path.root
  env     = merge(local.base_env, { ROOT = path.root })
}
