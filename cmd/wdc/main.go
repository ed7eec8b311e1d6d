// Command wdc runs work on pools of workers with fenced task leases, driven
// by a declarative plan/apply workflow. See the README and docs/ for the
// configuration language and the commands.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}
