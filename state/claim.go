package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrNotClaimable: ClaimLease found the task not queued (pending, running or
// finished), or its open retry directive is not due yet. Nothing changed;
// the caller tries another task.
var ErrNotClaimable = errors.New("task is not claimable")

// RetryDirective is the record that an attempt will be retried (docs/design.md §2).
type RetryDirective struct {
	ID          int64
	Task        string
	NextAttempt int          // the attempt number the retry will get
	NotBefore   time.Time    // not granted before this time
	Kind        FailureClass // FailureClassFailure or FailureClassLost
	Reason      string
	CreatedAt   time.Time
	ConsumedAt  time.Time // zero while open; set when the retry is granted or superseded
}

// Event kinds written by the coordinator's state methods (claim, results,
// sweep, revoke). Each event names the task, worker and token it is about,
// where there is one.
const (
	EventRegistered = "registered" // a worker registered; Message: pool
	EventSucceeded  = "succeeded"  // an accepted result succeeded the task
	EventFailed     = "failed"     // the task failed for good; Message says which budget
	EventRetried    = "retried"    // a retry directive was written; Message says which budget
	EventExpired    = "expired"    // the sweep expired a lease (attempt lost)
	EventRevoked    = "revoked"    // RevokeAllLeases ended a lease (attempt lost)
	EventReleased   = "released"   // a lease was handed back unused (no budget spent)
	EventRejected   = "rejected"   // a result was rejected; Message: the reason
	EventCancelled  = "cancelled"  // a dependent task was cancelled
	EventQueued     = "queued"     // a pending task's dependencies all succeeded
	EventStale      = "stale"      // a worker went silent past its ttl
	EventWorker     = "worker"     // a worker's status was set; Message: the status

	// Chaining (proposals.go). Task is the recommending task for
	// EventRecommendationRejected, "proposal.N" for the others; Token is
	// the recommending lease's.
	EventRecommendationRejected = "recommendation_rejected" // at intake or by the coordinator; Message: the reason
	EventProposed               = "proposed"                // an edge proposed a follow-up task
	EventProposalApproved       = "proposal_approved"       // a person approved a proposal
	EventProposalAutoApproved   = "proposal_auto_approved"  // an earned edge approved it by itself; Message: the record
	EventProposalRejected       = "proposal_rejected"       // a person rejected a proposal; Message: the reason
)

// ClaimLease grants a lease like GrantLease, in one write transaction, but
// only for a task that is claimable now: its status is queued and its open
// retry directive, if any, has not_before <= now. The directive is consumed
// (consumed_at = now) in the same transaction.
//
// Errors: those of GrantLease, and ErrNotClaimable (wrapped, saying why)
// when the task is not queued or its retry is not due. On error nothing
// changes.
func (s *Store) ClaimLease(ctx context.Context, req GrantRequest, now time.Time) (l Lease, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		l, err = tx.ClaimLease(req, now)
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	return l, nil
}

// ClaimLease is Store.ClaimLease inside t.
func (t *Tx) ClaimLease(req GrantRequest, now time.Time) (Lease, error) {
	if req.Timeout <= 0 {
		return Lease{}, invalidf("claim lease for %s: timeout must be positive, have %s", req.Task, req.Timeout)
	}
	if req.Grace < 0 {
		return Lease{}, invalidf("claim lease for %s: grace must not be negative, have %s", req.Task, req.Grace)
	}
	// Everything the claim checks, in one read, then its writes. The
	// write transaction holds the file's write lock, so nothing changes
	// between the two. A read and a plain UPDATE cost half of one UPDATE
	// … RETURNING, which gathers its rows in a temporary table
	// (docs/PERFORMANCE.md, "No RETURNING on the claim's path").
	nowMS := ms(now)
	if e := req.Expected; e != nil {
		// The claim's checks as the WHERE of the count of its attempt:
		// queued, no open retry directive (a due one is consumed below,
		// where the claim reads it), no active lease, an active worker,
		// and the row and worker as the caller holds them.
		ttlMS := durMS(e.TTL)
		counted, err := t.guardedUpdate(`UPDATE tasks SET attempts = ?3 + 1, status = 'running', updated_at = ?4
			WHERE address = ?1 AND status = 'queued' AND attempts = ?3 AND def_hash = ?2
			  AND NOT EXISTS (SELECT 1 FROM retry_directives d WHERE d.task = ?1 AND d.consumed_at IS NULL)
			  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.task = ?1 AND l.status = 'active')
			  AND EXISTS (SELECT 1 FROM workers w WHERE w.id = ?5 AND w.status = 'active' AND w.ttl_ms = ?6)`,
			req.Task, e.DefHash, e.Attempts, nowMS, req.WorkerID, ttlMS)
		if err != nil {
			return Lease{}, fmt.Errorf("claim lease for %s: %w", req.Task, err)
		}
		if counted {
			return grantLeaseTx(t.ctx, t, req, e.DefHash, ttlMS, e.Attempts+1, now)
		}
	}
	var status, defHash string
	var attempts int
	var wstatus sql.NullString
	var ttlMS, directive, notBefore, held sql.NullInt64
	err := t.QueryRowContext(t.ctx, `SELECT t.status, t.attempts, t.def_hash, w.status, w.ttl_ms, d.id, d.not_before,
			(SELECT token FROM leases l WHERE l.task = t.address AND l.status = 'active')
		FROM tasks t
		LEFT JOIN workers w ON w.id = ?2
		LEFT JOIN retry_directives d ON d.task = t.address AND d.consumed_at IS NULL
		WHERE t.address = ?1`, req.Task, req.WorkerID).Scan(&status, &attempts, &defHash, &wstatus, &ttlMS, &directive, &notBefore, &held)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Lease{}, fmt.Errorf("claim lease: task %s: %w", req.Task, ErrNotFound)
	case err != nil:
		return Lease{}, fmt.Errorf("claim lease for %s: %w", req.Task, err)
	case TaskStatus(status) != TaskQueued:
		return Lease{}, fmt.Errorf("claim lease: task %s is %s: %w", req.Task, status, ErrNotClaimable)
	case directive.Valid && notBefore.Int64 > nowMS:
		return Lease{}, fmt.Errorf("claim lease: task %s is retried not before %s: %w",
			req.Task, fromMS(notBefore.Int64).Format(time.RFC3339Nano), ErrNotClaimable)
	case !wstatus.Valid:
		return Lease{}, fmt.Errorf("grant lease for %s: worker %q: %w", req.Task, req.WorkerID, ErrNotFound)
	case WorkerStatus(wstatus.String) != WorkerActive:
		return Lease{}, fmt.Errorf("grant lease for %s: worker %q is %s: %w", req.Task, req.WorkerID, wstatus.String, ErrWorkerNotActive)
	case held.Valid:
		// A queued task with an active lease: another writer's doing.
		return Lease{}, fmt.Errorf("grant lease for %s: lease %d is active: %w", req.Task, held.Int64, ErrLeaseHeld)
	}
	if err := t.countAttempt(req.Task, now); err != nil {
		return Lease{}, err
	}
	if directive.Valid {
		if _, err := t.ExecContext(t.ctx, `UPDATE retry_directives SET consumed_at = ? WHERE id = ?`, nowMS, directive.Int64); err != nil {
			return Lease{}, fmt.Errorf("claim lease for %s: consume retry directive: %w", req.Task, err)
		}
	}
	return grantLeaseTx(t.ctx, t, req, defHash, ttlMS.Int64, attempts+1, now)
}

