variable "token" { # ERROR: No value for required variable
  type = string
}

variable "n" {
  type    = number
  default = "x" # ERROR: does not match its type
}

variable "t" {
  type = lisst(string) # ERROR: Invalid type specification
}

variable "bad name" { # ERROR: Invalid variable name
}

variable "r" {
  default = var.n # ERROR: Variables not allowed
}
