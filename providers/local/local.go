package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/wdc-dev/wdc/providers"
)

// Name is the local provider's name.
const Name = "local"

// Info is what the local provider registers with: it renders a launch
// (RenderLaunch), has no target to dry-run one against, and writes to no
// cluster.
var Info = providers.Info{
	Name:         Name,
	Source:       providers.SourceBuiltIn,
	Summary:      "worker processes on this machine, each in its own process group",
	Capabilities: providers.Capabilities{Render: true},
	Schema:       &Schema,
}

func init() {
	providers.Register(Info, func() providers.Provider { return New() })
}

var (
	_ providers.Provider       = (*Provider)(nil)
	_ providers.LeftoverFinder = (*Provider)(nil)
	_ providers.Renderer       = (*Provider)(nil)
)

// Provider runs workers as processes on this machine. It reaps the workers
// it launched, so Status knows their exit codes; workers launched by
// another instance (another apply) are found by pid. The zero value is not
// usable: call New.
type Provider struct {
	// Environ is the environment workers inherit (minus credentials and
	// wdc's own settings, plus the request's Env and the launch
	// credential); nil means os.Environ().
	Environ []string

	mu    sync.Mutex
	procs map[int]*proc
}

// proc is a worker this instance launched.
type proc struct {
	done  chan struct{} // closed once the process is reaped
	state *os.ProcessState
}

// New returns a local provider.
func New() *Provider {
	return &Provider{procs: map[int]*proc{}}
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// Launch starts `<Executable> agent …` (providers.Render) as a child in its
// own process group, with stdin /dev/null and stdout and stderr appended to
// req.LogPath (its folder is created), the env of the pool's local block
// (req.Settings, *Settings) and req.Env added to its environment, and the
// launch credential only in the environment. A goroutine reaps it. The returned ID is "pid:<pid>";
// Host is this host and ProcessStart the kernel's start time of the pid
// (see processStart), which Reclaim checks.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) (providers.LaunchResponse, error) {
	if err := ctx.Err(); err != nil {
		return providers.LaunchResponse{}, err
	}
	req = withBlockEnv(req)
	if err := checkRequest(req); err != nil {
		return providers.LaunchResponse{}, err
	}
	if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o700); err != nil {
		return providers.LaunchResponse{}, fmt.Errorf("local: creating the log folder: %w", err)
	}
	logf, err := os.OpenFile(req.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return providers.LaunchResponse{}, fmt.Errorf("local: opening the worker log: %w", err)
	}
	if err := writeLogHeader(logf, req); err != nil {
		logf.Close()
		return providers.LaunchResponse{}, err
	}
	argv := providers.Render(req)
	cmd := &exec.Cmd{
		Path: req.Executable,
		Args: argv,
		Env:  p.environ(req),
		// Stdin nil is /dev/null; *os.File outputs mean the worker never
		// holds the caller's terminal or pipes, and no copying goroutine.
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return providers.LaunchResponse{}, fmt.Errorf("local: starting %s: %w", req.Executable, err)
	}
	logf.Close() // the child has its own copy
	pid := cmd.Process.Pid
	pr := &proc{done: make(chan struct{})}
	p.mu.Lock()
	if p.procs == nil {
		p.procs = map[int]*proc{}
	}
	p.procs[pid] = pr
	p.mu.Unlock()
	// Read the start time before anything can reap the child: until Wait,
	// the pid cannot be reused.
	start, _ := processStart(pid)
	go func() {
		_ = cmd.Wait() // the state is in cmd.ProcessState
		pr.state = cmd.ProcessState
		close(pr.done)
	}()
	host, _ := os.Hostname()
	return providers.LaunchResponse{ID: "pid:" + strconv.Itoa(pid), PID: pid, Argv: argv, Host: host, ProcessStart: start}, nil
}

// checkRequest says what a launch request lacks, or returns nil.
func checkRequest(req providers.LaunchRequest) error {
	switch {
	case req.Executable == "":
		return errors.New("local: no executable to launch")
	case req.LogPath == "":
		return errors.New("local: no log path for the worker")
	case req.Credential == "":
		return errors.New("local: no launch credential for the worker")
	}
	return nil
}

// RenderLaunch returns what Launch would start for req, starting nothing
// and writing nothing: the agent's command line (providers.Render) and
// the names of the environment variables it sets on top of the inherited
// environment, the local block's, req.Env's and the launch credential's
// (values left out).
// It refuses a request Launch would refuse for what it lacks.
func (p *Provider) RenderLaunch(ctx context.Context, req providers.LaunchRequest) (providers.RenderResponse, error) {
	if err := ctx.Err(); err != nil {
		return providers.RenderResponse{}, err
	}
	req = withBlockEnv(req)
	if err := checkRequest(req); err != nil {
		return providers.RenderResponse{}, err
	}
	env := make([]string, 0, len(req.Env)+1)
	for k := range req.Env {
		if k != protocol.LaunchCredentialEnv {
			env = append(env, k)
		}
	}
	env = append(env, protocol.LaunchCredentialEnv)
	sort.Strings(env)
	return providers.RenderResponse{Argv: providers.Render(req), Env: env}, nil
}

