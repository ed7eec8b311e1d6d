package main

import (
	"os"

	_ "github.com/wdc-dev/wdc/providers/builtin" // registers every built-in provider
)

func main() {
	stop := startProfiles(os.Stderr)
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
