pool "a" {
  provider = "docker" # ERROR: There is no provider named "docker". The available providers are: external, kubernetes, local, ray.
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

pool "i" {
  provider = "external"
  external {
    image = "x" # ERROR: An argument named "image" is not expected here
  }
}

pool "j" {
  provider       = "local"
  launch_timeout = "soon" # ERROR: "soon" is not a duration
}

pool "typo" {
  provider = "locl" # ERROR: There is no provider named "locl". Did you mean "local"?
}
