package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SweepResult lists what one Sweep changed.
type SweepResult struct {
	// Expired holds one outcome per lease the sweep expired (its attempt
	// lost), in token order.
	Expired []AttemptOutcome
	// Stale holds the workers marked stale, as they are now.
	Stale []Worker
}

// Sweep is the coordinator's periodic pass (docs/design.md §2), in one write
// transaction, run only when there is something to do (a read checks
// first, so an idle sweep does not bump the serial):
//
//   - every active lease with expires_at <= now becomes expired; its attempt
//     ends with failure class lost; an EventExpired event names the lease;
//     the task spends one of its max_lost budget and gets a retry directive
//     of kind lost, due at once (backoff is for failures), or, with the
//     budget spent, fails
//     ("lost N times; its lost budget of M is spent") and its Downstream is cancelled — see settle in
//     AcceptResult;
//   - every active or draining worker whose last heartbeat is ttl or more
//     ago (last_heartbeat_at + ttl <= now) becomes stale, with an
//     EventStale event.
//
// Sweep never marks a task succeeded (docs/design.md §3 invariant 5).
func (s *Store) Sweep(ctx context.Context, now time.Time, pol PolicyFunc) (SweepResult, error) {
	due, err := s.SweepDue(ctx, now)
	if err != nil {
		return SweepResult{}, err
	}
	if !due {
		return SweepResult{}, nil
	}
	var res SweepResult
	err = s.write(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.sweep(now, pol)
		return err
	})
	if err != nil {
		return SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// Sweep is Store.Sweep inside t, without its read-only check that
// anything is due (the caller checks Store.SweepDue before it writes).
func (t *Tx) Sweep(now time.Time, pol PolicyFunc) (SweepResult, error) {
	res, err := t.sweep(now, pol)
	if err != nil {
		return SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// sweep is Sweep's write, its errors without the "sweep: " prefix.
func (t *Tx) sweep(now time.Time, pol PolicyFunc) (SweepResult, error) {
	var res SweepResult
	leases, err := queryLeases(t.ctx, t, `WHERE status = 'active' AND expires_at <= ?`, ms(now))
	if err != nil {
		return SweepResult{}, err
	}
	for _, l := range leases {
		why := fmt.Sprintf("lease %d expired at %s: no heartbeat from worker %s within its ttl", l.Token,
			l.ExpiresAt.Format(time.RFC3339Nano), l.WorkerID)
		if !l.ExpiresAt.Before(l.HardExpiresAt) {
			why = fmt.Sprintf("lease %d reached its hard expiry at %s (timeout + lease grace) without a result", l.Token,
				l.HardExpiresAt.Format(time.RFC3339Nano))
		}
		out, err := t.lose(l, LeaseExpired, EventExpired, why, pol.of(l.Task), now)
		if err != nil {
			return SweepResult{}, err
		}
		res.Expired = append(res.Expired, out)
	}
	rows, err := t.QueryContext(t.ctx, `UPDATE workers SET status = 'stale'
		WHERE status IN ('active', 'draining') AND last_heartbeat_at + ttl_ms <= ? RETURNING id`, ms(now))
	if err != nil {
		return SweepResult{}, fmt.Errorf("sweep: mark stale workers: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return SweepResult{}, fmt.Errorf("sweep: mark stale workers: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return SweepResult{}, fmt.Errorf("sweep: mark stale workers: %w", err)
	}
	for _, id := range ids {
		w, err := scanWorker(t.QueryRowContext(t.ctx, `SELECT `+workerColumns+` FROM workers WHERE id = ?`, id))
		if err != nil {
			return SweepResult{}, fmt.Errorf("sweep: read worker %s: %w", id, err)
		}
		if err := appendEvent(t.ctx, t, Event{Kind: EventStale, WorkerID: id,
			Message: fmt.Sprintf("no heartbeat since %s (ttl %s)", w.LastHeartbeatAt.Format(time.RFC3339Nano), w.TTL)}, now); err != nil {
			return SweepResult{}, err
		}
		res.Stale = append(res.Stale, w)
	}
	return res, nil
}

// SweepDue reports, from a read, whether Sweep at now would change
// anything: a lease past its expiry or a worker past its ttl. A sweep
// that finds nothing to do thus never takes the write lock.
func (s *Store) SweepDue(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	err := s.read(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM leases WHERE status = 'active' AND expires_at <= ?1)
			OR EXISTS (SELECT 1 FROM workers WHERE status IN ('active', 'draining') AND last_heartbeat_at + ttl_ms <= ?1)`,
			ms(now)).Scan(&due)
	})
	if err != nil {
		return false, fmt.Errorf("sweep: %w", err)
	}
	return due, nil
}

// lose ends an active lease with status (expired or revoked), its attempt
// with class lost, appends the lease's event and settles the task. An
// unstarted lease goes back at no cost instead (returnUnstarted).
func (t *Tx) lose(l Lease, status LeaseStatus, kind, why string, pol TaskPolicy, now time.Time) (AttemptOutcome, error) {
	if l.Unstarted {
		return t.returnUnstarted(l, status, why, now)
	}
	if err := endLeaseTx(t.ctx, t, l, status, FailureClassLost, why, now); err != nil {
		return AttemptOutcome{}, err
	}
	if err := appendEvent(t.ctx, t, Event{Kind: kind, Task: l.Task, WorkerID: l.WorkerID, Token: l.Token,
		Message: fmt.Sprintf("attempt %d: %s", l.Attempt, why)}, now); err != nil {
		return AttemptOutcome{}, err
	}
	return t.settle(l, FailureClassLost, why, pol, nil, now)
}

// RevokeResult lists what RevokeAllLeases changed.
type RevokeResult struct {
	Revoked []AttemptOutcome // one per lease revoked, in token order
	Gone    int              // workers marked gone
}

// RevokeAllLeases is what apply does when it takes over the lock of a dead
// apply (docs/design.md §3 invariant 9), in one write transaction: every active
// lease becomes revoked, its attempt ends lost (error: reason), and its task
// spends one of max_lost: it becomes queued with a lost retry directive due
// at once (not_before = now), or failed when the budget is spent. Every
// worker that is not gone becomes gone. Dependents of a task failed this
// way are not cancelled here (the new apply plans them). An EventRevoked
// event is appended per lease, one EventWorker event for the workers.
func (s *Store) RevokeAllLeases(ctx context.Context, reason string, now time.Time) (RevokeResult, error) {
	var res RevokeResult
	// A read first: with no active lease and no live worker there is
	// nothing to write, and the serial must not move (a saved plan stays
	// fresh across an apply that had nothing to recover).
	var due bool
	if err := s.read(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM leases WHERE status = 'active')
			OR EXISTS (SELECT 1 FROM workers WHERE status <> 'gone')`).Scan(&due)
	}); err != nil {
		return RevokeResult{}, fmt.Errorf("revoke leases: %w", err)
	}
	if !due {
		return res, nil
	}
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.revokeAllLeases(reason, now)
		return err
	})
	if err != nil {
		return RevokeResult{}, fmt.Errorf("revoke leases: %w", err)
	}
	return res, nil
}

