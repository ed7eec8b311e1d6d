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

// errNoProc: without /proc or the macOS process table this build cannot
// tell a process's start time or command line, so Reclaim stops no dead
// apply's worker by pid here (a weaker guarantee, docs/design.md): only
// their attempts' process groups, recorded by the agents, are killed.
var errNoProc = errors.New("local: this system offers no process start time to check a pid by")

func processStart(int) (string, error) { return "", errNoProc }

func processArgv(int) ([]string, error) { return nil, errNoProc }
