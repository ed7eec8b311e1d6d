//go:build !linux

package agent

import "syscall"

// attemptSysProcAttr puts an attempt's command in its own process group.
// There is no parent-death signal outside Linux: if the agent itself dies
// (SIGKILL), its command keeps running until apply, which records every
// attempt's process group (procgroup.Dir), kills the group when it sees the
// worker exit, or the next apply does when it takes over (docs/protocol.md,
// "What a task gets").
func attemptSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// exited reports whether the child pid has exited; outside Linux it cannot
// tell without reaping it, and says no.
func exited(pid int) bool { return false }
