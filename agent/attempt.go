package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wdc-dev/wdc/agent/procgroup"
	"github.com/wdc-dev/wdc/protocol"
)

// Environment variables the agent gives every attempt.
const (
	EnvTask         = "WDC_TASK"          // the task address, e.g. task.test[2]
	EnvAttempt      = "WDC_ATTEMPT"       // the attempt number, 1, 2, 3 …
	EnvWorkerID     = "WDC_WORKER_ID"     // the worker id the coordinator assigned
	EnvFencingToken = "WDC_FENCING_TOKEN" // the lease's fencing token, decimal
	EnvAttemptDir   = "WDC_ATTEMPT_DIR"   // a fresh, empty scratch folder for this attempt
)

// Failure classes the agent reports (docs/design.md §2).
const (
	ClassFailure = "failure" // non-zero exit, a signal the command caused, a timeout
	ClassLost    = "lost"    // the agent stopped the attempt: cancelled lease, drain timeout, shutdown, local I/O error
	ClassRefused = "refused" // the command cannot start: empty argv, not found, bad directory
)

// attempt is one running (or finishing) try of a task on this worker.
type attempt struct {
	asg   protocol.Assignment
	paths attemptPaths

	endOnce sync.Once
	ended   chan struct{} // closed when the command has ended (or was never run)
	// streaming: a streamLogs goroutine sends its output (guarded by the
	// agent's mu).
	streaming bool

	stopOnce sync.Once
	stopCh   chan struct{} // closed when the agent asks the attempt to stop
	stopWhy  string        // why, set before stopCh closes
}

func newAttempt(asg protocol.Assignment, workDir string) *attempt {
	return &attempt{asg: asg, paths: pathsFor(workDir, asg), stopCh: make(chan struct{}), ended: make(chan struct{})}
}

// end marks the command ended: its logs are complete.
func (at *attempt) end() { at.endOnce.Do(func() { close(at.ended) }) }

// stop asks the attempt's process group to terminate; the result is then
// reported with class "lost" and why as its error. Only the first call
// counts.
func (at *attempt) stop(why string) {
	at.stopOnce.Do(func() {
		at.stopWhy = why
		close(at.stopCh)
	})
}

// stopped reports whether stop was called, and why.
func (at *attempt) stopped() (bool, string) {
	select {
	case <-at.stopCh:
		return true, at.stopWhy
	default:
		return false, ""
	}
}

// attemptPaths are where an attempt's files live inside the work folder.
type attemptPaths struct {
	logDir, stdout, stderr, scratch string
	// stage holds the copies of the attempt's outputs, out of its reach,
	// until its result is spooled or delivered (collectOutputs).
	stage   string
	address string // <logs>/<task>/address: the task address, as text
	groups  string // procgroup.Dir of the work folder
	// pool recycles the address file and the group record, and with
	// folders, the work folder's lock, the log folders and the task's
	// scratch folder (nil: they are made and removed).
	pool    *inodePool
	folders *folderLock
}

// pathsFor returns the log and scratch locations of an assignment:
// <workDir>/logs/<task>/<attempt>/{stdout,stderr},
// <workDir>/logs/<task>/address and <workDir>/scratch/<task>/<attempt>/,
// where <task> is SanitizeTask of the address.
func pathsFor(workDir string, asg protocol.Assignment) attemptPaths {
	name := SanitizeTask(asg.Task)
	n := strconv.Itoa(asg.Attempt)
	logDir := filepath.Join(workDir, "logs", name, n)
	return attemptPaths{
		logDir:  logDir,
		stdout:  filepath.Join(logDir, "stdout"),
		stderr:  filepath.Join(logDir, "stderr"),
		address: filepath.Join(workDir, "logs", name, "address"),
		scratch: filepath.Join(workDir, "scratch", name, n),
		stage:   filepath.Join(workDir, "staging", name, n),
		groups:  procgroup.Dir(workDir),
	}
}

