name     = "from-file"
replicas = 2
tags     = ["a", "b"]
