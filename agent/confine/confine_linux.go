//go:build linux

package confine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ErrUnavailable: this platform or process cannot confine attempts
// (wrapped with Probe's Missing), or cannot confine this one (wrapped with
// why: see Start).
var ErrUnavailable = errors.New("attempts cannot be confined here")

// minABI is the Landlock ABI that scopes signals and abstract UNIX sockets.
const minABI = 6

// mechanism is how the work folder is hidden from an attempt.
type mechanism int

const (
	// byMount: a mount namespace of the attempt's own covers the folders
	// (needs CAP_SYS_ADMIN); everything else stays as it is.
	byMount mechanism = iota + 1
	// byLandlock: Landlock file-system rules grant everything but the
	// folders (unprivileged), at the cost of the folders above them.
	byLandlock
)

// dropped are the capabilities a confined command loses from its bounding
// set: those that would let it undo its mounts, trace or read other
// processes (environ, auxv and maps stay readable with CAP_SYS_ADMIN or
// CAP_PERFMON inside a Landlock domain), open files by handle past a cover
// (CAP_DAC_READ_SEARCH), or reach the kernel directly.
var dropped = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_PERFMON, unix.CAP_BPF,
	unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_SYSLOG,
	unix.CAP_CHECKPOINT_RESTORE, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
	// open_by_handle_at opens a file by its inode number, past any cover
	unix.CAP_DAC_READ_SEARCH,
	// a raw socket on the loopback reads the bearer tokens of every call
	// to the coordinator; an interface could be reconfigured
	unix.CAP_NET_RAW, unix.CAP_NET_ADMIN,
}

var probed struct {
	once sync.Once
	st   Status
	mech mechanism
}

func probe() Status {
	probed.once.Do(func() { probed.st, probed.mech = probeNow() })
	return probed.st
}

func probeNow() (Status, mechanism) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return Status{Missing: fmt.Sprintf("this kernel has no Landlock (%v): attempts are not confined, so a task can signal and trace its agent, read its environment and the work folder (the state, the worker's session, the operator credential)", err)}, 0
	}
	if abi < minABI {
		return Status{Missing: fmt.Sprintf("this kernel's Landlock ABI is %d and confinement needs %d (signal scoping, Linux 6.12+): attempts are not confined, so a task can signal its agent and read the work folder", abi, minABI)}, 0
	}
	mountErr := tryMountNamespace()
	if mountErr == nil {
		return Status{Confined: true, Mechanism: fmt.Sprintf("mount namespace, dropped capabilities, Landlock ABI %d", abi)}, byMount
	}
	fd, err := newRuleset()
	if err != nil {
		return Status{Missing: fmt.Sprintf("this process can neither make a mount namespace (%v) nor a Landlock file-system ruleset (%v): attempts are not confined, so a task can read the work folder (the state, the worker's session, the operator credential)", mountErr, err)}, 0
	}
	unix.Close(fd)
	return Status{
		Confined:  true,
		Mechanism: fmt.Sprintf("Landlock ABI %d file-system rules, dropped capabilities", abi),
		Limits: fmt.Sprintf("without a mount namespace (%v), a confined attempt cannot create, remove or rename entries directly in the folders that hold the work folder (such as /), "+
			"and a task whose dir holds the work folder runs unconfined", mountErr),
	}, byLandlock
}

// tryMountNamespace checks, on a thread that is thrown away after, that
// this process can do what byMount does: a mount namespace of its own with
// private mounts and a tmpfs over a folder.
func tryMountNamespace() error {
	dir, err := os.MkdirTemp("", "wdc-confine-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir) // outside the namespace, where nothing covers it
	return onThread(func() error {
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("private mounts: %w", err)
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
			return fmt.Errorf("a tmpfs: %w", err)
		}
		return nil
	})
}

// onThread runs fn on an OS thread of its own that is thrown away after
// (fn may change the thread for good), and waits for it.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	onOwnThread(func() { errc <- fn() })
	return <-errc
}

