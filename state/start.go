package state

import (
	"fmt"
	"time"
)

// LeaseStart is a worker's report that it started the attempt of one of
// its prefetched leases: the lease's token, and the task's timeout and
// lease grace, which bound the lease from the start on.
type LeaseStart struct {
	Token   int64
	Timeout time.Duration // > 0
	Grace   time.Duration // >= 0
}

// StartLeases takes the starts a worker reported, each in its own
// statement (docs/design.md §3, prefetched leases). A start is taken when
// its lease is active, the worker's and not past its expires_at at now:
// an unstarted one starts, hard_expires_at = now + Timeout + Grace and
// expires_at = min(max(expires_at, now + worker ttl), hard_expires_at), and
// its attempt's started_at becomes now; one started already is left as it
// is. It returns the tokens of the starts it refused (any other lease):
// the worker is to stop those attempts. Errors: ErrInvalid for a
// non-positive timeout or a negative grace.
func (t *Tx) StartLeases(workerID string, starts []LeaseStart, now time.Time) (refused []int64, err error) {
	nowMS := ms(now)
	for _, st := range starts {
		if st.Timeout <= 0 || st.Grace < 0 {
			return nil, invalidf("start lease %d: timeout must be positive and grace not negative, have %s and %s", st.Token, st.Timeout, st.Grace)
		}
		hard := nowMS + durMS(st.Timeout) + durMS(st.Grace)
		res, err := t.ExecContext(t.ctx, `UPDATE leases SET unstarted = 0, hard_expires_at = ?3,
				expires_at = min(max(expires_at, ?4 + (SELECT ttl_ms FROM workers WHERE id = ?2)), ?3)
			WHERE token = ?1 AND worker_id = ?2 AND status = 'active' AND expires_at > ?4 AND unstarted = 1`,
			st.Token, workerID, hard, nowMS)
		if err != nil {
			return nil, fmt.Errorf("start lease %d: %w", st.Token, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			// Started already (a start reported again) is taken as it is;
			// anything else is refused.
			var live bool
			if err := t.QueryRowContext(t.ctx, `SELECT EXISTS (SELECT 1 FROM leases
				WHERE token = ? AND worker_id = ? AND status = 'active' AND expires_at > ?)`,
				st.Token, workerID, nowMS).Scan(&live); err != nil {
				return nil, fmt.Errorf("start lease %d: %w", st.Token, err)
			}
			if !live {
				refused = append(refused, st.Token)
			}
			continue
		}
		if _, err := t.ExecContext(t.ctx, `UPDATE attempts SET started_at = ? WHERE fencing_token = ? AND ended_at IS NULL`,
			nowMS, st.Token); err != nil {
			return nil, fmt.Errorf("start lease %d: its attempt: %w", st.Token, err)
		}
	}
	return refused, nil
}

// returnUnstarted ends an unstarted lease that ends otherwise than by a
// result (expiry, revoke, a lost worker, a release) with status, at no
// cost: its attempt row is removed (it never ran; its number stays spent,
// so no two leases ever share one), the task is queued again at once
// without a retry directive, and an EventReleased event says why. The
// outcome it returns has Unstarted set and Status queued.
func (t *Tx) returnUnstarted(l Lease, status LeaseStatus, why string, now time.Time) (AttemptOutcome, error) {
	out := AttemptOutcome{Task: l.Task, Attempt: l.Attempt, Token: l.Token, WorkerID: l.WorkerID,
		Status: TaskQueued, Unstarted: true,
		Message: fmt.Sprintf("attempt %d was prefetched and its worker never reported its start (%s): queued again at no cost", l.Attempt, why)}
	if err := endLeaseTx(t.ctx, t, l, status, "", why, now); err != nil {
		return out, err
	}
	if _, err := t.ExecContext(t.ctx, `DELETE FROM attempts WHERE fencing_token = ?`, l.Token); err != nil {
		return out, fmt.Errorf("return unstarted lease %d: remove its attempt: %w", l.Token, err)
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE tasks SET status = 'queued', updated_at = ? WHERE address = ? AND status = 'running'`,
		ms(now), l.Task); err != nil {
		return out, fmt.Errorf("return unstarted lease %d: requeue %s: %w", l.Token, l.Task, err)
	}
	if err := appendEvent(t.ctx, t, Event{Kind: EventReleased, Task: l.Task, WorkerID: l.WorkerID, Token: l.Token,
		Message: out.Message}, now); err != nil {
		return out, err
	}
	return out, nil
}
