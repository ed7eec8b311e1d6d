wdc {
  state  = "" # ERROR: state must not be empty; remove the attribute to use the default
  listen = "localhost:99999" # ERROR: the port "99999" must be a number from 0 to 65535
}
