package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LaunchStatus is where a launch's one-time credential stands.
type LaunchStatus string

// Launch statuses.
const (
	// LaunchLaunched: the provider was asked to launch; the launch
	// credential may register one worker.
	LaunchLaunched LaunchStatus = "launched"
	// LaunchRegistered: a worker registered with the credential; it cannot
	// be used again.
	LaunchRegistered LaunchStatus = "registered"
	// LaunchExpired: launch_timeout passed before a worker registered; the
	// credential is revoked.
	LaunchExpired LaunchStatus = "expired"
	// LaunchFailed: the provider could not launch the worker.
	LaunchFailed LaunchStatus = "failed"
)

// Launch is one worker a provider launched for an apply, named by (ApplyID,
// Pool, Seq): Seq is the pool's launch sequence, counting up from 1 within
// one apply, one per launch (a replacement gets a new number). The process
// fields are what the provider recorded when it launched the worker, never
// what the worker reports about itself; a later apply stops a dead apply's
// workers by them.
type Launch struct {
	ApplyID  string
	Pool     string
	Seq      int
	Provider string
	Status   LaunchStatus
	Process  LaunchProcess
	// WorkerID is the worker that registered with the launch's credential
	// ("" until then).
	WorkerID     string
	LaunchedAt   time.Time
	RegisteredAt time.Time // zero until registered
	// EndedAt is when apply saw the worker gone (zero while it may run).
	EndedAt time.Time
}

// LaunchProcess is what a provider recorded about a worker it launched.
type LaunchProcess struct {
	// Handle is the provider's id for the worker (providers.LaunchResponse.ID).
	Handle string
	// Host is the machine it runs on, when the provider knows.
	Host string
	// PID is the process id on Host, 0 when there is none (a pod, a job).
	PID int
	// Start identifies the process's start in a provider-specific way (for
	// local: the kernel's start time of the process), so a reused pid is
	// not mistaken for it.
	Start string
	// Argv is the command line the provider started.
	Argv []string
	// WorkDir is the work folder the worker was launched with.
	WorkDir string
}

// RecordLaunch records a launch about to be made, with status launched and
// the SHA-256 (lowercase hex) of its one-time credential. The process
// fields are set later by SetLaunchProcess. Errors: ErrInvalid for an empty
// apply id or provider, a sequence < 1 or a hash that is not 64 hex
// digits; ErrNotFound when the pool is not in the state; a constraint
// error when (apply, pool, seq) or the hash was recorded before.
func (s *Store) RecordLaunch(ctx context.Context, l Launch, credentialHash string, now time.Time) error {
	return s.write(ctx, func(tx *Tx) error { return tx.RecordLaunch(l, credentialHash, now) })
}

// RecordLaunch is Store.RecordLaunch inside t.
func (t *Tx) RecordLaunch(l Launch, credentialHash string, now time.Time) error {
	switch {
	case l.ApplyID == "" || l.Provider == "":
		return invalidf("launch: apply id and provider are required")
	case l.Seq < 1:
		return invalidf("launch: sequence must be at least 1, have %d", l.Seq)
	case len(credentialHash) != 64:
		return invalidf("launch: the credential hash must be 64 hex digits")
	}
	var one int
	err := t.QueryRowContext(t.ctx, `SELECT 1 FROM pools WHERE name = ?`, l.Pool).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("launch: pool %q: %w", l.Pool, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if _, err := t.ExecContext(t.ctx, `INSERT INTO launches (apply_id, pool, seq, provider, credential_hash, status, launched_at)
		VALUES (?, ?, ?, ?, ?, 'launched', ?)`, l.ApplyID, l.Pool, l.Seq, l.Provider, credentialHash, ms(now)); err != nil {
		return fmt.Errorf("record launch %d of pool %s: %w", l.Seq, l.Pool, err)
	}
	return nil
}

// SetLaunchProcess records what the provider reported about a launched
// worker. Errors: ErrNotFound for an unknown launch.
func (s *Store) SetLaunchProcess(ctx context.Context, applyID, pool string, seq int, p LaunchProcess) error {
	return s.write(ctx, func(tx *Tx) error { return tx.SetLaunchProcess(applyID, pool, seq, p) })
}

// SetLaunchProcess is Store.SetLaunchProcess inside t.
func (t *Tx) SetLaunchProcess(applyID, pool string, seq int, p LaunchProcess) error {
	argv := p.Argv
	if argv == nil {
		argv = []string{}
	}
	js, _ := json.Marshal(argv) // []string always marshals
	res, err := t.ExecContext(t.ctx, `UPDATE launches SET handle = ?, host = ?, pid = ?, process_start = ?, argv = ?, work_dir = ?
		WHERE apply_id = ? AND pool = ? AND seq = ?`, p.Handle, p.Host, p.PID, p.Start, string(js), p.WorkDir, applyID, pool, seq)
	if err != nil {
		return fmt.Errorf("record launch %d of pool %s: %w", seq, pool, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("launch %d of pool %s in apply %s: %w", seq, pool, applyID, ErrNotFound)
	}
	return nil
}

// CloseLaunch ends a launch that did not register: status expired (its
// credential is revoked) or failed. It reports whether it changed the
// launch: false when the launch had already left status launched (a worker
// registered first). Errors: ErrInvalid for another status.
func (s *Store) CloseLaunch(ctx context.Context, applyID, pool string, seq int, status LaunchStatus, now time.Time) (changed bool, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		changed, err = tx.CloseLaunch(applyID, pool, seq, status, now)
		return err
	})
	return changed, err
}

