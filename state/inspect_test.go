package state

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspect makes a state file in each condition Inspect tells apart and
// checks what it reports, and that it never changes the file.
func TestInspect(t *testing.T) {
	t.Parallel()
	healthy := func(t *testing.T, path string) {
		t.Helper()
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 { // enough rows for several pages of events
			if err := s.AppendEvent(context.Background(), Event{Kind: "note", Message: strings.Repeat("m", 100+i)}, t0); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	tests := []struct {
		name    string
		make    func(t *testing.T, path string)
		exists  bool
		problem error // errors.Is target of Problem
		corrupt bool  // Integrity is set
		schema  error // errors.Is target of Schema
	}{
		{"missing", func(t *testing.T, path string) {}, false, nil, false, nil},
		{"healthy", healthy, true, nil, false, nil},
		{"empty", func(t *testing.T, path string) { write(t, path, nil) }, true, ErrNotState, false, nil},
		{"not a database", func(t *testing.T, path string) { write(t, path, bytes.Repeat([]byte("not sqlite "), 500)) }, true, ErrNotState, false, nil},
		{"corrupt pages", func(t *testing.T, path string) {
			healthy(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Overwrite every page after the first two (the header page and
			// the schema stay readable) with garbage.
			for i := 2 * 4096; i < len(b); i++ {
				b[i] = byte(i * 7)
			}
			write(t, path, b)
		}, true, nil, true, nil},
		{"index out of step with its table", func(t *testing.T, path string) {
			healthy(t, path)
			// Point the index of 200 events at the (empty) b-tree of another
			// index: the file reads, but integrity_check finds it wrong.
			rawExec(t, path, `PRAGMA writable_schema = ON;
				UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master WHERE name = 'leases_task') WHERE name = 'events_task'`)
		}, true, nil, true, nil},
		{"row breaking a CHECK constraint", func(t *testing.T, path string) {
			healthy(t, path)
			breakConstraint(t, path, `INSERT INTO events (at, kind) VALUES (0, '')`)
		}, true, nil, true, nil},
		{"dropped table", func(t *testing.T, path string) {
			healthy(t, path)
			rawExec(t, path, `DROP TABLE tasks`)
		}, true, nil, false, ErrDamaged},
		{"older schema", func(t *testing.T, path string) {
			healthy(t, path)
			rawExec(t, path, `DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`)
		}, true, nil, false, ErrOutdatedSchema},
		{"newer schema", func(t *testing.T, path string) {
			healthy(t, path)
			rawExec(t, path, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ((SELECT max(version) + 1 FROM schema_migrations), '999_future.sql', 0)`)
		}, true, nil, false, ErrNewerSchema},
		{"no migration table", func(t *testing.T, path string) {
			healthy(t, path)
			rawExec(t, path, `DROP TABLE schema_migrations`)
		}, true, nil, false, ErrNotState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			tt.make(t, path)
			before, _ := os.ReadFile(path)
			in, err := Inspect(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if in.Exists != tt.exists {
				t.Errorf("Exists = %v, want %v", in.Exists, tt.exists)
			}
			if (tt.problem == nil) != (in.Problem == nil) || (tt.problem != nil && !errors.Is(in.Problem, tt.problem)) {
				t.Errorf("Problem = %v, want %v", in.Problem, tt.problem)
			}
			if (in.Integrity != nil) != tt.corrupt {
				t.Errorf("Integrity = %q, want set: %v", in.Integrity, tt.corrupt)
			}
			if (tt.schema == nil) != (in.Schema == nil) || (tt.schema != nil && !errors.Is(in.Schema, tt.schema)) {
				t.Errorf("Schema = %v, want %v", in.Schema, tt.schema)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("Inspect changed the file")
			}
		})
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rawExec runs stmt on the state file at path with a raw connection, as a
// tool other than wdc would.
func rawExec(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := openDB(DSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
