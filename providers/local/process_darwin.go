package local

import (
	"errors"
	"fmt"
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

// processStart returns the start time of pid from the kernel's process
// table (sysctl kern.proc.pid: p_starttime, seconds and microseconds), so
// a reused pid is never taken for the process that was launched.
func processStart(pid int) (string, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return "", err
	}
	if kp.Proc.P_pid != int32(pid) {
		return "", errors.New("local: no such process")
	}
	return fmt.Sprintf("%d.%06d", kp.Proc.P_starttime.Sec, kp.Proc.P_starttime.Usec), nil
}

// processArgv returns the argv of pid from sysctl kern.procargs2: argc as
// a 32-bit integer, the executable path, NUL padding, then argc
// NUL-terminated arguments.
func processArgv(pid int) ([]string, error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return nil, err
	}
	argv := procArgs(b)
	if argv == nil {
		return nil, errors.New("local: unreadable kern.procargs2")
	}
	return argv, nil
}
