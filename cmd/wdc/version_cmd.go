package main

import (
	"fmt"
	"runtime"
)

// Version is the wdc release; release builds set it with
// -ldflags "-X main.Version=…".
var Version = "0.1.0-dev"

// VersionCmd prints the version. It never reads the configuration or the state.
type VersionCmd struct {
	JSON bool `name:"json" help:"Print the version as JSON."`
}

// Run prints "wdc VERSION (GOVERSION GOOS/GOARCH)".
func (c *VersionCmd) Run(e *env) error {
	if c.JSON {
		return writeJSON(e.stdout, map[string]string{"version": Version, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH})
	}
	_, err := fmt.Fprintf(e.stdout, "wdc %s (%s %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
