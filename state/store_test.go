package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// setup returns a freshly migrated store in a temporary directory; it is
// closed when the test ends.
func setup(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func serial(t *testing.T, s *Store) int64 {
	t.Helper()
	_, n, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrationsEmbedded(t *testing.T) {
	t.Parallel()
	if len(migrations) == 0 || SchemaVersion() != len(migrations) {
		t.Fatalf("migrations: %d, SchemaVersion %d", len(migrations), SchemaVersion())
	}
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migration %d is %s", i+1, m.name)
		}
	}
}

func TestCheckVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		applied []int
		known   int
		want    error
	}{
		{"empty", nil, 3, nil},
		{"partial", []int{1, 2}, 3, nil},
		{"current", []int{1, 2, 3}, 3, nil},
		{"gap", []int{1, 3}, 3, ErrNotState},
		{"missing first", []int{2, 3}, 3, ErrNotState},
		{"newer", []int{1, 2, 3, 4}, 3, ErrNewerSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkVersions("x.db", tt.applied, tt.known)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("checkVersions(%v, %d) = %v, want %v", tt.applied, tt.known, err, tt.want)
			}
		})
	}
}

func TestOpenFreshFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "deep", "er", "state.db") // parents are created
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	var versions []int
	rows, err := s.db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		rows.Scan(&v)
		versions = append(versions, v)
	}
	rows.Close()
	if len(versions) != SchemaVersion() || versions[len(versions)-1] != SchemaVersion() {
		t.Errorf("schema_migrations = %v, want 1..%d", versions, SchemaVersion())
	}
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var sync int
	if err := s.db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
	var fk int
	if err := s.db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}

	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Lineage) != 32 || snap.Serial != 0 {
		t.Errorf("lineage %q serial %d, want 32 hex digits and 0", snap.Lineage, snap.Serial)
	}
	if len(snap.HashKey) != 32 {
		t.Errorf("hash key %x, want 32 random bytes", snap.HashKey)
	}
	want := EmptySnapshot()
	want.Lineage, want.HashKey = snap.Lineage, snap.HashKey
	if d := cmp.Diff(want, snap); d != "" {
		t.Errorf("fresh snapshot (-want +got):\n%s", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	lineage, n, err := s2.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lineage != snap.Lineage || n != 0 {
		t.Errorf("after reopen: lineage %q serial %d, want %q and 0 (opening is not a write)", lineage, n, snap.Lineage)
	}
}

func TestLineagesDiffer(t *testing.T) {
	t.Parallel()
	a, _, err := setup(t).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := setup(t).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two new files share lineage %q", a)
	}
}

const helperPathEnv = "WDC_STATE_TEST_HELPER_PATH"
const helperStartEnv = "WDC_STATE_TEST_HELPER_START"

// TestHelperProcessOpen is not a test: TestConcurrentOpenNewFile runs the test
// binary with -test.run=^TestHelperProcessOpen$ and the path in the
// environment, several times at once.
func TestHelperProcessOpen(t *testing.T) {
	path := os.Getenv(helperPathEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	if start, err := strconv.ParseInt(os.Getenv(helperStartEnv), 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, start))) // line the processes up
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "OPEN FAILED:", err)
		os.Exit(3)
	}
	if err := s.UpsertPool(ctx, Pool{Name: "p" + strconv.Itoa(os.Getpid()), Provider: "local", Max: 1, Capacity: 1}, t0); err != nil {
		fmt.Fprintln(os.Stderr, "WRITE FAILED:", err)
		os.Exit(4)
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "CLOSE FAILED:", err)
		os.Exit(5)
	}
}

