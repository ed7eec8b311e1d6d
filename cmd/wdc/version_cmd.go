package main

import "github.com/wdc-dev/wdc/cmd/internal/agentcli"

// Version is the wdc release; release builds set it with
// -ldflags "-X main.Version=…" (make release).
var Version = agentcli.DefaultVersion

// Commit is the git commit wdc was built from; release builds set it with
// -ldflags "-X main.Commit=…". When it is not set, the commit the Go
// toolchain recorded (a build inside a git checkout) is used, else
// "unknown" (a build from a source archive).
var Commit = ""

// VersionCmd is `wdc version`, the command wdc-agent has too.
type VersionCmd = agentcli.VersionCmd

// build is what `wdc version` prints and the version `wdc agent`
// registers with.
func build() agentcli.Build {
	return agentcli.Build{Name: "wdc", Version: Version, Commit: Commit}
}
