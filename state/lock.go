package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Lock errors.
var (
	// ErrLocked: another apply holds the lock and it has not expired. The
	// error is a *LockedError naming the holder.
	ErrLocked = errors.New("state is locked")

	// ErrLockLost: the lock named by a renew or release is no longer held
	// under that ID (it was released, forced or taken over).
	ErrLockLost = errors.New("apply lock lost")
)

// LockedError is returned (wrapping ErrLocked) by AcquireLock when the lock
// is held.
type LockedError struct {
	Path string // the state file
	Lock Lock   // the current holder
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("state file %s is locked by %s (host %s, pid %d) since %s, until %s; lock ID %s",
		e.Path, e.Lock.Holder, e.Lock.Host, e.Lock.PID,
		e.Lock.StartedAt.Format(time.RFC3339), e.Lock.ExpiresAt.Format(time.RFC3339), e.Lock.ID)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// LockRequest asks for the apply lock.
type LockRequest struct {
	Holder string        // who asks, e.g. "user@host"
	Host   string        // host name of this process
	PID    int           // pid of this process, >= 0
	TTL    time.Duration // the lock expires at now + TTL unless renewed; > 0

	// TakeOver names the ID of a lock the caller has found dead (e.g. its
	// pid is gone on this host). If the current lock has this ID it is taken
	// over even before it expires; a lock with another ID is not.
	TakeOver string
}

// Event kinds written by the lock methods.
const (
	EventLockAcquired  = "lock_acquired"   // Message: holder
	EventLockTakenOver = "lock_taken_over" // Message: the previous lock's ID and holder
	EventLockReleased  = "lock_released"
	EventLockForced    = "lock_forced" // ForceUnlock; Message: the removed lock's holder
)

// AcquireLock takes the apply lock at now, with a new random ID, until
// now + TTL. When a lock exists it is taken over if it has expired
// (expires_at <= now) or its ID equals req.TakeOver; previous then returns
// the lock that was replaced, so the caller can revoke the leases of its
// workers (docs/design.md §3 invariant 9). Otherwise nothing changes and the error
// is a *LockedError (wrapping ErrLocked). Errors: ErrInvalid for TTL <= 0
// or PID < 0.
func (s *Store) AcquireLock(ctx context.Context, req LockRequest, now time.Time) (lock Lock, previous *Lock, err error) {
	// (checked, and the lock's ID drawn, before the write: the ID stays
	// the same if the write runs again)
	if err := checkLockRequest(req); err != nil {
		return Lock{}, nil, err
	}
	lock = Lock{
		ID: randomHex(16), Holder: req.Holder, Host: req.Host, PID: req.PID,
		StartedAt: fromMS(ms(now)), ExpiresAt: fromMS(ms(now) + durMS(req.TTL)),
	}
	err = s.writeLock(ctx, func(tx *Tx) error {
		previous, err = tx.acquireLock(lock, req.TakeOver, now)
		return err
	})
	if err != nil {
		return Lock{}, nil, err
	}
	return lock, previous, nil
}

// checkLockRequest returns the ErrInvalid error of a request AcquireLock
// refuses.
func checkLockRequest(req LockRequest) error {
	if req.TTL <= 0 {
		return invalidf("lock ttl must be positive, have %s", req.TTL)
	}
	if req.PID < 0 {
		return invalidf("lock pid must not be negative, have %d", req.PID)
	}
	return nil
}

// acquireLock is AcquireLock's write inside t: it takes the lock as lock,
// over an expired one or the one whose ID is takeOver, and returns the
// lock it replaced. The lock's writes are not exported on Tx: they run in
// transactions of their own, which neither bump the serial nor check
// GuardWrites' lock (Store.writeLock).
func (t *Tx) acquireLock(lock Lock, takeOver string, now time.Time) (previous *Lock, err error) {
	cur, err := queryLock(t.ctx, t)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		if cur.ExpiresAt.After(now) && (takeOver == "" || takeOver != cur.ID) {
			return nil, &LockedError{Path: t.s.path, Lock: *cur}
		}
		previous = cur
	}
	if _, err := t.ExecContext(t.ctx, `INSERT INTO apply_lock (id, lock_id, holder, host, pid, started_at, expires_at)
		VALUES (1, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET lock_id = excluded.lock_id, holder = excluded.holder, host = excluded.host,
			pid = excluded.pid, started_at = excluded.started_at, expires_at = excluded.expires_at`,
		lock.ID, lock.Holder, lock.Host, lock.PID, ms(lock.StartedAt), ms(lock.ExpiresAt)); err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	if _, err := t.ExecContext(t.ctx, `INSERT INTO applies (id, holder, host, pid, started_at) VALUES (?, ?, ?, ?, ?)`,
		lock.ID, lock.Holder, lock.Host, lock.PID, ms(lock.StartedAt)); err != nil {
		return nil, fmt.Errorf("record apply %s: %w", lock.ID, err)
	}
	ev := Event{Kind: EventLockAcquired, Message: lock.Holder}
	if previous != nil {
		if err := endApplyTx(t.ctx, t, previous.ID, "taken_over", now); err != nil {
			return nil, err
		}
		ev = Event{Kind: EventLockTakenOver, Message: fmt.Sprintf("lock %s of %s (host %s, pid %d)",
			previous.ID, previous.Holder, previous.Host, previous.PID)}
	}
	if err := appendEvent(t.ctx, t, ev, now); err != nil {
		return nil, err
	}
	return previous, nil
}

