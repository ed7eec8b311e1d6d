//go:build unix

package agent

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openFile opens path as os.OpenFile(path, flag, perm) does, for a
// regular file the agent reads or writes itself or hands to a command,
// without the system calls os.OpenFile spends on such a file: it tries
// to add every descriptor it opens to the runtime's netpoller (fcntl to
// make it non-blocking, an epoll_ctl that a regular file fails with
// EPERM, fcntl to make it blocking again: five calls per file). A
// descriptor from open(2) given to os.NewFile is blocking, and os.NewFile
// leaves a blocking descriptor out of the poller (one fcntl to see that).
// Only perm's permission bits are used. Errors are *fs.PathError with
// path, as os.OpenFile's ("open").
func openFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}
