package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

func TestKillOrphans(t *testing.T) {
	// A pid that cannot exist: pid_max is at most 2^22, and pids are below it.
	const deadAgent = 1 << 22
	tests := []struct {
		name     string
		owner    int // agent pid written in the record
		agentPID int // argument to KillOrphans
		killed   bool
	}{
		{"dead agent, sweep of the dead", deadAgent, 0, true},
		{"live agent is left alone by the sweep", os.Getpid(), 0, false},
		{"live agent named explicitly", os.Getpid(), os.Getpid(), true},
		{"another agent named", deadAgent, deadAgent + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			cmd := startGroup(t)
			dir := Dir(work)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rec := filepath.Join(dir, fmt.Sprintf("%d.%d", tt.owner, cmd.Process.Pid))
			if err := os.WriteFile(rec, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			n := KillOrphans(work, tt.agentPID)
			if tt.killed {
				if n != 1 || !waitExit(t, cmd) {
					t.Fatalf("killed %d groups; the group must be gone", n)
				}
				if _, err := os.Stat(rec); !os.IsNotExist(err) {
					t.Fatalf("record %s not removed", rec)
				}
				return
			}
			if n != 0 {
				t.Fatalf("killed %d groups, want none", n)
			}
			if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
				t.Fatalf("group leader gone: %v", err)
			}
		})
	}
}

// TestOrphansListsWithoutKilling: Orphans names the groups of
// dead agents, says whether each still runs, and kills and removes nothing.
func TestOrphansListsWithoutKilling(t *testing.T) {
	const deadAgent = 1 << 22
	work := t.TempDir()
	dir := Dir(work)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	running := startGroup(t)
	gone := startGroup(t)
	_ = syscall.Kill(-gone.Process.Pid, syscall.SIGKILL)
	if !waitExit(t, gone) {
		t.Fatal("the group to end did not end")
	}
	live := startGroup(t)
	records := []string{
		fmt.Sprintf("%d.%d", deadAgent, running.Process.Pid),
		fmt.Sprintf("%d.%d", deadAgent, gone.Process.Pid),
		fmt.Sprintf("%d.%d", os.Getpid(), live.Process.Pid), // a live agent's
		"not-a-record",
	}
	for _, r := range records {
		if err := os.WriteFile(filepath.Join(dir, r), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	for _, g := range Orphans(work, 0) {
		if g.AgentPID != deadAgent {
			t.Errorf("listed %+v, whose agent is alive", g)
		}
		got[g.PGID] = g.Running
	}
	if len(got) != 2 || !got[running.Process.Pid] || got[gone.Process.Pid] {
		t.Errorf("Orphans = %v, want %d running and %d not", got, running.Process.Pid, gone.Process.Pid)
	}
	for _, r := range records {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("record %s removed by a listing: %v", r, err)
		}
	}
	if err := syscall.Kill(running.Process.Pid, 0); err != nil {
		t.Errorf("a listing killed a group: %v", err)
	}
}

// TestRecordAndTerminate: a group Record names is listed as its agent's
// while it runs, Terminate ends it (SIGTERM, then SIGKILL for a group that
// ignores SIGTERM), and the function Record returned removes the record.
func TestRecordAndTerminate(t *testing.T) {
	work := t.TempDir()
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	remove := Record(Dir(work), cmd.Process.Pid)
	if got := Orphans(work, os.Getpid()); len(got) != 1 || got[0].PGID != cmd.Process.Pid || !got[0].Running {
		t.Fatalf("Orphans(work, this process) = %+v, want the recorded group, running", got)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	Terminate(cmd.Process.Pid, done, 100*time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the group that ignores SIGTERM still runs after Terminate")
	}
	remove()
	if got := Orphans(work, os.Getpid()); len(got) != 0 {
		t.Errorf("after the record was removed, Orphans = %+v, want none", got)
	}
	if noop := Record("", 1); noop == nil {
		t.Error(`Record("", …) returned nil, want a function that does nothing`)
	}
}

// TestRecordWithMakesItsFolder: RecordWith makes its folder (0700, and
// the folders above it) when it is missing, the first time, and records
// in one that exists; where it cannot record (a file in the folder's
// place) it returns a function that does nothing.
func TestRecordWithMakesItsFolder(t *testing.T) {
	for _, c := range []struct {
		name     string
		setup    func(dir string) error
		recorded bool
	}{
		{"missing", func(string) error { return nil }, true},
		{"missing with its parent", func(dir string) error { return nil }, true},
		{"there", func(dir string) error { return os.MkdirAll(dir, 0o700) }, true},
		{"a file in its place", func(dir string) error {
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				return err
			}
			return os.WriteFile(dir, nil, 0o600)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			work := t.TempDir()
			dir := Dir(work)
			if c.name == "missing with its parent" {
				dir = filepath.Join(work, "sub", "groups")
			}
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			var removed []string
			unrecord := RecordWith(dir, 42, createEmpty, func(p string) { removed = append(removed, p); os.Remove(p) })
			name := filepath.Join(dir, fmt.Sprintf("%d.42", os.Getpid()))
			_, err := os.Lstat(name)
			if got := err == nil; got != c.recorded {
				t.Fatalf("recorded: %v (%v); want %v", got, err, c.recorded)
			}
			if c.recorded {
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("folder %v, %v; want mode 0700", fi, err)
				}
			}
			unrecord()
			if c.recorded != (len(removed) == 1 && removed[0] == name) {
				t.Errorf("removed %q", removed)
			}
		})
	}
}
