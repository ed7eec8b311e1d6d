name = "from-second-file"