// RevokeAllLeases is Store.RevokeAllLeases inside t, without its read-only
// check that anything is to be revoked.
func (t *Tx) RevokeAllLeases(reason string, now time.Time) (RevokeResult, error) {
	res, err := t.revokeAllLeases(reason, now)
	if err != nil {
		return RevokeResult{}, fmt.Errorf("revoke leases: %w", err)
	}
	return res, nil
}

// revokeAllLeases is RevokeAllLeases' write, its errors without the
// "revoke leases: " prefix.
func (t *Tx) revokeAllLeases(reason string, now time.Time) (RevokeResult, error) {
	var res RevokeResult
	leases, err := queryLeases(t.ctx, t, `WHERE status = 'active'`)
	if err != nil {
		return RevokeResult{}, err
	}
	for _, l := range leases {
		out, err := t.lose(l, LeaseRevoked, EventRevoked, "lease revoked: "+reason, TaskPolicy{}, now)
		if err != nil {
			return RevokeResult{}, err
		}
		res.Revoked = append(res.Revoked, out)
	}
	r, err := t.ExecContext(t.ctx, `UPDATE workers SET status = 'gone' WHERE status <> 'gone'`)
	if err != nil {
		return RevokeResult{}, fmt.Errorf("mark workers gone: %w", err)
	}
	n, _ := r.RowsAffected()
	res.Gone = int(n)
	if n > 0 {
		if err := appendEvent(t.ctx, t, Event{Kind: EventWorker, Message: fmt.Sprintf("%d workers gone: %s", n, reason)}, now); err != nil {
			return RevokeResult{}, err
		}
	}
	return res, nil
}

// LoseWorker is what the coordinator does when a worker's provider reports
// it gone (its process exited, its pod or job ended): in one write
// transaction the worker becomes gone and each of its active leases is
// revoked, its attempt lost with error reason; the task spends one of its
// max_lost budget and is queued with a lost retry directive due at once,
// or fails when the budget is spent (its Downstream, from pol, cancelled).
// An EventRevoked event is appended per lease and an EventWorker event for
// the worker. It returns one outcome per lease revoked, in token order.
// Errors: ErrNotFound for an unknown worker.
func (s *Store) LoseWorker(ctx context.Context, id, reason string, pol PolicyFunc, now time.Time) ([]AttemptOutcome, error) {
	var out []AttemptOutcome
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.loseWorker(id, reason, pol, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lose worker: %w", err)
	}
	return out, nil
}

// LoseWorker is Store.LoseWorker inside t.
func (t *Tx) LoseWorker(id, reason string, pol PolicyFunc, now time.Time) ([]AttemptOutcome, error) {
	out, err := t.loseWorker(id, reason, pol, now)
	if err != nil {
		return nil, fmt.Errorf("lose worker: %w", err)
	}
	return out, nil
}

