//go:build linux

package confine

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitThreadGone: waitThreadGone returns only once the thread is
// released (gone from /proc/self/task), through its pidfd and, where the
// kernel has none, by polling.
func TestWaitThreadGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pidfd bool
	}{{"pidfd", true}, {"proc", false}} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 20; i++ {
				tids := make(chan int)
				end := make(chan struct{})
				go func() {
					runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
					tids <- unix.Gettid()
					<-end
				}()
				tid := <-tids
				fd := -1
				if tc.pidfd {
					if fd = openThread(tid); fd < 0 {
						t.Skip("no pidfd of a thread here (Linux 6.9+)")
					}
				}
				close(end)
				err := waitThreadGone(tid, fd)
				if fd >= 0 {
					unix.Close(fd)
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("try %d: thread %d is still there after waitThreadGone (%v)", i, tid, err)
				}
			}
		})
	}
}

// TestContinueStopped: a stopped child is continued, and a child that
// ended or that another process continued is left as it is; the exit stays
// for cmd.Wait. By waitid and by /proc.
func TestContinueStopped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		before  func(pid int) // what happens to the child before the call
		byProc  bool
		want    string // how the child ends: "exit 0" or "killed"
	}{
		{"stopped", []string{"sleep", "0.2"}, stop, false, "exit 0"},
		{"stopped, by /proc", []string{"sleep", "0.2"}, stop, true, "exit 0"},
		{"ended", []string{"true"}, waitEnded, false, "exit 0"},
		{"ended, by /proc", []string{"true"}, waitEnded, true, "exit 0"},
		{"continued by another", []string{"sleep", "0.2"}, func(pid int) { stop(pid); unix.Kill(pid, unix.SIGCONT) }, false, "exit 0"},
		{"killed while stopped", []string{"sleep", "10"}, func(pid int) { stop(pid); unix.Kill(pid, unix.SIGKILL); waitEnded(pid) }, false, "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.command[0], tc.command[1:]...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			tc.before(pid)
			cont := continueStopped
			if tc.byProc {
				cont = continueStoppedByProc
			}
			if err := cont(pid); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				got := "exit 0"
				if err != nil {
					got = "killed"
					if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
						got = err.Error()
					}
				}
				if got != tc.want {
					t.Fatalf("the child ended with %q, want %q", got, tc.want)
				}
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the child was left stopped")
			}
		})
	}
}

// stop stops process pid and waits until it is stopped.
func stop(pid int) {
	unix.Kill(pid, unix.SIGSTOP)
	var info unix.Siginfo
	unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
}

// waitEnded waits until child pid has ended, without reaping it.
func waitEnded(pid int) {
	var info unix.Siginfo
	unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
}
