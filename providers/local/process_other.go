//go:build !linux && !darwin

package local

import (
	"errors"
	"syscall"
)

// alive reports whether pid exists; where there is neither /proc nor the
// macOS process table, a zombie counts as alive.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isAgent cannot read another process's argv here, so it never claims a
// pid is a wdc worker: StopStrays then leaves strays alone (their leases are
// revoked all the same) rather than risk killing a reused pid.
func isAgent(int) bool { return false }
