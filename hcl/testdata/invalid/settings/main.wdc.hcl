wdc {
  state     = "" # ERROR: state must not be empty; remove the attribute to use the default
  listen    = "localhost:99999" # ERROR: the port "99999" must be a number from 0 to 65535
  advertise = "ftp://coordinator" # ERROR: must start with https://
  insecure  = "sometimes" # ERROR: Inappropriate value for attribute "insecure"

  max_artifact_size = "lots" # ERROR: Invalid size

  tls { # ERROR: The argument "key_file" is required
    cert_file = "server.crt"
  }
}