// writeLogHeader writes the worker log's first line, saying which launch
// it is, and syncs it: a log that cannot be written (a full disk) fails the
// launch at once, naming the log and the cause, instead of starting a
// worker that cannot say why it never registers. The error wraps the file
// system's (errors.Is(err, syscall.ENOSPC) for a full disk).
func writeLogHeader(f *os.File, req providers.LaunchRequest) error {
	line := fmt.Sprintf("wdc: launch %d of pool %s (apply %s) at %s\n", req.Seq, req.Pool, req.ApplyID, time.Now().UTC().Format(time.RFC3339Nano))
	_, err := f.WriteString(line)
	if err == nil {
		// Allocation can be deferred to the sync; a device or file system
		// that cannot sync (EINVAL) is not a failure to write.
		if serr := f.Sync(); serr != nil && !errors.Is(serr, syscall.EINVAL) && !errors.Is(serr, syscall.ENOTSUP) {
			err = serr
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("local: cannot write the worker log %s: the disk is full (%w): free space on the file system that holds %s; another launch would fail the same way",
			req.LogPath, err, filepath.Dir(req.LogPath))
	}
	return fmt.Errorf("local: cannot write the worker log %s: %w", req.LogPath, err)
}

// environ builds a worker's environment: the base minus credentials
// (protocol.IsSecretEnv) and wdc's own WDC_VAR_*, WDC_STATE, WDC_LISTEN and
// WDC_ADVERTISE, the request's Env (sorted), then the launch credential.
func (p *Provider) environ(req providers.LaunchRequest) []string {
	base := p.Environ
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(req.Env)+1)
	for _, kv := range base {
		// Not a credential (the launch's own is added last), and not
		// wdc's own inputs: WDC_VAR_* may hold sensitive variable values,
		// and WDC_STATE, WDC_LISTEN, WDC_ADVERTISE concern apply, not the
		// tasks.
		if protocol.IsSecretEnv(kv) || strings.HasPrefix(kv, "WDC_VAR_") ||
			strings.HasPrefix(kv, "WDC_STATE=") || strings.HasPrefix(kv, "WDC_LISTEN=") || strings.HasPrefix(kv, "WDC_ADVERTISE=") {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+req.Env[k])
	}
	return append(env, protocol.LaunchCredentialEnv+"="+req.Credential)
}

// parseID turns "pid:1234" into 1234.
func parseID(id string) (int, error) {
	s, ok := strings.CutPrefix(id, "pid:")
	pid, err := strconv.Atoi(s)
	if !ok || err != nil || pid <= 0 {
		return 0, fmt.Errorf("local: invalid worker id %q, want pid:<number>", id)
	}
	return pid, nil
}

func (p *Provider) lookup(pid int) *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs[pid]
}

// Stop sends SIGTERM to the worker (it drains), or with Kill SIGKILL to
// its process group and waits until it is gone or ctx is done. A worker
// that already exited is not an error.
func (p *Provider) Stop(ctx context.Context, req providers.StopRequest) error {
	pid, err := parseID(req.ID)
	if err != nil {
		return err
	}
	pr := p.lookup(pid)
	if pr != nil {
		select {
		case <-pr.done:
			return nil
		default:
		}
	}
	if !req.Kill {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("local: stopping worker %d: %w", pid, err)
		}
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("local: killing worker %d: %w", pid, err)
	}
	if pr == nil {
		return nil // not our child: its parent reaps it
	}
	select {
	case <-pr.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("local: waiting for worker %d to exit: %w", pid, ctx.Err())
	}
}

// Status reports whether the worker runs. For a worker this instance
// launched it is exact and gives the exit code or signal; for another
// process it checks that the pid exists and is not a zombie, which a
// reused pid can fool.
func (p *Provider) Status(ctx context.Context, req providers.StatusRequest) (providers.StatusResponse, error) {
	pid, err := parseID(req.ID)
	if err != nil {
		return providers.StatusResponse{}, err
	}
	if pr := p.lookup(pid); pr != nil {
		select {
		case <-pr.done:
		default:
			return providers.StatusResponse{Running: true}, nil
		}
		var resp providers.StatusResponse
		if ws, ok := pr.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			resp.Signal = unix.SignalName(ws.Signal())
		} else {
			code := pr.state.ExitCode()
			resp.ExitCode = &code
		}
		return resp, nil
	}
	return providers.StatusResponse{Running: alive(pid)}, nil
}

