package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// RawClaimForBenchmark performs one claim the way docs/sqlite.md measures the
// physical limit of the state file, with nothing else around it: BEGIN
// IMMEDIATE; pick the next queued task (by address); make it running;
// bump the fencing counter (UPDATE … RETURNING); insert the lease; COMMIT.
// It writes no attempt row, no event and no serial bump, and does not check
// the worker: it exists only so benchmarks can compare the coordinator with
// the raw loop in the same run. Concurrent calls are serialized in Go
// (one transaction at a time, as SQLite allows); it must not run
// concurrently with other writes through the same Store. ok is false when
// no task is queued.
func (s *Store) RawClaimForBenchmark(ctx context.Context, workerID string, ttl time.Duration, now time.Time) (token int64, ok bool, err error) {
	if s.readOnly {
		return 0, false, ErrReadOnly
	}
	s.rawMu.Lock()
	defer s.rawMu.Unlock()
	sqlTx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return 0, false, err
	}
	tx := &Tx{tx: sqlTx, ctx: ctx}
	defer func() {
		if err != nil || !ok {
			_ = sqlTx.Rollback()
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
	var attempt int
	if err = tx.QueryRowContext(ctx, `UPDATE tasks SET status = 'running', attempts = attempts + 1, updated_at = ?
		WHERE address = ? RETURNING attempts`, ms(now), task).Scan(&attempt); err != nil {
		return 0, false, err
	}
	if err = tx.QueryRowContext(ctx, `UPDATE fencing_counter SET last_token = last_token + 1 WHERE id = 1 RETURNING last_token`).Scan(&token); err != nil {
		return 0, false, err
	}
	exp := ms(now) + durMS(ttl)
	if _, err = tx.ExecContext(ctx, `INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
		VALUES (?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)`, token, task, defHash, workerID, attempt, ms(now), ms(now), exp, exp); err != nil {
		return 0, false, fmt.Errorf("raw claim of %s: %w", task, err)
	}
	if err = sqlTx.Commit(); err != nil {
		return 0, false, err
	}
	return token, true, nil
}