// RenewLock moves the expiry of the lock with the given ID to now + ttl and
// returns the lock. Errors: ErrInvalid for ttl <= 0; ErrLockLost when the
// lock is no longer held under that ID, or when the state file was removed
// or replaced (StillAtPath): the apply must stop, as its writes would be
// lost.
func (s *Store) RenewLock(ctx context.Context, lockID string, ttl time.Duration, now time.Time) (Lock, error) {
	if ttl <= 0 {
		return Lock{}, invalidf("lock ttl must be positive, have %s", ttl)
	}
	if !s.StillAtPath() {
		return Lock{}, fmt.Errorf("renew lock %s: the state file %s was removed or replaced: %w", lockID, s.abs, ErrLockLost)
	}
	var l *Lock
	err := s.writeLock(ctx, func(tx *Tx) error {
		var err error
		l, err = tx.renewLock(lockID, ttl, now)
		return err
	})
	if err != nil {
		return Lock{}, err
	}
	return *l, nil
}

// renewLock is RenewLock's write inside t (see acquireLock).
func (t *Tx) renewLock(lockID string, ttl time.Duration, now time.Time) (*Lock, error) {
	res, err := t.ExecContext(t.ctx, `UPDATE apply_lock SET expires_at = max(started_at, ?) WHERE id = 1 AND lock_id = ?`,
		ms(now)+durMS(ttl), lockID)
	if err != nil {
		return nil, fmt.Errorf("renew lock: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, errors.Join(fmt.Errorf("renew lock %s: %w", lockID, ErrLockLost), err)
	}
	return queryLock(t.ctx, t)
}

// ReleaseLock removes the lock with the given ID. Errors: ErrLockLost when
// the lock is no longer held under that ID.
func (s *Store) ReleaseLock(ctx context.Context, lockID string, now time.Time) error {
	return s.writeLock(ctx, func(tx *Tx) error { return tx.releaseLock(lockID, now) })
}

// releaseLock is ReleaseLock's write inside t (see acquireLock).
func (t *Tx) releaseLock(lockID string, now time.Time) error {
	res, err := t.ExecContext(t.ctx, `DELETE FROM apply_lock WHERE id = 1 AND lock_id = ?`, lockID)
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("release lock %s: %w", lockID, ErrLockLost), err)
	}
	if err := endApplyTx(t.ctx, t, lockID, "released", now); err != nil {
		return err
	}
	return appendEvent(t.ctx, t, Event{Kind: EventLockReleased}, now)
}

// ForceUnlock removes the lock with the given ID whoever holds it (an
// operator's `force-unlock LOCK_ID`, as in Terraform), and returns the
// removed lock. Errors: ErrNotFound when no lock has that ID.
func (s *Store) ForceUnlock(ctx context.Context, lockID string, now time.Time) (Lock, error) {
	return s.ForceUnlockIf(ctx, lockID, now, nil)
}