// CloseLaunch is Store.CloseLaunch inside t.
func (t *Tx) CloseLaunch(applyID, pool string, seq int, status LaunchStatus, now time.Time) (bool, error) {
	if status != LaunchExpired && status != LaunchFailed {
		return false, invalidf("launch %d of pool %s: a launch is closed as expired or failed, not %q", seq, pool, status)
	}
	res, err := t.ExecContext(t.ctx, `UPDATE launches SET status = ? WHERE apply_id = ? AND pool = ? AND seq = ? AND status = 'launched'`,
		string(status), applyID, pool, seq)
	if err != nil {
		return false, fmt.Errorf("close launch %d of pool %s: %w", seq, pool, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// EndLaunches records that the workers of the given launch sequences of one
// pool are gone (the provider reported them exited or stopped them), so no
// later apply tries to stop them.
func (s *Store) EndLaunches(ctx context.Context, applyID, pool string, seqs []int, now time.Time) error {
	if len(seqs) == 0 {
		return nil // nothing to write: the serial stays
	}
	return s.write(ctx, func(tx *Tx) error { return tx.EndLaunches(applyID, pool, seqs, now) })
}

// EndLaunches is Store.EndLaunches inside t.
func (t *Tx) EndLaunches(applyID, pool string, seqs []int, now time.Time) error {
	if len(seqs) == 0 {
		return nil
	}
	js, _ := json.Marshal(seqs) // []int always marshals
	if _, err := t.ExecContext(t.ctx, `UPDATE launches SET ended_at = ?
		WHERE apply_id = ? AND pool = ? AND ended_at IS NULL AND seq IN (SELECT value FROM json_each(?))`,
		ms(now), applyID, pool, string(js)); err != nil {
		return fmt.Errorf("end launches of pool %s: %w", pool, err)
	}
	return nil
}

// OpenLaunches returns the launches of applies other than exceptApply
// whose workers were never seen gone, in launch order: what a dead apply
// may have left running.
func (s *Store) OpenLaunches(ctx context.Context, exceptApply string) ([]Launch, error) {
	return s.queryLaunches(ctx, `WHERE ended_at IS NULL AND apply_id <> ?`, exceptApply)
}

// Launches returns the launches of one apply ("" = all), in launch order.
func (s *Store) Launches(ctx context.Context, applyID string) ([]Launch, error) {
	if applyID == "" {
		return s.queryLaunches(ctx, ``)
	}
	return s.queryLaunches(ctx, `WHERE apply_id = ?`, applyID)
}

func (s *Store) queryLaunches(ctx context.Context, where string, args ...any) ([]Launch, error) {
	out := []Launch{}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT apply_id, pool, seq, provider, status, handle, host, pid, process_start, argv, work_dir,
			coalesce(worker_id, ''), launched_at, registered_at, ended_at FROM launches `+where+` ORDER BY launched_at, rowid`, args...)
		if err != nil {
			return fmt.Errorf("read launches: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var l Launch
			var status, argv string
			var launched int64
			var registered, ended sql.NullInt64
			if err := rows.Scan(&l.ApplyID, &l.Pool, &l.Seq, &l.Provider, &status, &l.Process.Handle, &l.Process.Host, &l.Process.PID,
				&l.Process.Start, &argv, &l.Process.WorkDir, &l.WorkerID, &launched, &registered, &ended); err != nil {
				return fmt.Errorf("read launches: %w", err)
			}
			if err := json.Unmarshal([]byte(argv), &l.Process.Argv); err != nil {
				return fmt.Errorf("read launches: argv of launch %d of pool %s: %w", l.Seq, l.Pool, err)
			}
			l.Status = LaunchStatus(status)
			l.LaunchedAt, l.RegisteredAt, l.EndedAt = fromMS(launched), fromNullMS(registered), fromNullMS(ended)
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}
