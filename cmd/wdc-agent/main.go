// Command wdc-agent is the wdc worker alone: `wdc-agent agent --server URL
// …` takes exactly the arguments of `wdc agent` and runs the same worker
// runtime, and `wdc-agent version` prints its version as `wdc version`
// does. It is what a pod or a Ray job runs on a machine that needs no
// plan or apply: it carries no configuration language, no state and no
// cluster client, so it is a fraction of wdc's size (docs/cli.md, "wdc
// agent").
//
// This package is only the program's entry and its version stamp; the
// commands are cmd/internal/agentcli's, which wdc shares.
package main

import (
	"os"

	"github.com/wdc-dev/wdc/cmd/internal/agentcli"
)

// Version is the wdc-agent release; release builds set it with
// -ldflags "-X main.Version=…" (make release), as they do wdc's.
var Version = agentcli.DefaultVersion

// Commit is the git commit wdc-agent was built from; release builds set it
// with -ldflags "-X main.Commit=…". When it is not set, the commit the Go
// toolchain recorded is used, else "unknown" (agentcli.BuildCommit).
var Commit = ""

func main() {
	b := agentcli.Build{Name: "wdc-agent", Version: Version, Commit: Commit}
	os.Exit(agentcli.Main(os.Args[1:], os.Stdout, os.Stderr, os.Environ(), b))
}