// ForceUnlockIf is ForceUnlock that first asks check (when not nil), in
// the same transaction, about the lock it found under lockID: an error
// from check is returned and nothing is removed.
func (s *Store) ForceUnlockIf(ctx context.Context, lockID string, now time.Time, check func(Lock) error) (Lock, error) {
	var l *Lock
	err := s.writeLock(ctx, func(tx *Tx) error {
		var err error
		l, err = tx.forceUnlock(lockID, now, check)
		return err
	})
	if err != nil {
		return Lock{}, err
	}
	return *l, nil
}

// forceUnlock is ForceUnlockIf's write inside t (see acquireLock).
func (t *Tx) forceUnlock(lockID string, now time.Time, check func(Lock) error) (*Lock, error) {
	l, err := queryLock(t.ctx, t)
	if err != nil {
		return nil, err
	}
	if l == nil || l.ID != lockID {
		return nil, fmt.Errorf("force unlock: lock %s: %w", lockID, ErrNotFound)
	}
	if check != nil {
		if err := check(*l); err != nil {
			return nil, err
		}
	}
	if _, err := t.ExecContext(t.ctx, `DELETE FROM apply_lock WHERE id = 1 AND lock_id = ?`, lockID); err != nil {
		return nil, fmt.Errorf("force unlock: %w", err)
	}
	if err := endApplyTx(t.ctx, t, lockID, "forced", now); err != nil {
		return nil, err
	}
	if err := appendEvent(t.ctx, t, Event{Kind: EventLockForced, Message: fmt.Sprintf("lock %s of %s (host %s, pid %d)",
		l.ID, l.Holder, l.Host, l.PID)}, now); err != nil {
		return nil, err
	}
	return l, nil
}

// SetLockCoordinator records, in the lock row held under lockID, the URL
// the holder's coordinator tells workers to use and the SHA-256
// fingerprint ("" for plain HTTP) its TLS chain is pinned by, so that other
// commands on this state can reach it (docs/design.md, "Writes while an
// apply runs"). Errors: ErrLockLost when the lock is no longer held under
// that ID.
func (s *Store) SetLockCoordinator(ctx context.Context, lockID, url, caSHA256 string) error {
	return s.writeLock(ctx, func(tx *Tx) error { return tx.setLockCoordinator(lockID, url, caSHA256) })
}

// setLockCoordinator is SetLockCoordinator's write inside t (see
// acquireLock).
func (t *Tx) setLockCoordinator(lockID, url, caSHA256 string) error {
	res, err := t.ExecContext(t.ctx, `UPDATE apply_lock SET coordinator_url = ?, ca_sha256 = ? WHERE id = 1 AND lock_id = ?`,
		url, caSHA256, lockID)
	if err != nil {
		return fmt.Errorf("record the coordinator in lock %s: %w", lockID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("record the coordinator in lock %s: %w", lockID, ErrLockLost), err)
	}
	return nil
}

// endApplyTx records the end of the apply with the given id, once.
func endApplyTx(ctx context.Context, tx *Tx, id, reason string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE applies SET ended_at = max(started_at, ?), end_reason = ? WHERE id = ? AND ended_at IS NULL`,
		ms(now), reason, id); err != nil {
		return fmt.Errorf("record the end of apply %s: %w", id, err)
	}
	return nil
}

// Apply is one apply as the state records it: its id is its lock's ID.
type Apply struct {
	ID        string
	Holder    string
	Host      string
	PID       int
	StartedAt time.Time
	// EndedAt and EndReason ("released", "forced" or "taken_over") are
	// zero and "" while it runs, or when it died and no apply took over.
	EndedAt   time.Time
	EndReason string
}

// Applies returns every apply recorded, oldest first.
func (s *Store) Applies(ctx context.Context) ([]Apply, error) {
	out := []Apply{}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, holder, host, pid, started_at, ended_at, coalesce(end_reason, '')
			FROM applies ORDER BY started_at, rowid`)
		if err != nil {
			return fmt.Errorf("read applies: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a Apply
			var started int64
			var ended sql.NullInt64
			if err := rows.Scan(&a.ID, &a.Holder, &a.Host, &a.PID, &started, &ended, &a.EndReason); err != nil {
				return fmt.Errorf("read applies: %w", err)
			}
			a.StartedAt, a.EndedAt = fromMS(started), fromNullMS(ended)
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}