// onOwnThread runs fn in a new goroutine locked to an OS thread that is
// not the process's main thread, and throws the thread away when fn
// returns. The main thread must never be changed: it stands for the
// whole process (kill(2) of the agent's pid is checked against it, and
// /proc/PID shows it), and the runtime keeps it when a goroutine exits
// locked to it. A goroutine that finds itself there holds the main thread
// (so no goroutine can be scheduled onto it) while another one runs fn.
func onOwnThread(fn func()) { go lockHere(fn) }

// lockHere locks the calling goroutine to its OS thread and runs fn there,
// leaving the thread locked (thrown away when the goroutine ends), unless
// that is the main thread: then it holds it while fn runs on another.
func lockHere(fn func()) {
	runtime.LockOSThread() // never unlocked but on the main thread
	if unix.Gettid() != unix.Getpid() {
		fn()
		return
	}
	done := make(chan struct{})
	onOwnThread(func() { defer close(done); fn() })
	<-done
	runtime.UnlockOSThread()
}

func start(cmd *exec.Cmd, p Policy) (func(), error) {
	if st := probe(); !st.Confined {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, st.Missing)
	}
	return startWith(cmd, p, probed.mech)
}

// startWith starts cmd confined by p, hiding its folders by mech.
func startWith(cmd *exec.Cmd, p Policy, mech mechanism) (func(), error) {
	p, err := resolve(p)
	if err != nil {
		return nil, err
	}
	var rulesetFD int
	if mech == byLandlock {
		if err := holdsHidden(cmd.Dir, p); err != nil {
			return nil, err
		}
		rulesetFD, err = fileSystemRuleset(p)
	} else {
		rulesetFD, err = scopesRuleset()
	}
	if err != nil {
		return nil, fmt.Errorf("confining the attempt: a Landlock ruleset: %w", err)
	}
	// The thread that confines itself and forks the command is in the
	// command's Landlock domain, so the command could signal it (tgkill of
	// the agent's pid and that thread's id), which stops or kills the whole
	// agent. So the thread must be gone before the command runs a single
	// instruction of its own: the command is started traced (it stops at
	// its exec, before its program runs); the thread detaches it with a
	// SIGSTOP in place of the exec's SIGTRAP, so it stays stopped, and
	// ends. Only when the thread is gone from the process (an ending thread
	// still takes signals until the kernel releases it, after its trace has
	// ended) does another thread send the command SIGCONT. A parent-death
	// signal would fire at that thread's end: the command has none (the
	// agent's provider ends what a dead agent left).
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Ptrace, attr.Pdeathsig = true, 0
	cmd.SysProcAttr = &attr
	type started struct {
		tid int
		err error
	}
	ready := make(chan started, 1)
	proceed := make(chan struct{})
	detached := make(chan error, 1)
	linger := lingerAfterDetach
	onOwnThread(func() {
		err := enter(p, mech, rulesetFD)
		unix.Close(rulesetFD)
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			err = consumeExecStop(cmd.Process.Pid)
		}
		ready <- started{unix.Gettid(), err}
		if err != nil {
			return
		}
		<-proceed // the command stays stopped until Started returns
		detached <- detachStopped(cmd.Process.Pid)
		time.Sleep(linger)
		// returning ends the thread
	})
	st := <-ready
	if st.err != nil {
		return nil, st.err
	}
	// The thread is alive (it waits for proceed): a pidfd of it names it,
	// and nothing else, until it is released.
	thread := openThread(st.tid)
	if thread >= 0 {
		defer unix.Close(thread)
	}
	if p.Started != nil {
		p.Started(cmd.Process.Pid)
	}
	close(proceed)
	err = <-detached
	if err == nil {
		err = waitThreadGone(st.tid, thread)
	}
	if err == nil {
		err = continueStopped(cmd.Process.Pid)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("confining the attempt: %w", err)
	}
	return func() {}, nil
}