// loseWorker is LoseWorker, its errors without the "lose worker: " prefix.
func (t *Tx) loseWorker(id, reason string, pol PolicyFunc, now time.Time) ([]AttemptOutcome, error) {
	var cur string
	err := t.QueryRowContext(t.ctx, `SELECT status FROM workers WHERE id = ?`, id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("worker %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	leases, err := queryLeases(t.ctx, t, `WHERE status = 'active' AND worker_id = ?`, id)
	if err != nil {
		return nil, err
	}
	var out []AttemptOutcome
	for _, l := range leases {
		o, err := t.lose(l, LeaseRevoked, EventRevoked, "lease revoked: "+reason, pol.of(l.Task), now)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if cur == string(WorkerGone) {
		return out, nil
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE workers SET status = 'gone' WHERE id = ?`, id); err != nil {
		return nil, fmt.Errorf("mark worker %s gone: %w", id, err)
	}
	if err := appendEvent(t.ctx, t, Event{Kind: EventWorker, WorkerID: id, Message: "gone: " + reason}, now); err != nil {
		return nil, err
	}
	return out, nil
}

// SetWorkerStatus sets a worker's status (an EventWorker event records it;
// setting the status it already has changes nothing). It does not touch
// the worker's leases: the sweep expires them. Errors: ErrInvalid for an
// unknown status; ErrNotFound for an unknown worker.
func (s *Store) SetWorkerStatus(ctx context.Context, id string, status WorkerStatus, now time.Time) error {
	return s.write(ctx, func(tx *Tx) error { return tx.SetWorkerStatus(id, status, now) })
}

// SetWorkerStatus is Store.SetWorkerStatus inside t.
func (t *Tx) SetWorkerStatus(id string, status WorkerStatus, now time.Time) error {
	if !status.Valid() {
		return invalidf("worker %q: unknown status %q", id, status)
	}
	var cur string
	err := t.QueryRowContext(t.ctx, `SELECT status FROM workers WHERE id = ?`, id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("set worker status: worker %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("set worker status of %q: %w", id, err)
	}
	if cur == string(status) {
		return nil
	}
	res, err := t.ExecContext(t.ctx, `UPDATE workers SET status = ? WHERE id = ?`, string(status), id)
	if err != nil {
		return fmt.Errorf("set worker status of %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set worker status: worker %q: %w", id, ErrNotFound)
	}
	return appendEvent(t.ctx, t, Event{Kind: EventWorker, WorkerID: id, Message: string(status)}, now)
}

// TaskFinish asks FinishTasks to end one task.
type TaskFinish struct {
	Address string
	Status  TaskStatus // failed or cancelled
	Reason  string     // recorded as last_error and in the event
}

// FinishTasks ends several unfinished tasks in one write transaction, each
// with its status (failed or cancelled: only an accepted result succeeds a
// task, docs/design.md §3 invariant 5) and reason, consuming their open retry
// directives and appending an EventFailed or EventCancelled event each.
// Tasks that are unknown, already finished or hold an active lease are
// skipped. It returns the addresses it finished.
//
// Errors: ErrInvalid for a status other than failed or cancelled.
func (s *Store) FinishTasks(ctx context.Context, tasks []TaskFinish, now time.Time) ([]string, error) {
	var out []string
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.FinishTasks(tasks, now)
		return err
	})
	return out, err
}

// FinishTasks is Store.FinishTasks inside t.
func (t *Tx) FinishTasks(tasks []TaskFinish, now time.Time) ([]string, error) {
	for _, f := range tasks {
		if f.Status != TaskFailed && f.Status != TaskCancelled {
			return nil, invalidf("finish task %s: status must be failed or cancelled, have %q", f.Address, f.Status)
		}
	}
	var out []string
	for _, f := range tasks {
		var got string
		err := t.QueryRowContext(t.ctx, `UPDATE tasks SET status = ?, last_error = ?, updated_at = ?, finished_at = ?
			WHERE address = ? AND status IN ('pending', 'queued')
			  AND NOT EXISTS (SELECT 1 FROM leases WHERE task = ? AND status = 'active')
			RETURNING address`, string(f.Status), f.Reason, ms(now), ms(now), f.Address, f.Address).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("finish task %s: %w", f.Address, err)
		}
		if _, err := t.ExecContext(t.ctx, `UPDATE retry_directives SET consumed_at = ? WHERE task = ? AND consumed_at IS NULL`,
			ms(now), f.Address); err != nil {
			return nil, fmt.Errorf("finish task %s: %w", f.Address, err)
		}
		kind := EventCancelled
		if f.Status == TaskFailed {
			kind = EventFailed
		}
		if err := appendEvent(t.ctx, t, Event{Kind: kind, Task: f.Address, Message: f.Reason}, now); err != nil {
			return nil, err
		}
		out = append(out, f.Address)
	}
	return out, nil
}
