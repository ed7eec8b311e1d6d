package procgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Dir is the folder of the work folder workDir where running attempts'
// process groups are recorded, one empty file "<agent pid>.<pgid>" each,
// removed when the attempt ends. A supervisor that sees an agent die kills
// the groups left there (KillOrphans).
func Dir(workDir string) string { return filepath.Join(workDir, "groups") }

// Record records pgid in dir (a Dir) as a running attempt of this process,
// and returns the function that removes the record. Failing to record is
// not fatal: it only loses the clean-up after a crash, so Record returns a
// function that does nothing then (and when dir is "").
func Record(dir string, pgid int) (remove func()) {
	return RecordWith(dir, pgid, createEmpty, func(path string) { os.Remove(path) })
}

// RecordWith is Record with the record made by create, which puts an
// empty file at the path it is given, and removed by remove (an agent
// recycles the files: agent.inodePool).
func RecordWith(dir string, pgid int, create func(path string) error, remove func(path string)) (unrecord func()) {
	if dir == "" {
		return func() {}
	}
	name := filepath.Join(dir, fmt.Sprintf("%d.%d", os.Getpid(), pgid))
	err := create(name)
	if errors.Is(err, fs.ErrNotExist) { // dir is made the first time
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = create(name)
		}
	}
	if err != nil {
		return func() {}
	}
	return func() { remove(name) }
}

func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// Terminate sends SIGTERM to the process group pgid, waits up to grace for
// its leader to exit (done closes), then sends SIGKILL to the group.
func Terminate(pgid int, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Orphan is the record, in a Dir, of an attempt's process group whose
// agent is gone.
type Orphan struct {
	AgentPID int // the agent that recorded it
	PGID     int // the attempt's process group
	// Running reports whether the group still had a member when it was
	// listed (kill(-PGID, 0) succeeded).
	Running bool
	record  string // the record's path
}

// Orphans lists the attempt process groups recorded in Dir(workDir) whose
// agent is gone: those of agentPID when it is > 0, otherwise those of every
// recorded agent that is no longer running. Names that are not records are
// skipped, and a missing folder lists nothing. It changes nothing;
// KillOrphans kills what it lists.
func Orphans(workDir string, agentPID int) []Orphan {
	dir := Dir(workDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Orphan
	for _, e := range entries {
		var owner, pgid int
		if _, err := fmt.Sscanf(e.Name(), "%d.%d", &owner, &pgid); err != nil || pgid <= 1 {
			continue
		}
		if agentPID > 0 && owner != agentPID {
			continue
		}
		if agentPID <= 0 && processAlive(owner) {
			continue
		}
		err := syscall.Kill(-pgid, 0)
		out = append(out, Orphan{AgentPID: owner, PGID: pgid, Running: err == nil || errors.Is(err, syscall.EPERM),
			record: filepath.Join(dir, e.Name())})
	}
	return out
}

// KillOrphans kills (SIGKILL) the process groups of attempts recorded in
// Dir(workDir) whose agent is gone (Orphans(workDir, agentPID)): a record
// of a live agent is left alone unless agentPID names it. It removes their
// records and returns how many groups it signalled.
func KillOrphans(workDir string, agentPID int) int {
	killed := 0
	for _, g := range Orphans(workDir, agentPID) {
		if err := syscall.Kill(-g.PGID, syscall.SIGKILL); err == nil {
			killed++
		}
		os.Remove(g.record)
	}
	return killed
}

// processAlive reports whether pid exists (kill(pid, 0) succeeds or is
// refused for permission).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
