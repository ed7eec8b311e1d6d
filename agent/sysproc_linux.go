package agent

import "syscall"

// attemptSysProcAttr puts an attempt's command in its own process group and
// asks the kernel to SIGKILL it if the agent itself dies (SIGKILL, OOM),
// rather than leave an orphan that runs beside the retry. Go keeps the OS
// thread that started it alive unless a locked goroutine exits, which the
// agent never does.
func attemptSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
