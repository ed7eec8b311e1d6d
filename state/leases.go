package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// GrantRequest asks for a lease of one task for one worker.
type GrantRequest struct {
	Task     string        // task address
	WorkerID string        // an active worker
	Timeout  time.Duration // the task's timeout, > 0
	Grace    time.Duration // lease grace after the timeout, >= 0
	// Prefetched grants the lease unstarted, beyond the worker's capacity:
	// expires_at = now + worker ttl, no hard expiry (UnstartedHardExpiry)
	// until StartLeases starts it.
	Prefetched bool
	// Expected, when set, is what the caller holds the task's row and the
	// worker's to be. ClaimLease then makes its checks and counts the
	// attempt in one UPDATE whose WHERE compares them, reading nothing
	// before it; where the state differs, the UPDATE changes nothing and
	// the claim decides as without it. GrantLease ignores it.
	Expected *ClaimExpectation
}

// ClaimExpectation is what a claimer holds a task and a worker to be
// (GrantRequest.Expected).
type ClaimExpectation struct {
	Attempts int           // the task's attempts counted so far
	DefHash  string        // the task's definition hash
	TTL      time.Duration // the worker's ttl
}

// UnstartedHardExpiry is the hard expiry of an unstarted lease: no bound
// (9999-12-31T23:59:59.999Z) until its start sets start + timeout + grace.
var UnstartedHardExpiry = time.UnixMilli(253402300799999).UTC()

// GrantLease grants a lease in one write transaction:
//
//   - the task's attempts counter goes up by one; that is the lease's attempt;
//   - the fencing counter goes up by one; that is the lease's token;
//   - hard_expires_at = now + Timeout + Grace and
//     expires_at = min(now + worker ttl, hard_expires_at) (docs/design.md §3);
//   - the lease and the attempt row are inserted, the task becomes running
//     and an EventLeased event is appended.
//
// Errors: ErrInvalid for Timeout <= 0 or Grace < 0; ErrNotFound for an
// unknown task or worker; ErrTaskFinished when the task's status is final;
// ErrWorkerNotActive when the worker is draining, stale or gone;
// ErrLeaseHeld when the task already has an active lease (the database's
// unique index refuses the second one). On error nothing changes.
func (s *Store) GrantLease(ctx context.Context, req GrantRequest, now time.Time) (l Lease, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		l, err = tx.GrantLease(req, now)
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	return l, nil
}