// changedRows is the number of rows a write statement changed, or its
// error. A plain write and RowsAffected say what UPDATE … RETURNING would,
// without the temporary table SQLite gathers returned rows in.
func changedRows(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// countAttempt counts a granted attempt on task's row, which the caller
// read in this transaction: the task becomes running.
func (t *Tx) countAttempt(task string, now time.Time) error {
	n, err := changedRows(t.ExecContext(t.ctx, `UPDATE tasks SET attempts = attempts + 1, status = 'running', updated_at = ? WHERE address = ?`,
		ms(now), task))
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows changed, want 1", n)
	}
	if err != nil {
		return fmt.Errorf("grant lease for %s: count attempt: %w", task, err)
	}
	return nil
}

// ReleaseLease hands an active lease back unused, e.g. when the claim that
// granted it could not be delivered: the lease becomes released, its
// attempt ends with no failure class and reason as its error, and the task
// becomes queued again. No retry budget is spent and no retry directive is
// written; an EventReleased event is appended. released reports whether
// the lease was active (false: it had already ended, and nothing changed).
//
// Errors: ErrNotFound for an unknown token.
func (s *Store) ReleaseLease(ctx context.Context, token int64, reason string, now time.Time) (released bool, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		released, err = tx.ReleaseLease(token, reason, now)
		return err
	})
	return released, err
}

