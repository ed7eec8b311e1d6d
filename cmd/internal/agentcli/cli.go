package agentcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/wdc-dev/wdc/cmd/internal/singledash"
)

// Env is what the agent and version commands run with: the binary's
// build, the process's streams and environment, and Then.
type Env struct {
	Build   Build
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string // "NAME=value" entries; the last one of a name wins
	// Then, when a command's Run sets it, is the rest of the command: the
	// caller runs it once the command line's parser is no longer
	// referenced, so a command that runs for hours (the agent) does not
	// keep the parser's model of every command alive in its heap.
	Then func() error
}

// getenv looks name up in the command's environment.
func (e *Env) getenv(name string) string {
	prefix := name + "="
	for i := len(e.Environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(e.Environ[i], prefix); ok {
			return v
		}
	}
	return ""
}

// CLI is the command line of wdc-agent: the agent command as `wdc agent`
// has it, the version, and install-agent (what an agent_image's init
// container runs).
type CLI struct {
	Agent        AgentCmd        `cmd:"" help:"Run one worker against a coordinator (apply's providers start it with a one-time credential; --join-file joins from anywhere)."`
	Version      VersionCmd      `cmd:"" help:"Print the wdc-agent version."`
	InstallAgent InstallAgentCmd `cmd:"" name:"install-agent" help:"Copy this binary to DEST (the init container of a Kubernetes pool with agent_image runs it)."`
}

// kongExit is the panic value used to turn kong's exit calls (after --help)
// into a return from Main.
type kongExit struct{ code int }

// NewParser returns the parser of wdc-agent's command line into cli,
// writing help to stdout and stderr, named after b. Kong's exit calls
// (after --help) panic with a value Main turns into its return.
func NewParser(cli *CLI, b Build, stdout, stderr io.Writer) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name(b.Name),
		kong.Description("The wdc worker alone: runs `agent` against a coordinator, as `wdc agent` does (no configuration language, no cluster clients); install-agent copies it where a pod's task image can run it."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(kongExit{c}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
}

// Main runs wdc-agent with args (without the program name) and returns
// its exit code: 0 on success (and after --help), 1 on any error, a parse
// error included (kong's own code for it is replaced). Errors are printed
// to stderr as "NAME: error: …".
func Main(args []string, stdout, stderr io.Writer, environ []string, b Build) (code int) {
	defer func() {
		if r := recover(); r != nil {
			if k, ok := r.(kongExit); ok {
				code = k.code
				return
			}
			panic(r)
		}
	}()
	var cli CLI
	parser, err := NewParser(&cli, b, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: internal error: %v\n", b.Name, err)
		return 1
	}
	if len(args) == 0 {
		args = []string{"--help"}
	}
	// Single-dash long flags (-join-file=FILE) are taken as their --
	// forms, as wdc takes them.
	kctx, err := parser.Parse(singledash.Rewrite(parser.Model, args))
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v\n", b.Name, err)
		fmt.Fprintf(stderr, "Run \"%s --help\" for usage.\n", b.Name)
		return 1
	}
	e := &Env{Build: b, Stdout: stdout, Stderr: stderr, Environ: environ}
	err = kctx.Run(e)
	if err == nil && e.Then != nil {
		// parser and kctx are not used past this point, so the collector
		// may free them while Then runs.
		err = e.Then()
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v\n", b.Name, err)
		return 1
	}
	return 0
}