// SanitizeTask turns a task address into a single file-name component that
// a shell needs no quotes for: an instance index becomes a last dotted part
// (task.x[2] is task.x.2: "[" becomes "." and "]" is dropped, so it does not
// glob), "/" and NUL become "_", and "", "." and ".." become "_", "_." and
// "_..". Task names cannot contain dots, so the form stays unambiguous.
func SanitizeTask(addr string) string {
	s := strings.Map(func(r rune) rune {
		switch r {
		case '/', 0:
			return '_'
		case '[':
			return '.'
		case ']':
			return -1
		}
		return r
	}, addr)
	switch s {
	case "", ".", "..":
		s = "_" + s
	}
	return s
}

// taskEnv builds an attempt's environment: base minus the variables that
// hold credentials (protocol.IsSecretEnv), then the task's own variables (sorted, so the order is stable),
// then the WDC_* variables, which win over anything before them.
func taskEnv(base []string, asg protocol.Assignment, workerID, scratch string) []string {
	env := make([]string, 0, len(base)+len(asg.Definition.Env)+5)
	for _, kv := range base {
		if protocol.IsSecretEnv(kv) {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(asg.Definition.Env))
	for k := range asg.Definition.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+asg.Definition.Env[k])
	}
	return append(env,
		EnvTask+"="+asg.Task,
		EnvAttempt+"="+strconv.Itoa(asg.Attempt),
		EnvWorkerID+"="+workerID,
		EnvFencingToken+"="+strconv.FormatInt(asg.FencingToken, 10),
		EnvAttemptDir+"="+scratch,
	)
}

// lookupEnv returns the last value of key in env.
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds the executable for argv0 the way a shell would, but in the
// attempt's own PATH: a name with a slash is taken as is (relative to dir),
// any other name is searched in the absolute directories of path.
func lookPath(argv0, dir, path string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := isExecutable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // like os/exec, never run something found through a relative PATH entry
		}
		p := filepath.Join(d, argv0)
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in PATH", argv0)
}

// commandPaths remembers, for one agent, where lookPath found a command
// given by its bare name, so that the next attempt of the same command
// checks that one file (one stat) instead of every PATH folder before it.
// An entry is keyed by the name, the attempt's directory and its PATH,
// and is checked with isExecutable each time it is used: a file that went
// away (or is no longer an executable) drops it, and the PATH is searched
// again. So, as a shell's command hash, it does not see a program
// installed while the agent runs in a PATH folder earlier than the one it
// found, until that one goes away (docs/protocol.md, "What a task gets").
// A name with a "/" is not remembered. The zero value is ready, a nil one
// remembers nothing; it is safe for concurrent use.
type commandPaths struct {
	mu    sync.Mutex
	found map[commandKey]string
}

type commandKey struct{ argv0, dir, path string }

// maxCommandPaths bounds what a commandPaths holds: past it, it starts
// afresh (a PATH made anew for each task would otherwise grow it).
const maxCommandPaths = 256

