package agent

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// attemptSysProcAttr puts an attempt's command in its own process group and
// asks the kernel to SIGKILL it if the agent itself dies (SIGKILL, OOM),
// rather than leave an orphan that runs beside the retry. Go keeps the OS
// thread that started it alive unless a locked goroutine exits. A confined
// attempt loses the parent-death signal (agent/confine: the thread that
// starts it ends before it runs); its process group, recorded in the work
// folder, is ended by whoever supervises the agent (procgroup.KillOrphans).
func attemptSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// exited reports whether the child pid has exited (a zombie not yet
// reaped, or reaped already), without reaping it: cmd.Wait, which may be
// waiting in another goroutine, still reads its status.
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err == unix.ECHILD {
		return true // reaped by cmd.Wait already
	}
	return err == nil && info.Signo == int32(unix.SIGCHLD)
}
