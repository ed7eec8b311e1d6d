package local

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// szomb is a zombie's p_stat in macOS's struct extern_proc (sys/proc.h).
const szomb = 5

// alive reports whether pid exists and is not a zombie, from the kernel's
// process table (sysctl kern.proc.pid).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return err != nil // unknown: do not claim it is gone
	}
	return kp.Proc.P_stat != szomb
}

// isAgent reports whether pid runs `… agent --server …` (a wdc worker), so a
// reused pid is never killed. It reads the argv from sysctl kern.procargs2:
// argc as a 32-bit integer, the executable path, NUL padding, then argc
// NUL-terminated arguments.
func isAgent(pid int) bool {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil || len(b) < 4 {
		return false
	}
	return isAgentArgv(procArgs(b))
}