// consumeExecStop waits for the stop of traced process pid at its exec
// and takes it: the SIGTRAP of that stop is then not delivered when the
// trace ends (it would kill the command).
func consumeExecStop(pid int) error {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("confining the attempt: waiting for the command's start: %w", err)
		case !ws.Stopped():
			return fmt.Errorf("confining the attempt: the command ended before it started (%v)", ws)
		}
		return nil
	}
}

// detachStopped ends the trace of process pid, stopped at its exec, and
// has it take SIGSTOP instead of the exec's SIGTRAP: it goes on stopped,
// no longer traced, until SIGCONT. Only the tracing thread may call it.
func detachStopped(pid int) error {
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(unix.SIGSTOP), 0, 0)
	if errno != 0 {
		return fmt.Errorf("ending the trace of the command: %w", errno)
	}
	return nil
}

// lingerAfterDetach keeps the confining thread alive that long after it
// detached the command (tests: the command must stay stopped until the
// thread is gone, however long it takes to end).
var lingerAfterDetach time.Duration

// startedWithin bounds how long the agent waits for the confining thread
// to be gone and for the command to stop.
const startedWithin = 10 * time.Second

// openThread opens a pidfd of thread tid of this process
// (pidfd_open(2) with PIDFD_THREAD, Linux 6.9), or returns -1 where the
// kernel has none (waitThreadGone then polls /proc).
func openThread(tid int) int {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err != nil {
		return -1
	}
	return fd
}

// waitThreadGone waits until thread tid of this process is gone: released
// by the kernel, so no signal reaches it any more. With thread, a pidfd of
// it (openThread), it sleeps in poll(2) until the thread has exited (the
// kernel wakes a thread's pidfd in its exit, just before it releases it),
// then asks until the pidfd names no task (a signal 0 through it fails with
// ESRCH exactly when tgkill of that thread would). Without one it polls
// /proc/self/task.
func waitThreadGone(tid, thread int) error {
	if thread < 0 {
		return poll(func() (bool, error) {
			_, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid))
			return errors.Is(err, fs.ErrNotExist), nil
		}, "the thread that confined the command was still there")
	}
	fds := []unix.PollFd{{Fd: int32(thread), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(startedWithin/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the thread that confined the command: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("the thread that confined the command was still there after %s", startedWithin)
		}
		break
	}
	return poll(func() (bool, error) {
		err := unix.PidfdSendSignal(thread, 0, nil, 0)
		switch err {
		case unix.ESRCH:
			return true, nil
		case nil:
			return false, nil
		}
		return false, fmt.Errorf("asking whether the thread that confined the command is gone: %w", err)
	}, "the thread that confined the command was still there")
}

// continueStopped waits until process pid, detached with SIGSTOP, is
// stopped, and sends it SIGCONT; a process already gone is left as it is
// (its Wait reports how it ended), and so is one another process
// continued. A SIGCONT sent before the stop is taken would leave it
// stopped for good. It sleeps in waitid(2) (WNOWAIT: the stop and the exit
// stay for cmd.Wait, which asks for exits only), where the process is this
// one's child.
func continueStopped(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WCONTINUED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			return continueStoppedByProc(pid) // not a child of this process
		}
		if err != nil {
			return fmt.Errorf("waiting for the command to stop: %w", err)
		}
		break
	}
	if info.Code != cldStopped {
		return nil // ended, or continued by someone else
	}
	if err := unix.Kill(pid, unix.SIGCONT); err != nil && err != unix.ESRCH {
		return fmt.Errorf("continuing the command: %w", err)
	}
	return nil
}

// cldStopped is si_code CLD_STOPPED of a SIGCHLD (asm-generic/siginfo.h).
const cldStopped = 5