func TestConcurrentOpenNewFile(t *testing.T) {
	t.Parallel()
	const procs, rounds = 4, 5
	dir := t.TempDir()
	for round := range rounds {
		path := filepath.Join(dir, fmt.Sprintf("round%d", round), "state.db")
		start := time.Now().Add(300 * time.Millisecond).UnixNano()
		cmds := make([]*exec.Cmd, procs)
		outs := make([]*strings.Builder, procs)
		for i := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessOpen$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperPathEnv+"="+path, helperStartEnv+"="+strconv.FormatInt(start, 10))
			outs[i] = &strings.Builder{}
			cmd.Stdout, cmd.Stderr = outs[i], outs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = cmd
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d, process %d: %v\n%s", round, i, err, outs[i])
			}
		}
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(context.Background())
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Pools) != procs || snap.Serial != procs {
			t.Errorf("round %d: %d pools, serial %d; want %d and %d", round, len(snap.Pools), snap.Serial, procs, procs)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	newer := SchemaVersion() + 1
	for v := SchemaVersion() + 1; v <= newer; v++ {
		if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)`, v); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	wantMsg := fmt.Sprintf("state file %s was written by a newer wdc (schema version %d; this wdc knows up to %d); upgrade wdc",
		path, newer, SchemaVersion())
	for name, open := range map[string]func(context.Context, string) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		s, err := open(ctx, path)
		if err == nil {
			s.Close()
			t.Fatalf("%s of a newer file succeeded", name)
		}
		if !errors.Is(err, ErrNewerSchema) {
			t.Errorf("%s: %v, want ErrNewerSchema", name, err)
		}
		if err.Error() != wantMsg {
			t.Errorf("%s: message\n%q\nwant\n%q", name, err.Error(), wantMsg)
		}
		var nse *NewerSchemaError
		if !errors.As(err, &nse) || nse.Version != newer || nse.Known != SchemaVersion() {
			t.Errorf("%s: %#v", name, nse)
		}
	}
}

func TestOpenRefusesForeignDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := openDB(DSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE something (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(ctx, path); !errors.Is(err, ErrNotState) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of another database: %v, want ErrNotState", err)
	}
	if s, err := OpenReadOnly(ctx, path); !errors.Is(err, ErrNotState) {
		if s != nil {
			s.Close()
		}
		t.Errorf("OpenReadOnly of another database: %v, want ErrNotState", err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	missing := filepath.Join(dir, "sub", "missing.db")
	if s, err := OpenReadOnly(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenReadOnly(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReadOnly created the parent directory: %v", err)
	}

	path := filepath.Join(dir, "state.db")
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, t0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	r, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pools) != 1 || snap.Serial != 1 {
		t.Errorf("read-only snapshot: %d pools, serial %d", len(snap.Pools), snap.Serial)
	}
	// Through the API: refused before reaching SQLite.
	if err := r.UpsertPool(ctx, Pool{Name: "q", Provider: "local", Max: 1, Capacity: 1}, t0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("UpsertPool on a read-only store: %v, want ErrReadOnly", err)
	}
	if err := r.AppendEvent(ctx, Event{Kind: "x"}, t0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("AppendEvent on a read-only store: %v, want ErrReadOnly", err)
	}
	// Through raw SQL: SQLite itself refuses.
	if _, err := r.db.Exec(`UPDATE state_info SET serial = serial + 1`); err == nil {
		t.Errorf("raw UPDATE through a read-only store succeeded")
	}
	r.Close()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("the database file changed under a read-only store")
	}
}

func TestOpenReadOnlyEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenReadOnly(context.Background(), path); !errors.Is(err, ErrNotState) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenReadOnly(empty file) = %v, want ErrNotState", err)
	}
}

func TestSerialBumpsOnEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	var worker, lockID string
	steps := []struct {
		name string
		do   func() error
		// lock: the apply lock's own writes leave the serial alone, so
		// taking and releasing the lock does not make a saved plan stale.
		lock bool
	}{
		{"UpsertPool", func() error {
			return s.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, t0)
		}, false},
		{"UpsertPool again", func() error {
			return s.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 2, Capacity: 1}, t0)
		}, false},
		{"RegisterWorker", func() error {
			w, err := s.RegisterWorker(ctx, Worker{Pool: "p", Capacity: 1, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, t0)
			worker = w.ID
			return err
		}, false},
		{"UpsertTask", func() error {
			return s.UpsertTask(ctx, TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h", Status: TaskQueued, MaxAttempts: 1}, t0)
		}, false},
		{"GrantLease", func() error {
			_, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: worker, Timeout: time.Hour}, t0)
			return err
		}, false},
		{"Heartbeat", func() error { _, err := s.Heartbeat(ctx, worker, t0.Add(time.Second)); return err }, false},
		{"AppendEvent", func() error { return s.AppendEvent(ctx, Event{Kind: "note"}, t0) }, false},
		{"AcquireLock", func() error {
			l, _, err := s.AcquireLock(ctx, LockRequest{Holder: "me", TTL: time.Minute}, t0)
			lockID = l.ID
			return err
		}, true},
		{"RenewLock", func() error { _, err := s.RenewLock(ctx, lockID, time.Minute, t0); return err }, true},
		{"ReleaseLock", func() error { return s.ReleaseLock(ctx, lockID, t0) }, true},
	}
	want := serial(t, s)
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !st.lock {
			want++
		}
		if got := serial(t, s); got != want {
			t.Errorf("after %s: serial %d, want %d", st.name, got, want)
		}
	}
	// A failed write changes nothing, not even the serial.
	if _, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: worker, Timeout: time.Hour}, t0); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second grant: %v", err)
	}
	if got := serial(t, s); got != want {
		t.Errorf("after a failed write: serial %d, want %d", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	pool := Pool{Name: "builders", Provider: "local", Min: 1, Max: 4, Capacity: 2, Labels: map[string]string{"can": "build", "arch": "amd64"}}
	if err := s.UpsertPool(ctx, pool, t0); err != nil {
		t.Fatal(err)
	}
	w, err := s.RegisterWorker(ctx, Worker{Pool: "builders", Labels: pool.Labels, Capacity: 2, Host: "h", PID: 42,
		Version: "v0", HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.ID, "w-") || len(w.ID) != 14 || w.Status != WorkerActive {
		t.Errorf("registered worker %+v", w)
	}
	def := TaskDef{Address: "task.test[1]", Name: "test", Index: 1, DefHash: "abc", Spec: []byte(`{"command":["true"]}`),
		Status: TaskQueued, MaxAttempts: 3, MaxLost: 3}
	if err := s.UpsertTask(ctx, def, t0); err != nil {
		t.Fatal(err)
	}
	l, err := s.GrantLease(ctx, GrantRequest{Task: def.Address, WorkerID: w.ID, Timeout: time.Minute, Grace: time.Second}, t0)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.LeasesHeld = 1
	want := &Snapshot{
		Lineage: snap.Lineage, Serial: 4, HashKey: snap.HashKey,
		Pools:   []Pool{pool},
		Workers: []Worker{w},
		Tasks: []Task{{Address: def.Address, Name: "test", Index: 1, DefHash: "abc", Spec: def.Spec, Status: TaskRunning,
			Attempts: 1, MaxAttempts: 3, MaxLost: 3, CreatedAt: t0, UpdatedAt: t0}},
		Leases:       []Lease{l},
		LatestLeases: []Lease{l},
		Proposals:    []Proposal{},
		EdgeRecords:  []EdgeRecord{},
	}
	if d := cmp.Diff(want, snap); d != "" {
		t.Errorf("snapshot (-want +got):\n%s", d)
	}
	if got, err := s.Worker(ctx, w.ID); err != nil || cmp.Diff(w, got) != "" {
		t.Errorf("Worker: %v %s", err, cmp.Diff(w, got))
	}
	if got, err := s.Lease(ctx, l.Token); err != nil || cmp.Diff(l, got) != "" {
		t.Errorf("Lease: %v %s", err, cmp.Diff(l, got))
	}
	atts, err := s.Attempts(ctx, def.Address)
	if err != nil {
		t.Fatal(err)
	}
	wantAtt := []Attempt{{Task: def.Address, Number: 1, WorkerID: w.ID, Token: l.Token, StartedAt: t0}}
	if d := cmp.Diff(wantAtt, atts); d != "" {
		t.Errorf("attempts (-want +got):\n%s", d)
	}
	evs, err := s.Events(ctx, def.Address)
	if err != nil {
		t.Fatal(err)
	}
	wantEv := []Event{{Kind: EventLeased, At: t0, Task: def.Address, WorkerID: w.ID, Token: l.Token, Message: "attempt 1"}}
	if d := cmp.Diff(wantEv, evs, cmpopts.IgnoreFields(Event{}, "Seq")); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	if err := s.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, t0); err != nil {
		t.Fatal(err)
	}
	okDef := TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h", Status: TaskQueued, MaxAttempts: 1}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"pool without name", func() error { return s.UpsertPool(ctx, Pool{Provider: "local", Max: 1, Capacity: 1}, t0) }, ErrInvalid},
		{"pool max < min", func() error {
			return s.UpsertPool(ctx, Pool{Name: "x", Provider: "local", Min: 2, Max: 1, Capacity: 1}, t0)
		}, ErrInvalid},
		{"pool capacity 0", func() error { return s.UpsertPool(ctx, Pool{Name: "x", Provider: "local", Max: 1}, t0) }, ErrInvalid},
		{"worker ttl 0", func() error {
			_, err := s.RegisterWorker(ctx, Worker{Pool: "p", Capacity: 1, HeartbeatInterval: time.Second}, t0)
			return err
		}, ErrInvalid},
		{"worker unknown pool", func() error {
			_, err := s.RegisterWorker(ctx, Worker{Pool: "nope", Capacity: 1, HeartbeatInterval: time.Second, TTL: time.Second}, t0)
			return err
		}, ErrNotFound},
		{"task running", func() error { d := okDef; d.Status = TaskRunning; return s.UpsertTask(ctx, d, t0) }, ErrInvalid},
		{"task bad status", func() error { d := okDef; d.Status = "done"; return s.UpsertTask(ctx, d, t0) }, ErrInvalid},
		{"task bad spec", func() error { d := okDef; d.Spec = []byte("{"); return s.UpsertTask(ctx, d, t0) }, ErrInvalid},
		{"task index -2", func() error { d := okDef; d.Index = -2; return s.UpsertTask(ctx, d, t0) }, ErrInvalid},
		{"task max_attempts 0", func() error { d := okDef; d.MaxAttempts = 0; return s.UpsertTask(ctx, d, t0) }, ErrInvalid},
		{"heartbeat unknown worker", func() error { _, err := s.Heartbeat(ctx, "w-nope", t0); return err }, ErrNotFound},
		{"event without kind", func() error { return s.AppendEvent(ctx, Event{}, t0) }, ErrInvalid},
		{"grant unknown task", func() error {
			_, err := s.GrantLease(ctx, GrantRequest{Task: "task.nope", WorkerID: "w", Timeout: time.Hour}, t0)
			return err
		}, ErrNotFound},
		{"grant zero timeout", func() error {
			_, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w"}, t0)
			return err
		}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func cmpDiff(want, got any) string { return cmp.Diff(want, got) }

// TestOpenRefusesNonRegularFiles: Open, OpenReadOnly and Inspect refuse a
// state file that is not a regular file, saying what it is; a FIFO or a
// device (0 bytes long, as stat sees them) is not called empty, and is
// refused before SQLite opens it (a FIFO would hold the open).
func TestOpenRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.db")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{dir, dir + " is a directory, not a regular file"},
		{"/dev/null", "/dev/null is a character device, not a regular file"},
		{fifo, fifo + " is a FIFO (named pipe), not a regular file"},
		{zero, zero + " is a character device (a symbolic link to /dev/zero), not a regular file"},
	}
	for _, tt := range tests {
		errs := make(chan map[string]error, 1)
		go func() {
			in, err := Inspect(ctx, tt.path)
			if err == nil {
				err = in.Problem
			}
			errs <- map[string]error{"Open": openErr(Open(ctx, tt.path)), "OpenReadOnly": openErr(OpenReadOnly(ctx, tt.path)), "Inspect": err}
		}()
		select {
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the state file's open did not return within 10 s", tt.path)
		case got := <-errs:
			for what, err := range got {
				want := "state file " + tt.want + ": give --state the path of a state file"
				if err == nil || err.Error() != want || !errors.Is(err, regularfile.ErrNotRegular) {
					t.Errorf("%s(%s) = %v\nwant %s", what, tt.path, err, want)
				}
			}
		}
	}
}

// TestGuardWrites checks that a Store guarded by an apply lock refuses every
// content write once the lock is removed or taken over, without touching the
// state, while the lock's own methods still work.
func TestGuardWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l, _, err := s.AcquireLock(ctx, LockRequest{Holder: "a", TTL: time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	s.GuardWrites(l.ID)
	if err := s.AppendEvent(ctx, Event{Kind: "note"}, t0); err != nil {
		t.Fatalf("write under the held lock: %v", err)
	}
	if _, err := s.ForceUnlock(ctx, l.ID, t0); err != nil {
		t.Fatal(err)
	}
	before := serial(t, s)
	writes := map[string]func() error{
		"AppendEvent": func() error { return s.AppendEvent(ctx, Event{Kind: "note"}, t0) },
		"ClaimLease": func() error {
			_, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
			return err
		},
		"Heartbeat":       func() error { _, err := s.Heartbeat(ctx, "w1", t0); return err },
		"RevokeAllLeases": func() error { _, err := s.RevokeAllLeases(ctx, "x", t0); return err },
	}
	for name, w := range writes {
		if err := w(); !errors.Is(err, ErrLockLost) {
			t.Errorf("%s after the lock was removed: %v, want ErrLockLost", name, err)
		}
	}
	if got := serial(t, s); got != before {
		t.Errorf("serial moved from %d to %d", before, got)
	}
	// Another apply takes the lock: still refused for the guarded store.
	if _, _, err := s.AcquireLock(ctx, LockRequest{Holder: "b", TTL: time.Minute}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(ctx, Event{Kind: "note"}, t0); !errors.Is(err, ErrLockLost) {
		t.Errorf("write under another apply's lock: %v, want ErrLockLost", err)
	}
}

// TestUpgradeFromEveryVersion opens a file written at each older schema
// version and checks that Open brings it to the newest schema, the same as
// a fresh file's, keeping its rows.
func TestUpgradeFromEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaOf := func(t *testing.T, db *sql.DB) string {
		t.Helper()
		rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var typ, name, text string
			if err := rows.Scan(&typ, &name, &text); err != nil {
				t.Fatal(err)
			}
			// A renamed table keeps its CREATE text with the old name.
			fmt.Fprintf(&b, "%s %s\n", typ, name)
		}
		return b.String()
	}
	fresh := setup(t)
	want := schemaOf(t, fresh.db)
	for v := 1; v < SchemaVersion(); v++ {
		t.Run(fmt.Sprintf("from %d", v), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			db, err := openDB(DSN(path, false))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(createSchemaMigrations); err != nil {
				t.Fatal(err)
			}
			for _, m := range migrations[:v] {
				if _, err := db.Exec(m.sql); err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
				if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name); err != nil {
					t.Fatal(err)
				}
			}
			// A row every version has: a rejected result.
			if _, err := db.Exec(`INSERT INTO results (idempotency_key, token, task, worker_id, decision, reason, received_at)
				VALUES ('k', 7, 'task.a', 'w1', 'rejected', 'unknown_lease', 0)`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := schemaOf(t, s.db); got != want {
				t.Errorf("schema after upgrading from %d:\n%s\nwant\n%s", v, got, want)
			}
			rs, err := s.Results(ctx, "task.a")
			if err != nil || len(rs) != 1 || rs[0].Key != "k" || rs[0].Reason != ReasonUnknownLease {
				t.Errorf("results after the upgrade: %+v, %v", rs, err)
			}
		})
	}
}
