# Quickstart: checksum three text files in parallel, pack the data folder
# (a task that fails on its first attempt, to show a retry), then write a
# manifest once all of them succeeded. Outputs go to out/ (git-ignored).

variable "files" {
  type        = list(string)
  default     = ["alpha.txt", "beta.txt", "gamma.txt"]
  description = "Files under data/ to checksum, one task each."
}

locals {
  # Relative to the configuration directory, where commands run by default;
  # relative paths keep the tasks' definition hashes the same in any checkout.
  out = "out"
}

pool "hashers" {
  provider = "local"
  max      = 2
  labels   = { role = "hash" }

  heartbeat {
    interval = "1s"
    ttl      = "5s"
  }
}

pool "packers" {
  provider      = "local"
  max           = 1
  labels        = { role = "pack" }
  drain_timeout = "10s"
}

task "checksum" {
  count     = length(var.files)
  command   = ["sh", "-c", "mkdir -p '${local.out}' && sha256sum 'data/${var.files[count.index]}' > '${local.out}/${var.files[count.index]}.sha256'"]
  placement = { role = "hash" }
  timeout   = "1m"
}

task "compress" {
  # Fails on its first attempt on purpose: WDC_ATTEMPT is 1, 2, …
  command   = ["sh", "-c", "if [ \"$WDC_ATTEMPT\" = 1 ]; then echo 'simulated failure on attempt 1' >&2; exit 1; fi; mkdir -p '${local.out}' && tar -czf '${local.out}/data.tar.gz' data"]
  placement = { role = "pack" }
  timeout   = "1m"

  retry {
    max_attempts = 2
    backoff      = "1s"
  }
}

task "manifest" {
  depends_on = [task.checksum, task.compress]
  command    = ["sh", "-c", "cd '${local.out}' && cat *.sha256 > MANIFEST && sha256sum data.tar.gz >> MANIFEST"]
  placement  = { role = "pack" }
}
