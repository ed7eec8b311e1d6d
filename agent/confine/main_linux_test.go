//go:build linux

package confine

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary's main goroutine stays on the main thread (init runs
// there), so TestMain can check what lockHere does when it is called on
// the main thread, as any goroutine of the agent may be.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	var tid int
	lockHere(func() { tid = unix.Gettid() })
	if unix.Gettid() != os.Getpid() {
		fmt.Fprintln(os.Stderr, "TestMain does not run on the main thread: lockHere not checked there")
	} else if tid == os.Getpid() {
		fmt.Fprintln(os.Stderr, "FAIL: lockHere ran its function on the main thread, which must never be confined")
		os.Exit(1)
	}
	os.Exit(m.Run())
}