// lookPath is lookPath(argv0, dir, path), through what c remembers.
func (c *commandPaths) lookPath(argv0, dir, path string) (string, error) {
	if c == nil || strings.Contains(argv0, "/") {
		return lookPath(argv0, dir, path)
	}
	key := commandKey{argv0, dir, path}
	c.mu.Lock()
	p, ok := c.found[key]
	c.mu.Unlock()
	if ok {
		if isExecutable(p) == nil {
			return p, nil
		}
		c.mu.Lock()
		if c.found[key] == p {
			delete(c.found, key)
		}
		c.mu.Unlock()
	}
	p, err := lookPath(argv0, dir, path)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.found == nil || len(c.found) >= maxCommandPaths {
		c.found = map[commandKey]string{}
	}
	c.found[key] = p
	c.mu.Unlock()
	return p, nil
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

// devNull is /dev/null, opened for reading once for as long as the agent
// runs and never closed: every command's stdin. Without it os/exec opens
// /dev/null for each command, through os.Open and the netpoller's system
// calls (openFile). The commands share one open file description of it,
// which changes nothing a command can see: /dev/null reads nothing,
// whatever its offset or flags. Nil when it cannot be opened.
var devNull = sync.OnceValue(func() *os.File {
	f, err := openFile(os.DevNull, os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	return f
})

// startFunc starts an attempt's command and calls started with its pid
// (the leader of its process group) before its program runs, or as soon as
// it has started where it cannot tell; release is called once it has been
// waited for.
type startFunc func(cmd *exec.Cmd, started func(pid int)) (release func(), err error)

// startPlain starts a command as it is, from plainStarter's thread. It
// calls started once the command has started: an unconfined command has a
// parent-death signal, so the agent's death in between ends it.
func startPlain(cmd *exec.Cmd, started func(pid int)) (func(), error) {
	errc := make(chan error, 1)
	plainStarter() <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		return func() {}, err
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	return func() {}, nil
}

// plainStarter is a goroutine locked to an OS thread for as long as the
// agent runs, which starts the commands of unconfined attempts: their
// parent-death signal (attemptSysProcAttr) belongs to the thread that
// forked them, and any other thread may end (agent/confine throws away
// the threads it confines on), which would kill the command with it.
var plainStarter = sync.OnceValue(func() chan<- func() {
	starts := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked, never ends
		for start := range starts {
			start()
		}
	}()
	return starts
})

// execution is how one attempt's process ended.
type execution struct {
	started, ended time.Time
	exitCode       *int
	signal         string
	timedOut       bool
	// exitedFirst: the command had exited on its own when the attempt was
	// stopped, so how it ended is its own outcome, not the stop's.
	exitedFirst bool
	ran         bool   // the process started: its log files exist
	class, err  string // failure class and error; both "" on success
}

// runAttempt runs an assignment's command to completion and reports how it
// ended. The command is a direct child of the agent in its own process
// group, with stdin /dev/null and stdout/stderr through pipes into files
// under paths.logDir, made at their first bytes (attemptLogs).
// It returns when the process has exited; the whole process group is
// signalled on timeout or stop, and swept with SIGKILL when the command
// ends, so nothing it started outlives the attempt (except processes that
// made their own session or group).
//
// Its steps: refuse a spec that cannot run here (runnable), prepare the
// attempt's folders and inputs (prepare), find the command and open its
// logs, start it, watch its process group until it ends (watchGroup), and
// classify how it ended (outcome).
func runAttempt(at *attempt, paths attemptPaths, env []string, killGrace time.Duration, fetch fetchFunc, start startFunc, commands *commandPaths) execution {
	asg := at.asg
	ex := execution{started: time.Now().UTC()}
	finish := func(class, msg string) execution {
		ex.class, ex.err = class, msg
		if ex.ended.IsZero() {
			ex.ended = time.Now().UTC()
		}
		return ex
	}

	workDir, refusal := runnable(asg, paths.scratch)
	if refusal != "" {
		return finish(ClassRefused, "refused: "+refusal)
	}
	if class, msg := prepare(asg, paths, fetch); class != "" {
		return finish(class, msg)
	}
	path, err := commands.lookPath(asg.Definition.Command[0], workDir, lookupEnv(env, "PATH"))
	if err != nil {
		return finish(ClassRefused, fmt.Sprintf("refused: command: %v", err))
	}
	if stopped, why := at.stopped(); stopped {
		return finish(ClassLost, why)
	}
	logs, err := pipeLogs(paths, asg.Task)
	if err != nil {
		return finish(ClassLost, err.Error())
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: asg.Definition.Command,
		Dir:  workDir,
		Env:  env,
		// The pipes' write ends, *os.File: os/exec starts no copying
		// goroutine, so Wait cannot hang on what the command left
		// holding them; the agent's copiers stop at logs.drain.
		Stdout: logs.Stdout,
		Stderr: logs.Stderr,
		// Its own process group; on Linux also a parent-death signal
		// (sysproc_linux.go, sysproc_other.go).
		SysProcAttr: attemptSysProcAttr(),
	}
	if null := devNull(); null != nil {
		cmd.Stdin = null
	} // else os/exec opens /dev/null itself
	ex.started = time.Now().UTC()
	unrecord := func() {}
	release, err := start(cmd, func(pid int) {
		unrecord = procgroup.RecordWith(paths.groups, pid, paths.pool.emptyFile, paths.pool.putFile)
	})
	logs.started()
	defer func() { unrecord() }() // after watchGroup ended the group
	if err != nil {
		logs.drain(0)
		var pe *fs.PathError
		if errors.As(err, &pe) || errors.Is(err, exec.ErrNotFound) {
			return finish(ClassRefused, fmt.Sprintf("refused: starting the command: %v", err))
		}
		return finish(ClassLost, fmt.Sprintf("starting the command: %v", err))
	}
	defer release()
	ex.ran = true
	ex.timedOut, ex.exitedFirst = watchGroup(at, cmd, killGrace)
	ex.ended = time.Now().UTC()
	ex.exitCode, ex.signal = exitOf(cmd.ProcessState)
	if err := logs.drain(logDrainGrace); err != nil {
		return finish(ClassLost, err.Error()) // its output is incomplete: the worker's problem
	}
	return finish(outcome(at, ex))
}

// runnable checks that an assignment can run on this worker, and returns
// the directory its command runs in (the task's dir, else its scratch
// folder), or why it cannot run: the definition does not match its hash,
// holds what no process can be started with (execTextProblem),
// there is no command, or the directory is not one.
func runnable(asg protocol.Assignment, scratch string) (workDir, refusal string) {
	if msg := checkDefinition(asg); msg != "" {
		return "", msg
	}
	if msg := execTextProblem(asg.Definition); msg != "" {
		return "", msg
	}
	if len(asg.Definition.Command) == 0 || asg.Definition.Command[0] == "" {
		return "", "the task has no command"
	}
	workDir = asg.WorkDir
	if workDir == "" {
		return scratch, "" // it runs in its attempt's own directory
	}
	if fi, err := os.Stat(workDir); err != nil {
		return "", fmt.Sprintf("working directory: %v", err)
	} else if !fi.IsDir() {
		return "", fmt.Sprintf("working directory %s is not a directory", workDir)
	}
	return workDir, ""
}

// prepare makes a fresh scratch folder, checks that every input block has
// a file, and fetches the inputs into the scratch folder (the log folder is
// made with the logs, by openLogs). It returns the failure class and error
// of what went wrong, or "" and "". Local I/O problems are the worker's,
// not the task's: "lost" lets the coordinator retry the attempt elsewhere.
func prepare(asg protocol.Assignment, paths attemptPaths, fetch fetchFunc) (class, msg string) {
	// Logs and scratch folders are the user's alone, as everything in the
	// work folder (docs/configuration.md, "File modes").
	if clearing, err := makeScratchFolder(paths); clearing {
		return ClassLost, fmt.Sprintf("clearing the scratch folder: %v", err)
	} else if err != nil {
		return ClassLost, fmt.Sprintf("creating the scratch folder: %v", err)
	}
	for _, m := range asg.Definition.Mounts {
		if !slices.ContainsFunc(asg.Inputs, func(in protocol.InputFile) bool { return strings.HasPrefix(in.Path, m.Name+"/") }) {
			return ClassRefused, fmt.Sprintf("refused: input block %q: %s has no accepted output matching %q", m.Name, m.From, m.Output)
		}
	}
	if len(asg.Inputs) > 0 {
		return fetch(paths.scratch, asg.Inputs)
	}
	return "", ""
}

// watchGroup waits for a started command to exit, its process group
// recorded in the work folder by runAttempt while it runs (from before the
// command's program runs, for a confined one): if this agent dies (SIGKILL, OOM),
// Pdeathsig (Linux) ends only the command itself, and whoever supervises
// the agent kills the group with procgroup.KillOrphans. On the attempt's
// timeout or stop it ends the group (procgroup.Terminate: SIGTERM, then
// SIGKILL after killGrace); when the command has exited it sweeps what is
// left of the group with SIGKILL (background children of a command that
// exited, or children that ignored SIGTERM). It reports whether the
// attempt timed out, and whether the command had already exited when the
// attempt was stopped (an agent resumed after SIGSTOP can learn of its
// command's exit and of a cancelled lease at once; the exit came first).
func watchGroup(at *attempt, cmd *exec.Cmd, killGrace time.Duration) (timedOut, exitedFirst bool) {
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(done)
	}()

	var timeout <-chan time.Time
	if at.asg.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(at.asg.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
		// It exited on its own (nothing here ended it), though a stop may
		// have come at once: select picks either when both are ready.
		exitedFirst = isClosed(at.stopCh)
	case <-timeout:
		timedOut = true
		procgroup.Terminate(pgid, done, killGrace)
	case <-at.stopCh:
		if isClosed(done) || exited(pgid) {
			exitedFirst = true
			break
		}
		procgroup.Terminate(pgid, done, killGrace)
	}
	<-done
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return timedOut, exitedFirst
}

