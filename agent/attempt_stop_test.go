package agent

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
)

func TestClassifyStopSignal(t *testing.T) {
	code := 1
	tests := []struct {
		name     string
		ex       execution
		stopping bool
		class    string
	}{
		{"SIGTERM while the worker stops", execution{class: ClassFailure, signal: "SIGTERM"}, true, ClassLost},
		{"SIGKILL while the worker stops", execution{class: ClassFailure, signal: "SIGKILL"}, true, ClassLost},
		{"SIGTERM, worker running", execution{class: ClassFailure, signal: "SIGTERM"}, false, ClassFailure},
		{"SIGSEGV while the worker stops", execution{class: ClassFailure, signal: "SIGSEGV"}, true, ClassFailure},
		{"exit status while the worker stops", execution{class: ClassFailure, exitCode: &code}, true, ClassFailure},
		{"timed out while the worker stops", execution{class: ClassFailure, signal: "SIGTERM", timedOut: true}, true, ClassFailure},
		{"success while the worker stops", execution{}, true, ""},
		{"already lost", execution{class: ClassLost, signal: "SIGTERM", err: "drain"}, true, ClassLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classifyStopSignal(tt.ex, tt.stopping)
			if got.class != tt.class {
				t.Errorf("class %q, want %q (err %q)", got.class, tt.class, got.err)
			}
			if tt.ex.err == "drain" && got.err != "drain" {
				t.Errorf("an attempt the agent stopped keeps its reason, got %q", got.err)
			}
		})
	}
	if isClosed(nil) {
		t.Error("a nil channel is not closed")
	}
	ch := make(chan struct{})
	close(ch)
	if !isClosed(ch) {
		t.Error("a closed channel is closed")
	}
}

// TestStopAfterTheCommandExited: an attempt stopped (a cancelled lease, a
// drain) after its command exited on its own ends as the command ended,
// as happens when an agent resumed after SIGSTOP learns both at once; one
// stopped while its command runs is lost.
func TestStopAfterTheCommandExited(t *testing.T) {
	tests := []struct {
		name        string
		script      string
		waitExit    bool
		exitedFirst bool
		class, msg  string
	}{
		{"exited 0, then stopped", "exit 0", true, true, "", ""},
		{"exited 3, then stopped", "exit 3", true, true, ClassFailure, "exit status 3"},
		{"stopped while it runs", "sleep 30", false, false, ClassLost, "stopped: cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := newAttempt(protocol.Assignment{}, t.TempDir())
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.waitExit {
				deadline := time.Now().Add(10 * time.Second)
				for !exited(cmd.Process.Pid) {
					if time.Now().After(deadline) {
						t.Fatal("the command did not exit")
					}
					time.Sleep(time.Millisecond)
				}
			} else if exited(cmd.Process.Pid) {
				t.Fatal("a running command is not exited")
			}
			at.stop("stopped: cancelled")
			timedOut, exitedFirst := watchGroup(at, cmd, time.Second)
			if timedOut || exitedFirst != tt.exitedFirst {
				t.Fatalf("timedOut %v, exitedFirst %v; want false, %v", timedOut, exitedFirst, tt.exitedFirst)
			}
			ex := execution{exitedFirst: exitedFirst}
			ex.exitCode, ex.signal = exitOf(cmd.ProcessState)
			class, msg := outcome(at, ex)
			if class != tt.class || msg != tt.msg {
				t.Errorf("outcome %q %q, want %q %q", class, msg, tt.class, tt.msg)
			}
		})
	}
}
