//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenFileDescriptor: the descriptor openFile gives is close-on-exec
// (no command inherits it but through its stdout or stderr) and
// blocking: it was never handed to the netpoller.
func TestOpenFileDescriptor(t *testing.T) {
	t.Parallel()
	f, err := openFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fdFlags, flFlags int
	var ferr error
	if err := sc.Control(func(fd uintptr) {
		if fdFlags, ferr = unix.FcntlInt(fd, unix.F_GETFD, 0); ferr == nil {
			flFlags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0)
		}
	}); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	if fdFlags&unix.FD_CLOEXEC == 0 {
		t.Error("not close-on-exec")
	}
	if flFlags&unix.O_NONBLOCK != 0 {
		t.Error("non-blocking")
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
}
