package agentcli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

// DefaultVersion is the version of a build that no release stamped: the
// main packages of wdc and wdc-agent start their Version from it, and
// release builds set it with -ldflags "-X main.Version=…" (make release).
const DefaultVersion = "0.1.0-dev"

// Build is what a binary says about itself, from its main package.
type Build struct {
	Name    string // the program: "wdc" or "wdc-agent"
	Version string // main.Version: DefaultVersion unless a release build set it
	// Commit is main.Commit, the git commit a release build stamped; ""
	// means the commit the Go toolchain recorded (BuildCommit).
	Commit string
}

// VersionCmd prints the version. It never reads the configuration or the state.
type VersionCmd struct {
	JSON bool `name:"json" help:"Print the version as JSON: version, commit, go, platform."`
}

// versionDoc is what version --json prints.
type versionDoc struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Run prints "NAME VERSION (commit COMMIT, GOVERSION GOOS/GOARCH)", or
// with --json {"version", "commit", "go", "platform"} indented by two
// spaces.
func (c *VersionCmd) Run(e *Env) error {
	doc := versionDoc{Version: e.Build.Version, Commit: BuildCommit(e.Build.Commit), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if c.JSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	_, err := fmt.Fprintf(e.Stdout, "%s %s (commit %s, %s %s)\n", e.Build.Name, doc.Version, doc.Commit, doc.Go, doc.Platform)
	return err
}

// BuildCommit returns commit when it is set (a release build stamps
// main.Commit), else the vcs.revision the toolchain recorded for a build
// inside a git checkout (with "-dirty" when the tree had changes), else
// "unknown" (a build from a source archive).
func BuildCommit(commit string) string {
	if commit != "" {
		return commit
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
