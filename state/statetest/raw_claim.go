package statetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// RawClaimer performs claims the way docs/sqlite.md measures the physical
// limit of the state file, with nothing else around them: BEGIN
// IMMEDIATE; pick the next queued task (by address); make it running;
// insert the lease with the counter's next token (INSERT … RETURNING; the
// lease's trigger moves the counter); COMMIT.
// It writes no attempt row, no event and no serial bump, and does not
// check the worker. Concurrent claims are serialized in Go (one
// transaction at a time, as SQLite allows). It must not claim while a
// Store writes to the same file: the two would wait on each other's lock.
type RawClaimer struct {
	mu sync.Mutex
	db *sql.DB
}

// NewRawClaimer opens a RawClaimer on the state file at path, which a
// state.Store has created and migrated, with a connection of its own
// (state.DSN, read-write); it is closed when tb's test ends. It fails tb
// when the file cannot be opened.
func NewRawClaimer(tb testing.TB, path string) *RawClaimer {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	// The driver "sqlite" is registered by package state's dialector
	// (github.com/glebarez/sqlite).
	db, err := sql.Open("sqlite", state.DSN(abs, false))
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return &RawClaimer{db: db}
}

// Claim claims the next queued task for workerID with a lease of ttl
// (whole milliseconds) from now, and returns the lease's fencing token; ok is false when no
// task is queued (nothing changed).
func (r *RawClaimer) Claim(ctx context.Context, workerID string, ttl time.Duration, now time.Time) (token int64, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tx, err := r.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		return 0, false, err
	}
	defer func() {
		if err != nil || !ok {
			_ = tx.Rollback()
		}
	}()
	var task, defHash string
	err = tx.QueryRowContext(ctx, `SELECT address, def_hash FROM tasks WHERE status = 'queued' ORDER BY address LIMIT 1`).Scan(&task, &defHash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	nowMS := now.UnixMilli()
	var attempt int
	if err = tx.QueryRowContext(ctx, `UPDATE tasks SET status = 'running', attempts = attempts + 1, updated_at = ?
		WHERE address = ? RETURNING attempts`, nowMS, task).Scan(&attempt); err != nil {
		return 0, false, err
	}
	exp := nowMS + ttl.Milliseconds()
	if err = tx.QueryRowContext(ctx, `INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
		VALUES ((SELECT last_token + 1 FROM fencing_counter WHERE id = 1), ?, ?, ?, ?, 'active', ?, ?, ?, ?) RETURNING token`,
		task, defHash, workerID, attempt, nowMS, nowMS, exp, exp).Scan(&token); err != nil {
		return 0, false, fmt.Errorf("raw claim of %s: %w", task, err)
	}
	if err = tx.Commit(); err != nil {
		return 0, false, err
	}
	return token, true, nil
}
