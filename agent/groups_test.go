package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/agent/procgroup"
)

// startGroup starts `sleep 60` as the leader of its own process group.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func waitExit(t *testing.T, cmd *exec.Cmd) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestAgentStartKillsOrphansOfItsWorkFolder: an agent that starts in a work
// folder where a killed agent left an attempt's process group running kills
// it before it registers (a worker that joined by hand has no provider to
// clean up after it).
func TestAgentStartKillsOrphansOfItsWorkFolder(t *testing.T) {
	const deadAgent = 1 << 22
	f := newFakeCoord(1, 50*time.Millisecond, 3*time.Second)
	f.drain = true // the agent stops right after registering
	s := startFake(t, f)
	cmd := startGroup(t)
	work := t.TempDir()
	if err := os.MkdirAll(procgroup.Dir(work), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procgroup.Dir(work), fmt.Sprintf("%d.%d", deadAgent, cmd.Process.Pid)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, s.URL(), func(o *Options) { o.WorkDir = work })
	if err := a.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !waitExit(t, cmd) {
		t.Fatal("the orphaned attempt group still runs after an agent started in its work folder")
	}
}
