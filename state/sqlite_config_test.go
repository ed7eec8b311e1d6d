package state

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestStatementJournalInMemory: SQLite took the setting at start-up (it is
// refused once SQLite is initialized, which would mean something opened a
// database before this package's init).
func TestStatementJournalInMemory(t *testing.T) {
	if !statementJournalInMemory {
		t.Fatal("SQLITE_CONFIG_STMTJRNL_SPILL was refused: SQLite was initialized before the state package's init")
	}
}

// TestPageSize: a state file Open creates has pages of 2 KiB (DSN); one
// made with another page size keeps it, and is read and written as before.
func TestPageSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		before int // page size the file is given before it is opened again; 0: none
		want   int
	}{
		{"created by Open", 0, 2048},
		{"made with 4 KiB pages", 4096, 4096},
		{"made with 1 KiB pages", 1024, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if tc.before != 0 {
				db, err := sql.Open("sqlite", DSN(path, false))
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"PRAGMA journal_mode=DELETE", fmt.Sprintf("PRAGMA page_size=%d", tc.before), "VACUUM", "PRAGMA journal_mode=WAL"} {
					if _, err := db.Exec(q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				db.Close()
			}
			s, err = Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			lock, _, err := s.AcquireLock(ctx, LockRequest{Holder: "t", Host: "h", PID: 1, TTL: time.Minute}, now)
			if err != nil {
				t.Fatalf("a write: %v", err)
			}
			if err := s.ReleaseLock(ctx, lock.ID, now); err != nil {
				t.Fatalf("a write: %v", err)
			}
			if err := s.QuickCheck(ctx); err != nil {
				t.Fatal(err)
			}
			var got int
			if err := s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("page size %d, want %d", got, tc.want)
			}
		})
	}
}
