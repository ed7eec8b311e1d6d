package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxIntegrityLines bounds how many problems Inspect keeps from PRAGMA
// integrity_check (SQLite stops after as many).
const maxIntegrityLines = 20

// Inspection is what Inspect found out about a state file, without
// changing it. When Problem is set, nothing else was checked.
type Inspection struct {
	Path   string // the state file as given
	Exists bool   // false: there is no file (nothing else is set)
	Size   int64  // bytes of the main file

	// Problem is why the file cannot be opened as a database at all: it is
	// not a regular file (wrapping a *regularfile.NotRegularError: a FIFO,
	// a device, a directory), is empty (*EmptyFileError), cannot be read
	// (*AccessError) or is not an SQLite database. Nil when it opened.
	Problem error

	// Integrity lists what SQLite's PRAGMA integrity_check reported (at
	// most 20 lines), then, when it said "ok", what quick_check reported
	// of a copy where the CHECK constraints are in force (a row that
	// breaks one: "CHECK constraint failed in tasks"), or the error that
	// stopped them; nil when both said "ok".
	Integrity []string

	// SchemaRead reports whether the schema could be read (false when
	// Problem is set, or the file is too damaged to read it); Version is
	// the schema version the file records (0 when none), Known the newest
	// this wdc knows (SchemaVersion()).
	SchemaRead     bool
	Version, Known int
	// Schema is why the schema is not one this wdc can use as it is:
	// *DamagedError (tables, indexes or triggers missing), *NewerSchemaError,
	// ErrOutdatedSchema (wrapped; a writing command upgrades it) or
	// ErrNotState (wrapped). Nil when it is complete and current.
	Schema error
}

// Inspect checks a state file without writing it (SQLite mode=ro, as
// OpenReadOnly): that it exists, is a non-empty regular file SQLite can
// read, passes PRAGMA integrity_check and its CHECK constraints (checked
// on an in-memory copy: see checkConstraints), records a schema version
// this wdc knows and has every table, index and trigger of it. A missing file is
// not an error (Exists is false). What it finds is in the Inspection; the
// error is for when it could not look (ctx done, path unusable).
func Inspect(ctx context.Context, path string) (*Inspection, error) {
	in := &Inspection{Path: path, Known: SchemaVersion()}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return in, nil
	case err != nil:
		in.Exists = true
		in.Problem = openError("read", abs, path, fmt.Errorf("state file %s: %w", path, err))
		return in, nil
	}
	in.Exists, in.Size = true, fi.Size()
	switch {
	case notRegular(abs, path, fi) != nil:
		in.Problem = notRegular(abs, path, fi)
		return in, nil
	case fi.Size() == 0 && !hasWAL(abs):
		in.Problem = &EmptyFileError{Path: path}
		return in, nil
	}
	db, err := openDB(DSN(abs, true))
	if err != nil {
		if sqliteCode(err)&0xff == sqliteCorrupt {
			// Too damaged even to read its schema.
			in.Integrity = []string{err.Error()}
		} else {
			in.Problem = notDatabase(path, openError("read", abs, path, err))
		}
		return in, nil
	}
	defer db.Close()

	err = retryBusy(ctx, func() error {
		var err error
		in.Integrity, err = integrityCheck(ctx, db)
		if err == nil && in.Integrity == nil {
			// On this read-only connection SQLite verifies no CHECK
			// constraint: a copy it can write does (constraints.go).
			in.Integrity, err = checkConstraints(ctx, abs, maxIntegrityLines)
			if errors.Is(err, errTooLargeToCopy) {
				err = nil // integrity_check is what can be checked
			}
		}
		return err
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case sqliteCode(err)&0xff == sqliteCorrupt:
		in.Integrity = []string{err.Error()}
	default:
		in.Problem = notDatabase(path, openError("read", abs, path, err))
		return in, nil
	}

	err = retryBusy(ctx, func() error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // read-only
		in.Version, in.Schema, err = inspectSchema(ctx, tx, path)
		return err
	})
	in.SchemaRead = true
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		in.Schema = fmt.Errorf("read the schema of %s: %w", path, err)
	}
	return in, nil
}

// integrityCheck runs PRAGMA integrity_check and returns its lines, or nil
// when it reported "ok".
func integrityCheck(ctx context.Context, db *sql.DB) ([]string, error) {
	return checkLines(ctx, db, "integrity_check", maxIntegrityLines)
}

// inspectSchema reads the schema version of the file p and checks it as
// checkSchemaReadOnly does, returning what it found as problem rather
// than failing; err is for a query that failed.
func inspectSchema(ctx context.Context, tx *sql.Tx, p string) (version int, problem, err error) {
	var hasTable int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&hasTable); err != nil {
		return 0, nil, err
	}
	if hasTable == 0 {
		return 0, fmt.Errorf("%w: %s has no schema_migrations table", ErrNotState, p), nil
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return 0, nil, err
	}
	if n := len(applied); n > 0 {
		version = applied[n-1]
	}
	if err := checkVersions(p, applied, len(migrations)); err != nil {
		return version, err, nil
	}
	if len(applied) < len(migrations) {
		return version, fmt.Errorf("%w: state file %s has schema version %d and this wdc writes version %d; any writing command (such as `wdc apply`) upgrades it",
			ErrOutdatedSchema, p, len(applied), len(migrations)), nil
	}
	var damaged *DamagedError
	if err := verifySchema(ctx, tx, p, version); errors.As(err, &damaged) {
		return version, err, nil
	} else if err != nil {
		return version, nil, err
	}
	return version, nil, nil
}

// notDatabase rewrites SQLite's "file is not a database" for the state
// file p into a sentence that says what to do.
func notDatabase(p string, err error) error {
	if sqliteCode(err)&0xff != sqliteNotADB {
		return err
	}
	return fmt.Errorf("%w: state file %s is not an SQLite database (%v): check --state; to start a fresh state instead, move it away (mv %s %s.damaged)",
		ErrNotState, p, err, p, p)
}
