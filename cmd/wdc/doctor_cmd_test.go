package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// doctorConfig has a gpu pool and a cpu pool, a task that needs a gpu and
// one that runs anywhere.
const doctorConfig = `
pool "gpu" {
  provider = "external"
  labels   = { gpu = "a100" }
}

pool "cpu" {
  provider = "local"
  labels   = { arch = "amd64" }
}

task "train" {
  command   = ["true"]
  placement = { gpu = "a100" }
}

task "build" {
  command = ["true"]
}
`

// notAPID is above any pid_max, so no process has it: a lock holder with
// it on this host is dead.
const notAPID = 1 << 22

// doctorStates make, in dir (holding doctorConfig), a state that triggers
// one kind of finding; "none" leaves no state file.
var doctorStates = map[string]func(t *testing.T, dir string){
	"none": func(t *testing.T, dir string) {},
	"healthy": func(t *testing.T, dir string) {
		st := openDoctorState(t, dir)
		defer st.Close()
		queueTasks(t, st, time.Now())
	},
	"empty file": func(t *testing.T, dir string) {
		path := filepath.Join(dir, defaultStatePath)
		mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
		mustDo(t, os.WriteFile(path, nil, 0o644))
	},
	"dropped table": func(t *testing.T, dir string) {
		st := openDoctorState(t, dir)
		queueTasks(t, st, time.Now())
		st.Close()
		mustDo(t, dropTable(filepath.Join(dir, defaultStatePath), "leases"))
	},
	"dead apply with queued work": func(t *testing.T, dir string) {
		st := openDoctorState(t, dir)
		defer st.Close()
		queueTasks(t, st, time.Now())
		host, _ := os.Hostname()
		_, _, err := st.AcquireLock(context.Background(), state.LockRequest{Holder: "tester@" + host, Host: host, PID: notAPID, TTL: time.Hour}, time.Now())
		mustDo(t, err)
	},
	"stale worker with a lease": func(t *testing.T, dir string) {
		st := openDoctorState(t, dir)
		defer st.Close()
		ctx, now := context.Background(), time.Now()
		queueTasks(t, st, now)
		w, err := st.RegisterWorker(ctx, state.Worker{Pool: "cpu", Labels: map[string]string{"arch": "amd64"}, Capacity: 1, Host: "elsewhere", PID: 7,
			HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
		mustDo(t, err)
		_, err = st.GrantLease(ctx, state.GrantRequest{Task: "task.build", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, now)
		mustDo(t, err)
		mustDo(t, st.SetWorkerStatus(ctx, w.ID, state.WorkerStale, now))
	},
	"active lease without an apply": func(t *testing.T, dir string) {
		st := openDoctorState(t, dir)
		defer st.Close()
		ctx, now := context.Background(), time.Now()
		queueTasks(t, st, now)
		w, err := st.RegisterWorker(ctx, state.Worker{Pool: "cpu", Labels: map[string]string{"arch": "amd64"}, Capacity: 1, Host: "elsewhere", PID: 7,
			HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
		mustDo(t, err)
		_, err = st.GrantLease(ctx, state.GrantRequest{Task: "task.build", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, now)
		mustDo(t, err)
	},
	"unplaceable task": func(t *testing.T, dir string) {
		// An apply that runs (this very process holds the lock), with a cpu
		// worker only, and task.train queued for five minutes.
		st := openDoctorState(t, dir)
		defer st.Close()
		ctx, now := context.Background(), time.Now()
		queueTasks(t, st, now.Add(-5*time.Minute))
		host, _ := os.Hostname()
		_, _, err := st.AcquireLock(ctx, state.LockRequest{Holder: "tester@" + host, Host: host, PID: os.Getpid(), TTL: time.Hour}, now)
		mustDo(t, err)
		_, err = st.RegisterWorker(ctx, state.Worker{Pool: "cpu", Labels: map[string]string{"arch": "amd64"}, Capacity: 1, Host: host, PID: os.Getpid(),
			HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
		mustDo(t, err)
	},
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openDoctorState(t *testing.T, dir string) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), filepath.Join(dir, defaultStatePath))
	mustDo(t, err)
	return st
}

// queueTasks records the pools and tasks of doctorConfig as queued at at.
func queueTasks(t *testing.T, st *state.Store, at time.Time) {
	t.Helper()
	ctx := context.Background()
	mustDo(t, st.UpsertPool(ctx, state.Pool{Name: "gpu", Provider: "external", Max: 1, Capacity: 1, Labels: map[string]string{"gpu": "a100"}}, at))
	mustDo(t, st.UpsertPool(ctx, state.Pool{Name: "cpu", Provider: "local", Max: 1, Capacity: 1, Labels: map[string]string{"arch": "amd64"}}, at))
	for _, name := range []string{"train", "build"} {
		mustDo(t, st.UpsertTask(ctx, state.TaskDef{Address: "task." + name, Name: name, Index: -1, DefHash: strings.Repeat("cd", 32),
			Spec: []byte(`{}`), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, at))
	}
}

// corruptTable overwrites the root page of a table of the (closed) state
// file at path with garbage, as a bad disk or a torn write could: SQLite
// then reports "database disk image is malformed" when it reads the
// table, while the schema (page 1) still reads.
func corruptTable(path, table string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	var root, pageSize int64
	err = db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&root)
	if err == nil {
		err = db.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	}
	if err == nil {
		_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, int(pageSize)), (root-1)*pageSize); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// flipSpecs flips 14 bytes of every task's spec in the (closed) state file
// at path, on the disk, as a bad disk or a stray write could: each spec
// (canonical JSON, starting {"command":) is no longer JSON, which the
// tasks table's CHECK constraint forbids, while every page still parses.
func flipSpecs(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	marker, n := []byte(`{"command":`), 0
	for i := 0; ; i += len(marker) {
		j := bytes.Index(b[i:], marker)
		if j < 0 {
			break
		}
		i += j
		for k := 1; k <= 14; k++ {
			b[i+k] ^= 0x20
		}
		n++
	}
	if n == 0 {
		return errors.New("flip-spec: the state file holds no task spec")
	}
	return os.WriteFile(path, b, 0o644)
}

// dropTable drops a table of the state file at path with a plain SQLite
// connection, as a tool other than wdc could.
func dropTable(path, table string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`DROP TABLE ` + table)
	return err
}

// TestDoctorExitCodes runs wdc doctor on a state made for each kind of
// finding: exit 0 when nothing is found, 3 with warnings, 4 with errors;
// the text names the check and what to do.
func TestDoctorExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		state string
		code  int
		want  []string // in stdout, in order
	}{
		{"none", 0, []string{"Note: [state.file] There is no state file at", "skipped  state.integrity", "No problems found."}},
		{"healthy", 0, []string{"passed   state.file", "passed   processes.leftover", "No problems found."}},
		{"empty file", 4, []string{"Error: [state.file] The state file", "is empty (0 bytes)", "To fix: To start a fresh state, remove it", "Found 1 error."}},
		{"dropped table", 4, []string{"Error: [state.schema] The state file records schema version", "lacks table leases",
			"    index leases_task", "To fix: Restore the state file from a backup", "failed   state.schema", "skipped  lock.dead_holder", "Found 1 error."}},
		{"dead apply with queued work", 4, []string{"Error: [lock.dead_holder] The apply holding the state lock is gone", "2 unfinished tasks wait behind it",
			"    task.build (queued)", "To fix: Run wdc apply", "failed   lock.dead_holder", "Found 1 error."}},
		{"stale worker with a lease", 3, []string{"Warning: [workers.stale_with_leases] Worker w-", "holds 1 active lease", "    task.build (attempt 1",
			"To fix: No apply is running to expire them", "Found 1 warning."}},
		{"active lease without an apply", 3, []string{"Warning: [leases.without_apply] No apply holds the state lock, but the state records 1 active lease and 1 active worker",
			"    lease of task.build (attempt 1", "To fix: The next wdc apply revokes the leases as lost", "failed   leases.without_apply", "Found 1 warning."}},
		{"unplaceable task", 3, []string{"Warning: [tasks.unplaceable] task.train has been queued for 5m", `placement { gpu = "a100" }`,
			"    pool.gpu: no live worker", `    pool.cpu (1 live worker): needs gpu = "a100", has no gpu label`, "Found 1 warning."}},
	}
	for _, tt := range tests {
		t.Run(tt.state, func(t *testing.T) {
			t.Parallel()
			dir := writeConfig(t, doctorConfig)
			doctorStates[tt.state](t, dir)
			stdout, stderr, code := runWDC(t, "--chdir", dir, "doctor")
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			rest := stdout
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("stdout lacks %q (in order):\n%s", w, stdout)
					break
				}
				rest = rest[i+len(w):]
			}
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			// --json exits the same and says so.
			out, _, jcode := runWDC(t, "--chdir", dir, "doctor", "--json")
			var doc doctorDoc
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("doctor --json: %v\n%s", err, out)
			}
			if jcode != tt.code || doc.Summary.ExitCode != tt.code {
				t.Errorf("doctor --json: exit %d, summary.exit_code %d; want %d", jcode, doc.Summary.ExitCode, tt.code)
			}
		})
	}
}

// TestDoctorCouldNotRun: doctor exits 1, with the reason on stderr, when it
// cannot run at all.
func TestDoctorCouldNotRun(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, doctorConfig)
	for _, args := range [][]string{
		{"--chdir", filepath.Join(dir, "missing"), "doctor"},
		{"--chdir", dir, "doctor", "--placement-threshold", "0s"},
		{"--chdir", dir, "doctor", "--placement-threshold", "soon"},
	} {
		stdout, stderr, code := runWDC(t, args...)
		if code != 1 || stderr == "" || stdout != "" {
			t.Errorf("wdc %s: exit %d, stdout %q, stderr %q; want exit 1 with the reason on stderr", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// TestDoctorWithoutConfiguration: with no configuration, doctor still
// checks the state and skips the placement check, saying why.
func TestDoctorWithoutConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openDoctorState(t, dir)
	st.Close()
	stdout, _, code := runWDC(t, "--chdir", dir, "doctor")
	if code != 0 || !strings.Contains(stdout, "skipped  tasks.unplaceable          no configuration (*.wdc.hcl) in "+dir+": placement is not recorded in the state") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}
