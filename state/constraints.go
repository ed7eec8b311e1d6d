package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
)

// errTooLargeToCopy: the state file is larger than an in-memory database
// may grow (SQLite's memdb VFS: 1 GiB), so checkConstraints could not
// check it.
var errTooLargeToCopy = errors.New("the state file is too large to copy into memory for its check")

// checkConstraints runs PRAGMA quick_check(limit) on a copy of the state
// file abs and returns its lines, or nil when it said "ok".
//
// Why a copy: SQLite does not parse a table's CHECK constraints when it
// opens the file read-only (mode=ro: it cannot write, so it need not
// enforce them), and so neither integrity_check nor quick_check verifies
// them on a read-only connection. A row whose spec is no longer JSON
// (flipped bytes) passes them there, while apply's check, on a writable
// connection, refuses the file. The copy is made with VACUUM INTO, from a
// read-only connection (the file is never written), into an in-memory
// database (SQLite's memdb VFS: nothing reaches a disk), which this
// process can write: there the CHECK constraints are in force and
// quick_check reports a row that breaks one ("CHECK constraint failed in
// tasks"), as it does for apply. The copy lives only while this runs.
//
// An error is for a copy that could not be made: errTooLargeToCopy for a
// file too large for it (the caller checks what it can on the file
// itself), SQLite's SQLITE_CORRUPT for a file too damaged to copy.
func checkConstraints(ctx context.Context, abs string, limit int) ([]string, error) {
	name := "file:/wdc-check-" + randomHex(8) + "?vfs=memdb"
	// The in-memory copy exists while a connection holds it open.
	copyDB, err := openDB(name)
	if err != nil {
		return nil, fmt.Errorf("open an in-memory database for the check: %w", err)
	}
	defer copyDB.Close()
	copyDB.SetMaxOpenConns(1)
	held, err := copyDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open an in-memory database for the check: %w", err)
	}
	defer held.Close()
	if err := held.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("open an in-memory database for the check: %w", err)
	}

	// mode=ro without query_only: query_only refuses VACUUM INTO, while
	// mode=ro alone already keeps the state file from being written.
	src, err := openDB("file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?mode=ro")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	src.SetMaxOpenConns(1)
	err = retryBusy(ctx, func() error {
		_, err := src.ExecContext(ctx, `VACUUM INTO ?`, name)
		return err
	})
	if sqliteCode(err)&0xff == sqliteFull {
		return nil, errTooLargeToCopy
	}
	if err != nil {
		return nil, err
	}
	return quickCheckLines(ctx, held, limit)
}

// quickCheckLines runs PRAGMA quick_check(limit) on conn and returns its
// lines, or nil when it said "ok".
func quickCheckLines(ctx context.Context, conn *sql.Conn, limit int) ([]string, error) {
	return checkLines(ctx, conn, "quick_check", limit)
}

// checkLines runs PRAGMA check(limit) (integrity_check or quick_check)
// and returns its lines, or nil when it said "ok".
func checkLines(ctx context.Context, q querier, check string, limit int) ([]string, error) {
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`PRAGMA %s(%d)`, check, limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(lines) == 1 && lines[0] == "ok" {
		return nil, nil
	}
	return lines, nil
}
