//go:build linux

package confine

import (
	"fmt"
	"os"
	"os/exec"
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
	switch os.Getenv(probeEnv) {
	case "tgkill":
		probeThreads() // a confined command of TestNoThreadOfTheAgentCanBeSignalled
		return
	case "start":
		probeStart() // an ordinary user's agent of TestOrdinaryUserConfines
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

// probeStart confines /bin/true in a fresh work folder and prints how it
// went.
func probeStart() {
	work, err := os.MkdirTemp("", "wdc-confine-user-")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	defer os.RemoveAll(work)
	attempt := work + "/scratch/t/1"
	if err := os.MkdirAll(attempt, 0o700); err != nil {
		fmt.Println("error", err)
		return
	}
	st := Probe()
	cmd := exec.Command("/bin/true")
	cmd.Dir = attempt
	release, err := Start(cmd, Policy{Hide: []string{work}, Show: []string{attempt}, ReadOnly: []string{"/sys"}})
	if err != nil {
		fmt.Println("error", err, "by", st.Mechanism)
		return
	}
	err = cmd.Wait()
	release()
	fmt.Println("started by", st.Mechanism, "wait", err)
}
