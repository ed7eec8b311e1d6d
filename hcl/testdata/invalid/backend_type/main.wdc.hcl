wdc {
  backend "gcs" { # ERROR: Unknown backend type
    bucket = "b"
  }
  backend "s3" { # ERROR: at most one backend block
    bucket = "b"
    key    = "k"
  }
}