// ReleaseLease is Store.ReleaseLease inside t.
func (t *Tx) ReleaseLease(token int64, reason string, now time.Time) (released bool, err error) {
	l, err := scanLease(t.QueryRowContext(t.ctx, `SELECT `+leaseColumns+` FROM leases WHERE token = ?`, token))
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("release lease %d: %w", token, ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("release lease %d: %w", token, err)
	}
	if l.Status != LeaseActive {
		return false, nil
	}
	if l.Unstarted {
		_, err := t.returnUnstarted(l, LeaseReleased, reason, now)
		return err == nil, err
	}
	if err := endLeaseTx(t.ctx, t, l, LeaseReleased, "", reason, now); err != nil {
		return false, err
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE tasks SET status = 'queued', updated_at = ? WHERE address = ? AND status = 'running'`,
		ms(now), l.Task); err != nil {
		return false, fmt.Errorf("release lease %d: requeue %s: %w", token, l.Task, err)
	}
	if err := appendEvent(t.ctx, t, Event{Kind: EventReleased, Task: l.Task, WorkerID: l.WorkerID, Token: token,
		Message: fmt.Sprintf("attempt %d: %s", l.Attempt, reason)}, now); err != nil {
		return false, err
	}
	return true, nil
}

// endLeaseTx ends an active lease with status and ends its attempt at now
// with the failure class (NULL for "") and error message.
func endLeaseTx(ctx context.Context, tx *Tx, l Lease, status LeaseStatus, class FailureClass, msg string, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE leases SET status = ?, ended_at = ? WHERE token = ? AND status = 'active'`,
		string(status), ms(now), l.Token)
	if err != nil {
		return fmt.Errorf("end lease %d: %w", l.Token, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("end lease %d: it is not active", l.Token)
	}
	var fc sql.NullString
	if class != "" {
		fc = sql.NullString{String: string(class), Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE attempts SET ended_at = ?, failure_class = ?, error = ?
		WHERE fencing_token = ? AND ended_at IS NULL`, ms(now), fc, msg, l.Token); err != nil {
		return fmt.Errorf("end attempt of lease %d: %w", l.Token, err)
	}
	return nil
}

// ActiveLeases returns the active leases of the worker (workerID "" = of
// every worker), in ascending token order. Leases past their expires_at
// that the sweep has not ended yet are included; compare ExpiresAt with
// now to tell.
func (s *Store) ActiveLeases(ctx context.Context, workerID string) (out []Lease, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		out, err = tx.ActiveLeases(workerID)
		return err
	})
	return out, err
}

// ActiveLeases is Store.ActiveLeases inside t.
func (t *Tx) ActiveLeases(workerID string) ([]Lease, error) {
	if workerID == "" {
		return queryLeases(t.ctx, t, `WHERE status = 'active'`)
	}
	return queryLeases(t.ctx, t, `WHERE status = 'active' AND worker_id = ?`, workerID)
}

const directiveColumns = `id, task, next_attempt, not_before, kind, reason, created_at, consumed_at`

func scanDirective(r scanner) (RetryDirective, error) {
	var d RetryDirective
	var kind string
	var notBefore, created int64
	var consumed sql.NullInt64
	if err := r.Scan(&d.ID, &d.Task, &d.NextAttempt, &notBefore, &kind, &d.Reason, &created, &consumed); err != nil {
		return RetryDirective{}, err
	}
	d.Kind = FailureClass(kind)
	d.NotBefore = fromMS(notBefore)
	d.CreatedAt = fromMS(created)
	d.ConsumedAt = fromNullMS(consumed)
	return d, nil
}

func queryDirectives(ctx context.Context, tx *Tx, where string, args ...any) ([]RetryDirective, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+directiveColumns+` FROM retry_directives `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read retry directives: %w", err)
	}
	defer rows.Close()
	out := []RetryDirective{}
	for rows.Next() {
		d, err := scanDirective(rows)
		if err != nil {
			return nil, fmt.Errorf("read retry directives: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// RetryDirectives returns the retry directives of the task (task "" = of
// every task), open and consumed, in the order they were written.
func (s *Store) RetryDirectives(ctx context.Context, task string) ([]RetryDirective, error) {
	var out []RetryDirective
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		if task == "" {
			out, err = queryDirectives(ctx, tx, ``)
		} else {
			out, err = queryDirectives(ctx, tx, `WHERE task = ?`, task)
		}
		return err
	})
	return out, err
}

// OpenRetryDirectives returns every directive not yet consumed (at most one
// per task), keyed by task address.
func (s *Store) OpenRetryDirectives(ctx context.Context) (map[string]RetryDirective, error) {
	out := map[string]RetryDirective{}
	err := s.read(ctx, func(tx *Tx) error {
		ds, err := queryDirectives(ctx, tx, `WHERE consumed_at IS NULL`)
		for _, d := range ds {
			out[d.Task] = d
		}
		return err
	})
	return out, err
}

// writeDirectiveTx consumes the task's open directive, if any (a newer one
// supersedes it), and writes a new one.
func writeDirectiveTx(ctx context.Context, tx *Tx, d RetryDirective, now time.Time) (RetryDirective, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE retry_directives SET consumed_at = ? WHERE task = ? AND consumed_at IS NULL`,
		ms(now), d.Task); err != nil {
		return RetryDirective{}, fmt.Errorf("supersede retry directive of %s: %w", d.Task, err)
	}
	err := tx.QueryRowContext(ctx, `INSERT INTO retry_directives (task, next_attempt, not_before, kind, reason, created_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
		d.Task, d.NextAttempt, ms(d.NotBefore), string(d.Kind), d.Reason, ms(now)).Scan(&d.ID)
	if err != nil {
		return RetryDirective{}, fmt.Errorf("write retry directive of %s: %w", d.Task, err)
	}
	d.NotBefore = fromMS(ms(d.NotBefore))
	d.CreatedAt = fromMS(ms(now))
	return d, nil
}