// GrantLease is Store.GrantLease inside t: it checks the task and worker,
// counts the attempt, takes the next fencing token and inserts the lease,
// the attempt row and the "leased" event.
func (t *Tx) GrantLease(req GrantRequest, now time.Time) (Lease, error) {
	if req.Timeout <= 0 {
		return Lease{}, invalidf("grant lease for %s: timeout must be positive, have %s", req.Task, req.Timeout)
	}
	if req.Grace < 0 {
		return Lease{}, invalidf("grant lease for %s: grace must not be negative, have %s", req.Task, req.Grace)
	}
	var status, defHash string
	var attempts int
	err := t.QueryRowContext(t.ctx, `SELECT status, def_hash, attempts FROM tasks WHERE address = ?`, req.Task).Scan(&status, &defHash, &attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("grant lease: task %s: %w", req.Task, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("grant lease for %s: %w", req.Task, err)
	}
	if TaskStatus(status).Finished() {
		return Lease{}, fmt.Errorf("grant lease: task %s is %s: %w", req.Task, status, ErrTaskFinished)
	}
	var wstatus string
	var ttlMS int64
	err = t.QueryRowContext(t.ctx, `SELECT status, ttl_ms FROM workers WHERE id = ?`, req.WorkerID).Scan(&wstatus, &ttlMS)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("grant lease for %s: worker %q: %w", req.Task, req.WorkerID, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("grant lease for %s: %w", req.Task, err)
	}
	if WorkerStatus(wstatus) != WorkerActive {
		return Lease{}, fmt.Errorf("grant lease for %s: worker %q is %s: %w", req.Task, req.WorkerID, wstatus, ErrWorkerNotActive)
	}
	if err := t.countAttempt(req.Task, now); err != nil {
		return Lease{}, err
	}
	return grantLeaseTx(t.ctx, t, req, defHash, ttlMS, attempts+1, now)
}

// grantLeaseTx makes the writes of a grant after its attempt was counted
// (as number attempt): it takes the next fencing token and inserts the
// lease, the attempt row and the "leased" event.
func grantLeaseTx(ctx context.Context, tx *Tx, req GrantRequest, defHash string, ttlMS int64, attempt int, now time.Time) (Lease, error) {
	nowMS := ms(now)
	hard := nowMS + durMS(req.Timeout) + durMS(req.Grace)
	unstarted := 0
	if req.Prefetched {
		hard, unstarted = ms(UnstartedHardExpiry), 1
	}
	expires := min(nowMS+ttlMS, hard)
	// The lease takes the counter's next token, and its trigger
	// (leases_take_token, migration 013) moves the counter to it under the
	// counter's guard: one statement takes the token and writes the lease.
	// The token is the row's key (leases.token is its rowid), which the
	// driver hands back without a RETURNING clause and its temporary table.
	var token int64
	res, err := tx.ExecContext(ctx, `INSERT INTO leases (token, task, def_hash, worker_id, attempt, status,
			granted_at, renewed_at, expires_at, hard_expires_at, unstarted)
		VALUES ((SELECT last_token + 1 FROM fencing_counter WHERE id = 1), ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)`,
		req.Task, defHash, req.WorkerID, attempt, nowMS, nowMS, expires, hard, unstarted)
	if err == nil {
		token, err = res.LastInsertId()
	}
	switch {
	case isUniqueViolation(err, "leases.task"):
		return Lease{}, fmt.Errorf("grant lease for %s: %w", req.Task, ErrLeaseHeld)
	case err != nil && strings.Contains(err.Error(), "fencing token beyond the reserved block"):
		return Lease{}, fmt.Errorf("grant lease for %s: %w", req.Task, ErrTokensNotReserved)
	case err != nil:
		return Lease{}, fmt.Errorf("grant lease for %s: %w", req.Task, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (task, number, worker_id, fencing_token, started_at)
		VALUES (?, ?, ?, ?, ?)`, req.Task, attempt, req.WorkerID, token, nowMS); err != nil {
		return Lease{}, fmt.Errorf("grant lease for %s: record attempt %d: %w", req.Task, attempt, err)
	}
	if err := appendEvent(ctx, tx, Event{Kind: EventLeased, Task: req.Task, WorkerID: req.WorkerID,
		Token: token, Message: fmt.Sprintf("attempt %d", attempt)}, now); err != nil {
		return Lease{}, err
	}
	return Lease{
		Token: token, Task: req.Task, DefHash: defHash, WorkerID: req.WorkerID, Attempt: attempt,
		Status: LeaseActive, GrantedAt: fromMS(nowMS), RenewedAt: fromMS(nowMS),
		ExpiresAt: fromMS(expires), HardExpiresAt: fromMS(hard), Unstarted: req.Prefetched,
	}, nil
}

const leaseColumns = `token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at,
	expires_at, hard_expires_at, ended_at, unstarted`

func scanLease(r scanner) (Lease, error) {
	var l Lease
	var status string
	var granted, renewed, expires, hard int64
	var ended sql.NullInt64
	if err := r.Scan(&l.Token, &l.Task, &l.DefHash, &l.WorkerID, &l.Attempt, &status,
		&granted, &renewed, &expires, &hard, &ended, &l.Unstarted); err != nil {
		return Lease{}, err
	}
	l.Status = LeaseStatus(status)
	l.GrantedAt = fromMS(granted)
	l.RenewedAt = fromMS(renewed)
	l.ExpiresAt = fromMS(expires)
	l.HardExpiresAt = fromMS(hard)
	l.EndedAt = fromNullMS(ended)
	return l, nil
}

func queryLeases(ctx context.Context, tx *Tx, where string, args ...any) ([]Lease, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases `+where+` ORDER BY token`, args...)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	out := []Lease{}
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("read leases: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Leases returns every lease ever granted for the task (task "" = all
// tasks), in ascending token order, whatever its status.
func (s *Store) Leases(ctx context.Context, task string) (out []Lease, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		out, err = tx.Leases(task)
		return err
	})
	return out, err
}

// Leases is Store.Leases inside t.
func (t *Tx) Leases(task string) ([]Lease, error) {
	if task == "" {
		return queryLeases(t.ctx, t, ``)
	}
	return queryLeases(t.ctx, t, `WHERE task = ?`, task)
}

// Lease returns the lease with the given fencing token. Errors: ErrNotFound.
func (s *Store) Lease(ctx context.Context, token int64) (l Lease, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		l, err = tx.Lease(token)
		return err
	})
	return l, err
}

// Lease is Store.Lease inside t.
func (t *Tx) Lease(token int64) (Lease, error) {
	l, err := scanLease(t.QueryRowContext(t.ctx, `SELECT `+leaseColumns+` FROM leases WHERE token = ?`, token))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("lease %d: %w", token, ErrNotFound)
	}
	return l, err
}

// LastToken returns the last fencing token granted (0 before the first).
func (s *Store) LastToken(ctx context.Context) (int64, error) {
	var t int64
	err := s.read(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, `SELECT last_token FROM fencing_counter WHERE id = 1`).Scan(&t)
	})
	return t, err
}

// Attempts returns the attempts of the task in ascending number order, each
// with the artifacts its accepted result bound (empty, not an error, for
// an unknown task).
func (s *Store) Attempts(ctx context.Context, task string) ([]Attempt, error) {
	out := []Attempt{}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT task, number, worker_id, fencing_token, started_at, ended_at,
				exit_code, signal, failure_class, error, stdout_path, stderr_path
			FROM attempts WHERE task = ? ORDER BY number`, task)
		if err != nil {
			return fmt.Errorf("read attempts of %s: %w", task, err)
		}
		defer rows.Close()
		for rows.Next() {
			var a Attempt
			var started int64
			var ended, exit sql.NullInt64
			var class sql.NullString
			if err := rows.Scan(&a.Task, &a.Number, &a.WorkerID, &a.Token, &started, &ended, &exit,
				&a.Signal, &class, &a.Error, &a.StdoutPath, &a.StderrPath); err != nil {
				return fmt.Errorf("read attempts of %s: %w", task, err)
			}
			a.StartedAt = fromMS(started)
			a.EndedAt = fromNullMS(ended)
			if exit.Valid {
				c := int(exit.Int64)
				a.ExitCode = &c
			}
			a.FailureClass = FailureClass(class.String)
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for i := range out {
			if out[i].Artifacts, err = queryArtifacts(ctx, tx, `WHERE fencing_token = ?`, out[i].Token); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