// exitOf reads how a process ended: its exit code, or the name of the
// signal that killed it ("SIGKILL", or "signal 42" for one without a name).
func exitOf(st *os.ProcessState) (exitCode *int, signal string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal = unix.SignalName(ws.Signal())
		if signal == "" {
			signal = "signal " + strconv.Itoa(int(ws.Signal()))
		}
		return nil, signal
	}
	code := st.ExitCode()
	return &code, ""
}

// outcome classifies an attempt whose command ran: lost when the agent
// stopped it before it exited, a failure when it timed out, was killed by
// a signal or exited non-zero, a success ("", "") otherwise.
func outcome(at *attempt, ex execution) (class, msg string) {
	if stopped, why := at.stopped(); stopped && !ex.exitedFirst {
		return ClassLost, why
	}
	if ex.timedOut {
		return ClassFailure, "timed out after " + (time.Duration(at.asg.TimeoutMS) * time.Millisecond).String()
	}
	switch {
	case ex.signal != "":
		return ClassFailure, "killed by " + ex.signal // "killed by SIGKILL", or "killed by signal 42"
	case *ex.exitCode != 0:
		return ClassFailure, "exit status " + strconv.Itoa(*ex.exitCode)
	}
	return "", ""
}

// stopSignalWait is how long an agent whose command was killed by a stop
// signal it did not send waits to learn whether it is being stopped too.
const stopSignalWait = 500 * time.Millisecond

// stopSignal reports whether ex is a failure by a signal that stops
// processes (SIGTERM, SIGINT, SIGHUP, SIGKILL) that the agent did not
// send: not a timeout, not a stop of the attempt.
func stopSignal(ex execution) bool {
	if ex.class != ClassFailure || ex.timedOut {
		return false
	}
	switch ex.signal {
	case "SIGTERM", "SIGINT", "SIGHUP", "SIGKILL":
		return true
	}
	return false
}

// classifyStopSignal makes a command killed by a stop signal while its
// worker was being stopped (workerStopping) a lost attempt, not a failed
// one: the signal came with the worker's end (its launch target stopped
// every process of the worker), not from the task, so the attempt is
// retried without spending the task's failure budget. Anything else is
// returned as it is.
func classifyStopSignal(ex execution, workerStopping bool) execution {
	if !workerStopping || !stopSignal(ex) {
		return ex
	}
	ex.class = ClassLost
	ex.err = "killed by " + ex.signal + " as its worker was being stopped (the launch target signalled every process of the worker)"
	return ex
}

// isClosed reports whether ch is closed (a nil ch is not).
func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
