pool "a" {
  provider = "docker" # ERROR: known providers are: kubernetes, local, ray
}

pool "b" {
  provider = "ray" # ERROR: the ray provider is not available yet
}

pool "c" {
  provider = "kubernetes" # ERROR: kubernetes provider is not available yet
}

pool "d" {
  provider = "local"
  ray { # ERROR: cannot have a ray block
  }
}

pool "e" { # ERROR: The argument "provider" is required
}

pool "f" {
  provider = "local"
  local {
    env = { A = "1" }
  }
  local { # ERROR: Duplicate provider block
  }
}

pool "g" {
  provider = null # ERROR: The provider of pool "g" is required; it must not be null
  local {
  }
}

pool "h" {
  provider = "" # ERROR: must not be empty
}
