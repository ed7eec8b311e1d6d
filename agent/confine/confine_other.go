//go:build !linux

package confine

import (
	"errors"
	"os/exec"
	"runtime"
)

// ErrUnavailable: this platform or process cannot confine attempts.
var ErrUnavailable = errors.New("attempts cannot be confined on " + runtime.GOOS)

func start(cmd *exec.Cmd, p Policy) (func(), error) { return nil, ErrUnavailable }

func probe() Status {
	return Status{Missing: "attempts are not confined on " + runtime.GOOS +
		": a task runs with its agent's user and can read the work folder (the state, the worker's session, the operator credential) and signal its agent"}
}

// MakeUndumpable does nothing on this platform.
func MakeUndumpable() error { return nil }
