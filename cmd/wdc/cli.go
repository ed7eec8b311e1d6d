package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/cmd/internal/agentcli"
	"github.com/wdc-dev/wdc/cmd/internal/singledash"
	"github.com/wdc-dev/wdc/state"
	"github.com/willabides/kongplete"
	"golang.org/x/term"
)

// CLI is the root of the command tree; its fields are the global flags.
type CLI struct {
	Chdir   string   `name:"chdir" placeholder:"DIR" predictor:"dir" help:"Use DIR as the configuration directory instead of the current one (relative paths resolve against it)."`
	State   string   `name:"state" placeholder:"PATH" predictor:"file" help:"State file path. Default: the wdc block's state setting, else .wdc/state.db in the configuration directory. Environment: WDC_STATE."`
	Var     []string `name:"var" sep:"none" placeholder:"NAME=VALUE" predictor:"var" help:"Set an input variable (repeatable; the value may contain commas). Overrides --var-file and WDC_VAR_NAME."`
	VarFile []string `name:"var-file" sep:"none" placeholder:"FILE" predictor:"file" help:"Read input variable values from an HCL file of NAME = value lines (repeatable)."`
	NoColor bool     `name:"no-color" help:"Do not color output. Colors are used only on a terminal, and never when NO_COLOR is set."`

	Validate     ValidateCmd     `cmd:"" help:"Check the configuration files and report every problem with its file:line:column."`
	Fmt          FmtCmd          `cmd:"" help:"Rewrite the configuration files in canonical HCL style (--check lists unformatted files, --diff shows the changes). Never opens the state."`
	Plan         PlanCmd         `cmd:"" help:"Show what apply would change: workers to launch, tasks to run, replace, retry or cancel. Never writes the state."`
	Apply        ApplyCmd        `cmd:"" help:"Plan under the state lock, confirm, then launch workers and run the tasks until every one is finished."`
	Test         TestCmd         `cmd:"" help:"Run the test files (*.wdctest.hcl here and in tests/): each run plans or applies a copy of the configuration on a fresh temporary state and checks its assertions. Never opens the state."`
	ForceUnlock  ForceUnlockCmd  `cmd:"" name:"force-unlock" help:"Remove the apply lock by hand (when its holder is gone on another host)."`
	StateCmds    StateCmd        `cmd:"" name:"state" help:"Move the whole state: pull a consistent copy, or push a local state file into the backend."`
	Show         ShowCmd         `cmd:"" help:"Show a saved plan as wdc plan would, or with no file the state: pools, workers, tasks, leases."`
	Status       StatusCmd       `cmd:"" help:"One screen of where things stand: the apply holding the lock, each pool's workers and supervisor, the tasks and the oldest queued one."`
	Tasks        TasksCmd        `cmd:"" help:"Inspect tasks recorded in the state."`
	Workers      WorkersCmd      `cmd:"" help:"Inspect workers recorded in the state, or be one by hand against a running apply."`
	Leases       LeasesCmd       `cmd:"" help:"Inspect leases recorded in the state, or complete one by hand."`
	Logs         LogsCmd         `cmd:"" help:"Print an attempt's stdout (or --stderr) as its result delivered it."`
	Artifacts    ArtifactsCmd    `cmd:"" help:"List and get the outputs tasks produced."`
	Proposals    ProposalsCmd    `cmd:"" help:"List and show proposals: follow-up tasks that tasks recommended through edges, waiting for approval or approved."`
	Approve      ApproveCmd      `cmd:"" help:"Approve a proposal: the next apply runs it (a running apply picks it up)."`
	Reject       RejectCmd       `cmd:"" help:"Reject a proposal, with --reason: it never runs, and its edge's streak starts again."`
	Edges        EdgesCmd        `cmd:"" help:"List the edges: which recommendation of which task proposes which task, the approval mode and each edge's record."`
	Doctor       DoctorCmd       `cmd:"" help:"Check the state file and what it records (integrity, schema, a dead apply's lock and processes, stale workers, leases left active with no apply, unplaceable tasks); say what is wrong and what to do. Exit 0 clean, 3 warnings, 4 errors."`
	GC           GCCmd           `cmd:"" name:"gc" help:"Remove the stored logs, outputs and inputs that no attempt of the current definitions refers to (--dry-run lists them); prints what it frees."`
	JoinToken    JoinTokenCmd    `cmd:"" name:"join-token" help:"Make, list and revoke join tokens: credentials with which workers join an apply from any machine."`
	Agent        AgentCmd        `cmd:"" help:"Run one worker against a coordinator (apply's providers start it with a one-time credential; --join-file joins from anywhere)."`
	InstallAgent InstallAgentCmd `cmd:"" name:"install-agent" help:"Copy this binary to DEST (the init container of a Kubernetes pool with agent_image runs it)."`
	Providers    ProvidersCmd    `cmd:"" help:"List the providers: name, source, status, what each supports (render, dry run, cluster writes) and which pools of the configuration use it. Never opens the state."`
	Demo         DemoCmd         `cmd:"" help:"Demonstrations that run wdc's own code on a temporary state and check what they show (worker-leases)."`
	Version      VersionCmd      `cmd:"" help:"Print the wdc version."`
	Completion   CompletionCmd   `cmd:"" help:"Print a shell completion script for bash, zsh or fish (completes commands, flags, and task addresses from the configuration)."`
}

