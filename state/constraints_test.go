package state

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// breakConstraint runs stmt on the state file at path with SQLite's CHECK
// constraints off, as flipped bytes on the disk could leave a row: the
// file's pages all parse, and a row breaks a CHECK constraint.
func breakConstraint(t *testing.T, path, stmt string) {
	t.Helper()
	rawExec(t, path, `PRAGMA ignore_check_constraints = ON; `+stmt+`; PRAGMA wal_checkpoint(TRUNCATE)`)
}

// TestQuickCheckConstraints checks that QuickCheck finds a row that breaks
// a CHECK constraint on a read-only Store (where SQLite verifies none) as
// on a writable one, in the same words, and that a read-only Store's
// check leaves the file as it was.
func TestQuickCheckConstraints(t *testing.T) {
	t.Parallel()
	task := `INSERT INTO tasks (address, name, def_hash, spec, status, max_attempts, max_lost, created_at, updated_at)
		VALUES ('task.a', 'a', 'cd', '{"command":["true"]}', 'queued', 1, 0, 0, 0)`
	tests := []struct {
		name   string
		damage string // run with CHECK constraints off; "" for none
		want   string // the CorruptError's detail; "" for none
	}{
		{"healthy", "", ""},
		{"spec that is not JSON", `UPDATE tasks SET spec = '{"c' || char(2) || 'mmand":' WHERE address = 'task.a'`, "quick_check: CHECK constraint failed in tasks"},
		{"unknown status", `UPDATE tasks SET status = 'sleeping' WHERE address = 'task.a'`, "quick_check: CHECK constraint failed in tasks"},
		{"negative attempts", `UPDATE tasks SET attempts = -1 WHERE address = 'task.a'`, "quick_check: CHECK constraint failed in tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			rawExec(t, path, task)
			if tt.damage != "" {
				breakConstraint(t, path, tt.damage)
			}
			var words []string
			for _, open := range []func(context.Context, string) (*Store, error){OpenReadOnly, Open} {
				before, _ := os.ReadFile(path)
				s, err := open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				err = s.QuickCheck(ctx)
				s.Close()
				var ce *CorruptError
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("read-only %v: QuickCheck = %v, want nil", s.readOnly, err)
				case tt.want != "" && (!errors.As(err, &ce) || ce.Detail != tt.want):
					t.Errorf("read-only %v: QuickCheck = %v, want a *CorruptError with %q", s.readOnly, err, tt.want)
				}
				if err != nil {
					words = append(words, err.Error())
				}
				if after, _ := os.ReadFile(path); s.readOnly && !bytes.Equal(before, after) {
					t.Error("a read-only QuickCheck changed the file")
				}
			}
			if len(words) == 2 && words[0] != words[1] {
				t.Errorf("read-only and writable QuickCheck differ:\n%s\n%s", words[0], words[1])
			}
		})
	}
}
