//go:build linux

package confine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary's main goroutine stays on the main thread (init runs
// there), so TestMain can check what lockHere does when it is called on
// the main thread, as any goroutine of the agent may be.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "tgkill" {
		probeThreads() // a confined command of TestNoThreadOfTheAgentCanBeSignalled
		return
	}
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

// probeEnv makes the test binary a probe (TestMain) instead of running the
// tests.
const probeEnv = "WDC_CONFINE_TEST_PROBE"

// probeThreads asks, for every thread of its parent, whether it may signal
// it (tgkill with signal 0 checks the permission and sends nothing), and
// prints how many it may, of how many it tried.
func probeThreads() {
	ppid := os.Getppid()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(ppid) + "/task")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	allowed := 0
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if unix.Tgkill(ppid, tid, 0) == nil {
			allowed++
		}
	}
	fmt.Printf("%d of %d\n", allowed, len(entries))
}