// TasksCmd groups the task inspection commands.
type TasksCmd struct {
	List TasksListCmd `cmd:"" help:"List tasks with status, attempts and last error."`
	Show TasksShowCmd `cmd:"" help:"Show one task: its attempts and its events."`
}

// WorkersCmd groups the worker commands: the listing, the worker verbs
// (register, heartbeat, assign, leave: a worker by hand) and the operator verbs
// (lease, sweep).
type WorkersCmd struct {
	List         WorkersListCmd         `cmd:"" help:"List workers with pool, labels, status, host, pid, last heartbeat and leases held."`
	Register     WorkersRegisterCmd     `cmd:"" help:"Register a worker with a join file against the running apply; prints its id and session token."`
	Heartbeat    WorkersHeartbeatCmd    `cmd:"" help:"Send one heartbeat for a worker (session token in WDC_SESSION_TOKEN); prints leases renewed and the drain flag."`
	Assign       WorkersAssignCmd       `cmd:"" help:"Claim one task for a worker (session token in WDC_SESSION_TOKEN); prints its lease and spec."`
	Leave        WorkersLeaveCmd        `cmd:"" help:"Deregister a worker (session token in WDC_SESSION_TOKEN): it is gone at once, and a lease it still holds is handed back at no cost to the task's retries."`
	Lease        WorkersLeaseCmd        `cmd:"" help:"Show a task's current lease, from the running apply's coordinator."`
	Sweep        WorkersSweepCmd        `cmd:"" help:"Run one sweep pass of the running apply's coordinator now; prints what expired."`
	RenderLaunch WorkersRenderLaunchCmd `cmd:"" name:"render-launch" help:"Print what one launch of a pool would create on its target (kubernetes: the Secret, Lease and Job as YAML), changing nothing."`
}

// LeasesCmd groups the lease commands.
type LeasesCmd struct {
	List     LeasesListCmd     `cmd:"" help:"List leases with fencing token, task, attempt, worker, status and expiry."`
	Complete LeasesCompleteCmd `cmd:"" help:"Post a lease's result (session token in WDC_SESSION_TOKEN); prints the decision."`
}

// env is what every command runs with: the parsed global flags, the
// process's streams and environment, and the clock.
type env struct {
	flags   *CLI
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	environ []string
	now     func() time.Time
	// cleanups run when the command has ended (atExit).
	cleanups []func()
	// pulled maps each state copy pulled from a backend (pullCopy) to
	// it, for the blobs its readers fetch from the bucket (blobStore).
	pulled map[string]*backend.S3
}

// getenv looks name up in the command's environment.
func (e *env) getenv(name string) string {
	prefix := name + "="
	for i := len(e.environ) - 1; i >= 0; i-- {
		if strings.HasPrefix(e.environ[i], prefix) {
			return e.environ[i][len(prefix):]
		}
	}
	return ""
}

