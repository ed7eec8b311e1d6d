package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// TestCurrentSchemaListed keeps currentSchema equal to what the migrations
// create: every table, index and trigger of a fresh file, and nothing more.
func TestCurrentSchemaListed(t *testing.T) {
	t.Parallel()
	s := setup(t)
	rows, err := s.db.Query(`SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got, want []string
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.kind, &o.name); err != nil {
			t.Fatal(err)
		}
		got = append(got, o.String())
	}
	for _, o := range currentSchema {
		want = append(want, o.String())
	}
	sort.Strings(got)
	sort.Strings(want)
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("currentSchema differs from a fresh file's schema (-listed +fresh):\n%s", d)
	}
}

// damage makes a state file at a fresh path, closes it and runs stmt on it
// with a raw connection, returning the path.
func damage(t *testing.T, stmt string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := openDB(DSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	return path
}

// rowGone deletes the one row of a singleton table despite its guard
// trigger, which it drops and makes again (same name).
func rowGone(table string) string {
	return `DROP TRIGGER ` + table + `_no_delete; DELETE FROM ` + table + `; CREATE TRIGGER ` + table +
		`_no_delete BEFORE DELETE ON ` + table + ` BEGIN SELECT RAISE(ABORT, 'no'); END`
}

// TestDamagedSchemaRefused: a file that lacks a table, an index or a
// trigger of its schema version, or the row of a singleton table, is refused by Open and OpenReadOnly at once,
// with a *DamagedError naming what is missing and saying what to do, and
// Inspect reports the same.
func TestDamagedSchemaRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		stmt     string
		missing  string // in DamagedError.Missing
		inText   string // in the message
		notInMsg string // not in the message
	}{
		{"table", `DROP TABLE leases`, "table leases", "it lacks table leases and ", "index leases_task"},
		{"table without dependents", `DROP TABLE join_tokens`, "table join_tokens", "it lacks table join_tokens and 1 index or trigger of schema version", ""},
		{"index", `DROP INDEX leases_one_active_per_task`, "index leases_one_active_per_task", "it lacks index leases_one_active_per_task of schema version", ""},
		{"trigger", `DROP TRIGGER fencing_counter_increases`, "trigger fencing_counter_increases", "trigger fencing_counter_increases", ""},
		// A singleton's row deleted behind its guard trigger's back (the
		// trigger dropped and made again).
		{"state_info row", rowGone("state_info"), "the row of table state_info", "it lacks the row of table state_info of schema version", ""},
		{"fencing_counter row", rowGone("fencing_counter"), "the row of table fencing_counter", "it lacks the row of table fencing_counter of schema version", ""},
		{"fencing_reservation row", rowGone("fencing_reservation"), "the row of table fencing_reservation", "the row of table fencing_reservation", ""},
		{"put_id row", rowGone("put_id"), "the row of table put_id", "the row of table put_id", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := damage(t, tt.stmt)
			check := func(what string, err error) {
				t.Helper()
				var de *DamagedError
				if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
					t.Fatalf("%s: %v, want a *DamagedError", what, err)
				}
				if !strings.Contains(strings.Join(de.Missing, ","), tt.missing) || de.Version != SchemaVersion() {
					t.Errorf("%s: missing %v, version %d; want %q among them, version %d", what, de.Missing, de.Version, tt.missing, SchemaVersion())
				}
				msg := err.Error()
				for _, want := range []string{"state file " + path + " is damaged", tt.inText, "Restore the file from a backup", "mv " + path + " " + path + ".damaged"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: message %q lacks %q", what, msg, want)
					}
				}
				if tt.notInMsg != "" && strings.Contains(msg, tt.notInMsg) {
					t.Errorf("%s: message %q names %q, which went with its table", what, msg, tt.notInMsg)
				}
			}
			s, err := Open(ctx, path)
			if s != nil {
				s.Close()
			}
			check("Open", err)
			s, err = OpenReadOnly(ctx, path)
			if s != nil {
				s.Close()
			}
			check("OpenReadOnly", err)
			in, err := Inspect(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if in.Problem != nil || in.Integrity != nil {
				t.Errorf("Inspect: problem %v, integrity %v; want only the schema reported", in.Problem, in.Integrity)
			}
			check("Inspect", in.Schema)
		})
	}
}

// TestEmptyFileRefused: a 0-byte state file is refused by Open and
// OpenReadOnly (and reported by Inspect), never re-created, with what to
// do to start fresh.
func TestEmptyFileRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Open":         openErr(Open(ctx, path)),
		"OpenReadOnly": openErr(OpenReadOnly(ctx, path)),
		"Inspect":      in.Problem,
	} {
		var ee *EmptyFileError
		if !errors.As(err, &ee) || !errors.Is(err, ErrNotState) {
			t.Errorf("%s: %v, want an *EmptyFileError", what, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "is empty (0 bytes)") || !strings.Contains(msg, "rm "+path) {
			t.Errorf("%s: message %q does not say it is empty and how to start fresh", what, msg)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file was changed: %v, %v", fi, err)
	}
}

func openErr(s *Store, err error) error {
	if s != nil {
		s.Close()
	}
	return err
}

// TestOpenCreatesNoPartialFile: creating a state leaves no temporary file
// behind, and a file that appears in place is always complete (it is
// linked there after migrating).
func TestOpenCreatesNoPartialFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".new-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, %v; want rw------- (the user's alone)", fi.Mode(), err)
	}
}

// TestOrphanWALRefused: a write-ahead log whose database file is gone is
// not applied to a new state file.
func TestOrphanWALRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path+"-wal", []byte("frames of another file"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := openErr(Open(context.Background(), path))
	if err == nil || !strings.Contains(err.Error(), "its write-ahead log "+path+"-wal does") {
		t.Fatalf("Open beside an orphan -wal: %v, want a refusal naming it", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a state file was created beside the orphan -wal")
	}
}

// TestDiskFullReported: SQLite's "database or disk is full" becomes a
// *DiskFullError naming the file and what to do, and nothing is written.
func TestDiskFullReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	before := serial(t, s)
	// One connection, so the page limit (which is per connection) holds
	// for the write below: the file cannot grow, as on a full disk.
	s.db.SetMaxOpenConns(1)
	if _, err := s.db.Exec(`PRAGMA max_page_count = 1`); err != nil {
		t.Fatal(err)
	}
	err := s.AppendEvent(ctx, Event{Kind: "note", Message: strings.Repeat("x", 1<<20)}, t0)
	var dfe *DiskFullError
	if !errors.As(err, &dfe) || !errors.Is(err, ErrDiskFull) {
		t.Fatalf("write on a full disk: %v, want a *DiskFullError", err)
	}
	msg := err.Error()
	for _, want := range []string{"state file " + s.Path() + ": the disk is full", "database or disk is full", "free space on the file system that holds " + filepath.Dir(s.Path())} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if got := serial(t, s); got != before {
		t.Errorf("serial moved from %d to %d on a failed write", before, got)
	}
}

func TestExplainOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want error // errors.Is target; nil: returned unchanged
	}{
		{"sqlite full", sqliteErr(sqliteFull, "database or disk is full"), ErrDiskFull},
		{"enospc", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, ErrDiskFull},
		{"cantopen", sqliteErr(sqliteCantOpen, "unable to open database file"), ErrNoAccess},
		{"readonly", sqliteErr(sqliteReadOnly|3<<8, "attempt to write a readonly database"), ErrNoAccess},
		{"eacces", &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, ErrNoAccess},
		{"erofs", &os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, ErrNoAccess},
		{"busy", sqliteErr(sqliteBusy, "database is locked"), nil},
		{"other", io.ErrUnexpectedEOF, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			abs := filepath.Join(t.TempDir(), "state.db")
			got := explainOpen("open", abs, abs, tt.err)
			if tt.want == nil {
				if got != tt.err {
					t.Errorf("explainOpen(%v) = %v, want it unchanged", tt.err, got)
				}
				return
			}
			if !errors.Is(got, tt.want) || !errors.Is(got, tt.err) {
				t.Errorf("explainOpen(%v) = %v, want it to wrap %v and the original", tt.err, got, tt.want)
			}
			if !strings.Contains(got.Error(), abs) {
				t.Errorf("explainOpen(%v) = %q, want it to name %s", tt.err, got, abs)
			}
		})
	}
}

// codeErr is an error with an SQLite result code, as the driver returns.
type codeErr struct {
	code int
	msg  string
}

func (e codeErr) Error() string { return fmt.Sprintf("%s (%d)", e.msg, e.code) }
func (e codeErr) Code() int     { return e.code }

func sqliteErr(code int, msg string) error { return codeErr{code, msg} }

const helperUnwritableEnv = "WDC_STATE_TEST_UNWRITABLE"

// TestHelperProcessUnwritable is not a test: TestUnwritableFolderExplained
// runs it, as a user who may not write the folder, with "OP PATH" in the
// environment, and reads what it prints.
func TestHelperProcessUnwritable(t *testing.T) {
	arg := os.Getenv(helperUnwritableEnv)
	if arg == "" {
		t.Skip("helper process only")
	}
	op, path, _ := strings.Cut(arg, " ")
	var err error
	switch op {
	case "open":
		err = openErr(Open(context.Background(), path))
	case "read":
		err = openErr(OpenReadOnly(context.Background(), path))
	}
	fmt.Printf("ERROR: %v\nNOACCESS: %v\n", err, errors.Is(err, ErrNoAccess))
	os.Exit(0)
}

// TestUnwritableFolderExplained: a state file in a folder the user may not
// write is refused with which path and why, not SQLite's "unable to open
// database file (14)". As root (who may write anything), the helper runs as
// nobody.
func TestUnwritableFolderExplained(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "wdc-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) }) //nolint:errcheck // best effort
		os.RemoveAll(base)
	})
	exe := os.Args[0]
	if os.Geteuid() == 0 {
		// nobody must be able to run a copy of the test binary.
		exe = filepath.Join(base, "state.test")
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// An existing state in a folder made read-only afterwards, and a folder
	// where none exists yet.
	existing := filepath.Join(base, "existing", "state.db")
	s, err := Open(context.Background(), existing)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(existing, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(base, "fresh", ".wdc", "state.db")
	for _, d := range []string{filepath.Dir(existing), filepath.Dir(fresh)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		op, path string
		want     string
	}{
		{"open", fresh, "cannot create the state file " + fresh + ": the folder " + filepath.Dir(fresh) + " is not writable"},
		{"open", existing, "cannot open the state file " + existing + ": the folder " + filepath.Dir(existing) + " is not writable"},
		{"read", existing, "cannot read the state file " + existing + ": the folder " + filepath.Dir(existing) + " is not writable"},
	}
	for _, tt := range tests {
		cmd := exec.Command(exe, "-test.run=^TestHelperProcessUnwritable$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperUnwritableEnv+"="+tt.op+" "+tt.path)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", tt.op, tt.path, err, out)
		}
		if !strings.Contains(string(out), "ERROR: "+tt.want) || !strings.Contains(string(out), "NOACCESS: true") {
			t.Errorf("%s %s: got\n%s\nwant an error starting %q that wraps ErrNoAccess", tt.op, tt.path, out, tt.want)
		}
	}
}
