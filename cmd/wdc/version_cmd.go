package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the wdc release; release builds set it with
// -ldflags "-X main.Version=…" (make release).
var Version = "0.1.0-dev"

// Commit is the git commit wdc was built from; release builds set it with
// -ldflags "-X main.Commit=…". When it is not set, the commit the Go
// toolchain recorded (a build inside a git checkout) is used, else
// "unknown" (a build from a source archive).
var Commit = ""

// VersionCmd prints the version. It never reads the configuration or the state.
type VersionCmd struct {
	JSON bool `name:"json" help:"Print the version as JSON: version, commit, go, platform."`
}

// versionDoc is what wdc version --json prints.
type versionDoc struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Run prints "wdc VERSION (commit COMMIT, GOVERSION GOOS/GOARCH)".
func (c *VersionCmd) Run(e *env) error {
	doc := versionDoc{Version: Version, Commit: buildCommit(), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if c.JSON {
		return writeJSON(e.stdout, doc)
	}
	_, err := fmt.Fprintf(e.stdout, "wdc %s (commit %s, %s %s)\n", doc.Version, doc.Commit, doc.Go, doc.Platform)
	return err
}

// buildCommit returns Commit, else the vcs.revision the toolchain stamped
// (with "-dirty" when the tree had changes), else "unknown".
func buildCommit() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case modified == "true":
		return rev + "-dirty"
	}
	return rev
}