// Wait blocks until the worker has ended: for a worker this instance
// launched, until it is reaped (giving its exit code or signal); for
// another process, until its pid is gone (polled every 100 ms).
func (p *Provider) Wait(ctx context.Context, req providers.WaitRequest) (providers.WaitResponse, error) {
	pid, err := parseID(req.ID)
	if err != nil {
		return providers.WaitResponse{}, err
	}
	if pr := p.lookup(pid); pr != nil {
		select {
		case <-pr.done:
		case <-ctx.Done():
			return providers.WaitResponse{}, ctx.Err()
		}
		st, err := p.Status(ctx, providers.StatusRequest{ID: req.ID})
		if err != nil {
			return providers.WaitResponse{}, err
		}
		resp := providers.WaitResponse{ExitCode: st.ExitCode, Signal: st.Signal, Reason: "exited"}
		switch {
		case st.ExitCode != nil:
			resp.Reason = fmt.Sprintf("exited with status %d", *st.ExitCode)
		case st.Signal != "":
			resp.Reason = "was killed by " + st.Signal
		}
		return resp, nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return providers.WaitResponse{}, ctx.Err()
		}
	}
	return providers.WaitResponse{Reason: "exited"}, nil
}

// Cleanup kills (SIGKILL) the process groups of attempts that the worker
// req.ID left running when it exited (for example when it was killed): its
// commands are in their own process groups, and a dying agent takes only
// its direct children with it.
func (p *Provider) Cleanup(_ context.Context, req providers.CleanupRequest) error {
	pid, err := parseID(req.ID)
	if err != nil {
		return err
	}
	procgroup.KillOrphans(req.WorkDir, pid)
	return nil
}

// Reclaim stops what a dead apply's local workers left running on this
// host: each launch recorded on this host, with req.WorkDir as its work
// folder, whose pid still runs the process it launched (the same start
// time and command line) is killed with SIGKILL; then the process groups of
// attempts whose agent is dead are killed. A pid whose start time or
// command line differs belongs to some other process now and is left
// alone; so is anything a worker merely reported about itself. It returns
// what it stopped. Apply calls it when it takes over the lock of a dead or
// stalled apply, before those tasks run again.
func (p *Provider) Reclaim(_ context.Context, req providers.ReclaimRequest) (providers.ReclaimResponse, error) {
	var resp providers.ReclaimResponse
	running, gone := runningLaunches(req)
	resp.Gone = gone
	for _, l := range running {
		if syscall.Kill(l.PID, syscall.SIGKILL) != nil {
			resp.Gone = append(resp.Gone, l)
			continue
		}
		waitGone(l.PID, 2*time.Second)
		resp.Stopped = append(resp.Stopped, l)
	}
	resp.OrphanAttempts = procgroup.KillOrphans(req.WorkDir, 0)
	return resp, nil
}

// FindLeftovers lists what Reclaim would stop for req, stopping nothing:
// the launches whose worker process still runs, and the attempt process
// groups whose agent is dead that still have a member.
func (p *Provider) FindLeftovers(_ context.Context, req providers.ReclaimRequest) (providers.LeftoversResponse, error) {
	var resp providers.LeftoversResponse
	running, _ := runningLaunches(req)
	for i := range running {
		l := running[i]
		resp.Leftovers = append(resp.Leftovers, providers.Leftover{
			Launch: &l,
			What:   fmt.Sprintf("worker process %d (launch %d of pool %s, apply %s)", l.PID, l.Seq, l.Pool, l.ApplyID),
			Stop:   fmt.Sprintf("kill -KILL %d", l.PID),
		})
	}
	for _, g := range procgroup.Orphans(req.WorkDir, 0) {
		if !g.Running {
			continue
		}
		resp.Leftovers = append(resp.Leftovers, providers.Leftover{
			What: fmt.Sprintf("process group %d of an attempt whose agent (pid %d) is gone", g.PGID, g.AgentPID),
			Stop: fmt.Sprintf("kill -KILL -- -%d", g.PGID),
		})
	}
	return resp, nil
}

// runningLaunches splits req.Launches into those whose worker process
// still runs on this host with req.WorkDir as its work folder (sameProcess)
// and the others.
func runningLaunches(req providers.ReclaimRequest) (running, gone []providers.LaunchRecord) {
	host, _ := os.Hostname()
	for _, l := range req.Launches {
		if l.Host != host || filepath.Clean(l.WorkDir) != filepath.Clean(req.WorkDir) || !sameProcess(l) {
			gone = append(gone, l)
			continue
		}
		running = append(running, l)
	}
	return running, gone
}

// sameProcess reports whether l's pid still runs what was launched: its
// start time and command line are the recorded ones.
func sameProcess(l providers.LaunchRecord) bool {
	if l.PID <= 1 || l.PID == os.Getpid() || l.ProcessStart == "" {
		return false
	}
	start, err := processStart(l.PID)
	if err != nil || start != l.ProcessStart {
		return false
	}
	argv, err := processArgv(l.PID)
	return err == nil && slices.Equal(argv, l.Argv)
}

// waitGone polls until pid no longer exists or the timeout passes.
func waitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
