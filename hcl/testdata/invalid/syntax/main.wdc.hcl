pool "a" {
  provider = "local"
  max = = 3 # ERROR: Invalid expression
}