// continueStoppedByProc is continueStopped for a process that is not this
// one's child: it polls /proc/<pid>/stat until the process is stopped.
func continueStoppedByProc(pid int) error {
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	return poll(func() (bool, error) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return true, nil // gone
		}
		// pid (comm) state ...; comm may hold anything but ends at the last ')'
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, nil
		}
		switch b[i+2] {
		case 'T':
			if err := unix.Kill(pid, unix.SIGCONT); err != nil && err != unix.ESRCH {
				return false, fmt.Errorf("continuing the command: %w", err)
			}
			return true, nil
		case 'Z', 'X':
			return true, nil
		}
		return false, nil
	}, "the command had not stopped")
}

// poll calls done with a growing delay until it reports true or an error,
// or startedWithin has passed (an error saying what).
func poll(done func() (bool, error), what string) error {
	deadline := time.Now().Add(startedWithin)
	for delay := 10 * time.Microsecond; ; delay = min(2*delay, 5*time.Millisecond) {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %s", what, startedWithin)
		}
		time.Sleep(delay)
	}
}

// resolve makes p's folders absolute, clean and free of symbolic links:
// both a mount and a Landlock rule act on the folder itself, not on a name.
func resolve(p Policy) (Policy, error) {
	var out Policy
	for _, list := range []struct {
		in       []string
		out      *[]string
		optional bool
	}{{p.Hide, &out.Hide, false}, {p.Show, &out.Show, false}, {p.ReadOnly, &out.ReadOnly, true}, {p.HideFiles, &out.HideFiles, true}} {
		for _, d := range list.in {
			r, err := filepath.EvalSymlinks(d)
			if list.optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return Policy{}, fmt.Errorf("confining the attempt: %w", err)
			}
			if r, err = filepath.Abs(r); err != nil {
				return Policy{}, fmt.Errorf("confining the attempt: %w", err)
			}
			*list.out = append(*list.out, r)
		}
	}
	out.Started = p.Started
	return out, nil
}

// enter changes the calling thread, which must be locked and is never
// used again: what it forks is confined by p.
func enter(p Policy, mech mechanism, rulesetFD int) error {
	if mech == byMount {
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("confining the attempt: a mount namespace: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("confining the attempt: private mounts: %w", err)
		}
		if err := hide(p); err != nil {
			return err
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("confining the attempt: no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(rulesetFD, 0); err != nil {
		return fmt.Errorf("confining the attempt: Landlock: %w", err)
	}
	return nil
}

// dropCapabilities drops every capability of dropped that the bounding set
// still holds (a container's set may hold none of them: a process without
// CAP_SETPCAP could not drop them, and needs not), and empties the
// inheritable and ambient sets, so a command run as root gets none of them
// back.
func dropCapabilities() error {
	if unix.Geteuid() != 0 && !holdsAnyCapability() {
		// An ordinary user without CAP_SETPCAP cannot drop them, and needs
		// not: its command gets none of the bounding set (no_new_privs
		// stops setuid and file capabilities).
		return clearInheritable()
	}
	for _, c := range dropped {
		held, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, c, 0, 0, 0)
		if err != nil || held == 0 {
			continue // unknown to this kernel, or already out of the set
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			return fmt.Errorf("confining the attempt: dropping capability %d: %w", c, err)
		}
	}
	return clearInheritable()
}

// holdsAnyCapability reports whether the calling thread has a permitted
// capability.
func holdsAnyCapability() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return true // say so, and let the drops fail with their reason
	}
	return data[0].Permitted != 0 || data[1].Permitted != 0
}

// clearInheritable empties the thread's inheritable and ambient
// capabilities, so a command run as root gets back none of those dropped
// from the bounding set.
func clearInheritable() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("confining the attempt: ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("confining the attempt: capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("confining the attempt: capset: %w", err)
	}
	return nil
}

// MakeUndumpable makes this process non-dumpable (PR_SET_DUMPABLE 0): no
// process of the same user may trace it or read its memory, environment
// or file descriptors through /proc, without CAP_SYS_PTRACE.
func MakeUndumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
