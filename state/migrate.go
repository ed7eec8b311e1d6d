package state

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// Migrations are numbered SQL files, migrations/NNN_name.sql, embedded in the
// binary and applied forward only, each in the same BEGIN IMMEDIATE
// transaction that records it in schema_migrations.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string // file name
	sql     string
}

var migrationName = regexp.MustCompile(`^([0-9]{3})_[a-z0-9_]+\.sql$`)

// migrations is the embedded list, sorted by version; loadMigrations panics
// on a malformed or non-contiguous list (a build mistake, caught by tests).
var migrations = loadMigrations(migrationFS)

func loadMigrations(fsys fs.FS) []migration {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		m := migrationName.FindStringSubmatch(base)
		if m == nil {
			panic(fmt.Sprintf("state: migration file %s is not named NNN_name.sql", base))
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			panic(fmt.Sprintf("state: migrations must be numbered 1, 2, 3 … without gaps; %s is number %d", m.name, i+1))
		}
	}
	return ms
}

// SchemaVersion is the newest schema version this wdc knows.
func SchemaVersion() int { return len(migrations) }

// NewerSchemaError is returned (wrapping ErrNewerSchema) when a state file
// records a schema version newer than this binary knows.
type NewerSchemaError struct {
	Path    string // the state file as given to Open/OpenReadOnly
	Version int    // newest version recorded in the file
	Known   int    // newest version this wdc knows (SchemaVersion())
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("state file %s was written by a newer wdc (schema version %d; this wdc knows up to %d); upgrade wdc",
		e.Path, e.Version, e.Known)
}

// Unwrap returns ErrNewerSchema.
func (e *NewerSchemaError) Unwrap() error { return ErrNewerSchema }

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY CHECK (version >= 1),
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL -- informational only: SQLite's clock, ms
) STRICT`

// appliedVersions reads schema_migrations in ascending order.
func appliedVersions(ctx context.Context, tx *sql.Tx) ([]int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, rows.Err()
}

// checkVersions validates the applied versions of file p against the
// number of known migrations: they must be 1..n without gaps, and n must not
// exceed known.
func checkVersions(p string, applied []int, known int) error {
	for i, v := range applied {
		if v != i+1 {
			return fmt.Errorf("%w: state file %s records schema versions %v, with a gap before %d", ErrNotState, p, applied, v)
		}
	}
	if n := len(applied); n > known {
		return &NewerSchemaError{Path: p, Version: applied[n-1], Known: known}
	}
	return nil
}

// migrate brings the database to the newest known schema in one BEGIN
// IMMEDIATE transaction that re-reads schema_migrations after taking the
// write lock, so processes racing on a new file apply each migration once.
func migrate(ctx context.Context, db *sql.DB, p string) (err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var others int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE name <> 'schema_migrations' AND name NOT LIKE 'sqlite_%'`).Scan(&others); err != nil {
		return err
	}
	var hasTable int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&hasTable); err != nil {
		return err
	}
	if hasTable == 0 && others > 0 {
		return fmt.Errorf("%w: %s is an SQLite database without schema_migrations", ErrNotState, p)
	}
	if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	if err := checkVersions(p, applied, len(migrations)); err != nil {
		return err
	}
	if len(applied) == len(migrations) {
		if err := verifySchema(ctx, tx, p, len(applied)); err != nil {
			return err
		}
		return tx.Rollback() // nothing to do; do not touch the file
	}
	for _, m := range migrations[len(applied):] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
			VALUES (?, ?, CAST(unixepoch('subsec') * 1000 AS INTEGER))`, m.version, m.name); err != nil {
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
	}
	// A migration that ran on a damaged file may have succeeded without
	// recreating what an earlier version's part lost.
	if err := verifySchema(ctx, tx, p, len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

// checkSchemaReadOnly checks, without writing, that the file is a wdc state
// file at exactly the newest known schema version with every table, index
// and trigger of it.
func checkSchemaReadOnly(ctx context.Context, db *sql.DB, p string) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	_, problem, err := inspectSchema(ctx, tx, p)
	if err != nil {
		return err
	}
	return problem
}
