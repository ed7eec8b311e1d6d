variable "who" {
  default = "world"
}

locals {
  prefix   = title("hello")
  base_env = { WHO = var.who }
}