// configDir returns the absolute configuration directory.
func (e *env) configDir() (string, error) {
	dir := e.flags.Chdir
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("configuration directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("configuration directory %s is not a directory", abs)
	}
	return abs, nil
}

// color reports whether output to w may use colors: only on a terminal,
// and neither --no-color nor NO_COLOR is set.
func (e *env) color(w io.Writer) bool {
	if e.flags.NoColor || e.getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := fileOf(w)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errExit makes run exit with code without printing anything more: the
// command already said why.
type errExit struct{ code int }

func (e errExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// kongExit is the panic value used to turn kong's exit calls (after --help)
// into a return from run.
type kongExit struct{ code int }

// run parses args, runs the command and returns the process exit code:
// 0 on success, 1 on any error (kong's own parse-error code is replaced),
// 2 for `plan --detailed-exitcode` with changes.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) (code int) {
	var cli CLI
	defer func() {
		if r := recover(); r != nil {
			if k, ok := r.(kongExit); ok {
				code = k.code
				return
			}
			panic(r)
		}
	}()
	parser, err := kong.New(&cli,
		kong.Name("wdc"),
		kong.Description("Run work on pools of workers with fenced task leases, driven by plan and apply."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(kongExit{c}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "wdc: internal error: %v\n", err)
		return 1
	}
	// A shell asking for completions (COMP_LINE set) gets them and
	// nothing else runs.
	kongplete.Complete(parser, kongplete.WithPredictors(predictors()), kongplete.WithExitFunc(func(c int) { panic(kongExit{c}) }))
	if len(args) == 0 {
		args = []string{"--help"}
	}
	// Terraform's single-dash long flags (-out=FILE, -auto-approve) are
	// taken as their -- forms.
	kctx, err := parser.Parse(singledash.Rewrite(parser.Model, args))
	if err != nil {
		err = unknownCommand(kctx, err)
		fmt.Fprintf(stderr, "wdc: error: %v\n", err)
		if kctx != nil && len(args) > 0 {
			fmt.Fprintf(stderr, "Run \"wdc --help\" for usage.\n")
		}
		return 1
	}
	e := &env{flags: &cli, stdin: stdin, stdout: stdout, stderr: stderr, environ: environ, now: time.Now}
	defer func() {
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
	}()
	// The commands wdc shares with wdc-agent (agent, version) run with
	// their own environment; the agent hands its work over as its Then.
	ae := &agentcli.Env{Build: build(), Stdout: stdout, Stderr: stderr, Environ: environ}
	err = kctx.Run(e, ae)
	if err == nil && ae.Then != nil {
		// parser and kctx are not used past this point, so the collector
		// may free them while Then runs.
		err = ae.Then()
	}
	if err != nil {
		var ee errExit
		if errors.As(err, &ee) {
			return ee.code
		}
		// A damaged state file says so, whichever read or write found it,
		// without the steps that led there.
		var corrupt *state.CorruptError
		if errors.As(err, &corrupt) {
			err = corrupt
		}
		fmt.Fprintf(stderr, "wdc: error: %v\n", err)
		return 1
	}
	return 0
}

// unknownCommand turns kong's "unexpected argument X" for a word where a
// command belongs (at the root, or under a command group such as wdc
// tasks) into "unknown command X", listing the commands there; other
// errors are returned as they are.
func unknownCommand(kctx *kong.Context, err error) error {
	var pe *kong.ParseError
	if kctx == nil && errors.As(err, &pe) {
		kctx = pe.Context
	}
	if kctx == nil {
		return err
	}
	var word string
	if _, scanErr := fmt.Sscanf(err.Error(), "unexpected argument %s", &word); scanErr != nil || err.Error() != "unexpected argument "+word {
		return err
	}
	node := kctx.Model.Node
	if sel := kctx.Selected(); sel != nil {
		node = sel
	}
	var names []string
	for _, c := range node.Children {
		if c.Type == kong.CommandNode && !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return err
	}
	where := "wdc"
	if node != kctx.Model.Node {
		where = "wdc " + node.FullPath()[len(kctx.Model.Node.Name)+1:]
	}
	return fmt.Errorf("unknown command %q for %s; the commands are: %s", word, where, strings.Join(names, ", "))
}
