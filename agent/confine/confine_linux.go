//go:build linux

package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ErrUnavailable: this platform or process cannot confine attempts
// (wrapped with Probe's Missing).
var ErrUnavailable = errors.New("attempts cannot be confined here")

// minABI is the Landlock ABI that scopes signals and abstract UNIX sockets.
const minABI = 6

// dropped are the capabilities a confined command loses from its bounding
// set: those that would let it undo its mounts, trace or read other
// processes (environ, auxv and maps stay readable with CAP_SYS_ADMIN or
// CAP_PERFMON inside a Landlock domain), or reach the kernel directly.
var dropped = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_PERFMON, unix.CAP_BPF,
	unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_SYSLOG,
	unix.CAP_CHECKPOINT_RESTORE, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
}

var probed struct {
	once sync.Once
	st   Status
}

func probe() Status {
	probed.once.Do(func() { probed.st = probeNow() })
	return probed.st
}

func probeNow() Status {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return Status{Missing: fmt.Sprintf("this kernel has no Landlock (%v): attempts are not confined, so a task can signal and trace its agent, read its environment and the work folder (the state, the worker's session, the operator credential)", err)}
	}
	if abi < minABI {
		return Status{Missing: fmt.Sprintf("this kernel's Landlock ABI is %d and confinement needs %d (signal scoping, Linux 6.12+): attempts are not confined, so a task can signal its agent and read the work folder", abi, minABI)}
	}
	if err := onThread(func() error { return unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS) }); err != nil {
		return Status{Missing: fmt.Sprintf("this process cannot make a mount namespace (%v; it needs CAP_SYS_ADMIN: run the agent as root, or in a container with that capability): attempts are not confined, so a task can read the work folder (the state, the worker's session, the operator credential)", err)}
	}
	return Status{Confined: true, Mechanism: fmt.Sprintf("mount namespace, dropped capabilities, Landlock ABI %d", abi)}
}

// onThread runs fn on an OS thread of its own that is thrown away after
// (fn may change the thread for good).
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- fn()
	}()
	return <-errc
}

func start(cmd *exec.Cmd, p Policy) (func(), error) {
	if st := probe(); !st.Confined {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, st.Missing)
	}
	cfg := landlock.MustConfig(landlock.ScopedSet(ll.ScopeSignal | ll.ScopeAbstractUnixSocket))
	rulesetFD, _, err := cfg.NewRulesetFD()
	if err != nil {
		return nil, fmt.Errorf("confining the attempt: a Landlock ruleset: %w", err)
	}
	ready := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		err := enter(p, rulesetFD)
		unix.Close(rulesetFD)
		if err == nil {
			err = cmd.Start()
		}
		ready <- err
		if err == nil {
			<-done // the command's parent-death signal belongs to this thread
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }, nil
}

// enter changes the calling thread, which must be locked and is never
// used again: what it forks is confined by p.
func enter(p Policy, rulesetFD int) error {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("confining the attempt: a mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("confining the attempt: private mounts: %w", err)
	}
	if err := hide(p); err != nil {
		return err
	}
	for _, c := range dropped {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("confining the attempt: dropping capability %d: %w", c, err)
		}
	}
	if err := clearInheritable(); err != nil {
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

// hide covers each Hide folder with an empty tmpfs and binds each Show
// folder back in place, cloned before it was covered.
func hide(p Policy) error {
	trees := make([]int, 0, len(p.Show))
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, s := range p.Show {
		fd, err := unix.OpenTree(unix.AT_FDCWD, s, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("confining the attempt: %s: %w", s, err)
		}
		trees = append(trees, fd)
	}
	for _, h := range p.Hide {
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
			return fmt.Errorf("confining the attempt: hiding %s: %w", h, err)
		}
	}
	for i, s := range p.Show {
		if err := os.MkdirAll(s, 0o700); err != nil {
			return fmt.Errorf("confining the attempt: %w", err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, s, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("confining the attempt: showing %s: %w", s, err)
		}
	}
	for _, h := range p.Hide {
		// Nothing may be written into the cover (the binds inside stay
		// writable).
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("confining the attempt: %s read-only: %w", h, err)
		}
	}
	return nil
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
