package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// RegisterWorker adds a worker to the registry with status active,
// RegisteredAt = LastHeartbeatAt = now, and returns it as stored. An empty
// ID is generated ("w-" + 12 random hex digits). w.Status, w.RegisteredAt,
// w.LastHeartbeatAt and w.LeasesHeld are ignored.
//
// When w.LaunchSeq > 0 the worker registers the launch (w.ApplyID, w.Pool,
// w.LaunchSeq) in the same transaction: that launch must have status
// launched, and becomes registered with this worker's id.
//
// Errors: ErrInvalid when Capacity < 1, HeartbeatInterval or TTL is not
// positive, or PID < 0; ErrNotFound when w.Pool does not exist (UpsertPool
// it first); ErrLaunchUsed when the launch is not in status launched (it
// registered already, expired or failed); a constraint error when the ID
// is already registered.
func (s *Store) RegisterWorker(ctx context.Context, w Worker, now time.Time) (Worker, error) {
	var out Worker
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.RegisterWorker(w, now)
		return err
	})
	if err != nil {
		return Worker{}, err
	}
	return out, nil
}

// RegisterWorker is Store.RegisterWorker inside t.
func (t *Tx) RegisterWorker(w Worker, now time.Time) (Worker, error) {
	switch {
	case w.Capacity < 1:
		return Worker{}, invalidf("worker capacity must be at least 1, have %d", w.Capacity)
	case w.HeartbeatInterval <= 0:
		return Worker{}, invalidf("worker heartbeat interval must be positive, have %s", w.HeartbeatInterval)
	case w.TTL <= 0:
		return Worker{}, invalidf("worker ttl must be positive, have %s", w.TTL)
	case w.PID < 0:
		return Worker{}, invalidf("worker pid must not be negative, have %d", w.PID)
	}
	if w.ID == "" {
		w.ID = "w-" + randomHex(6)
	}
	w.Status = WorkerActive
	w.RegisteredAt = fromMS(ms(now))
	w.LastHeartbeatAt = w.RegisteredAt
	w.HeartbeatInterval = time.Duration(durMS(w.HeartbeatInterval)) * time.Millisecond
	w.TTL = time.Duration(durMS(w.TTL)) * time.Millisecond
	w.LeasesHeld = 0
	if len(w.Labels) == 0 {
		w.Labels = nil
	}
	var one int
	err := t.QueryRowContext(t.ctx, `SELECT 1 FROM pools WHERE name = ?`, w.Pool).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return Worker{}, fmt.Errorf("register worker: pool %q: %w", w.Pool, ErrNotFound)
	}
	if err != nil {
		return Worker{}, fmt.Errorf("register worker: %w", err)
	}
	_, err = t.ExecContext(t.ctx, `INSERT INTO workers (id, pool, labels, capacity, status, host, pid, version,
			registered_at, last_heartbeat_at, heartbeat_interval_ms, ttl_ms, apply_id, launch_seq, join_token_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.Pool, encodeLabels(w.Labels), w.Capacity, string(w.Status), w.Host, w.PID, w.Version,
		ms(now), ms(now), durMS(w.HeartbeatInterval), durMS(w.TTL), w.ApplyID, w.LaunchSeq, w.JoinTokenID)
	if err != nil {
		return Worker{}, fmt.Errorf("register worker %q: %w", w.ID, err)
	}
	if w.LaunchSeq > 0 {
		res, err := t.ExecContext(t.ctx, `UPDATE launches SET status = 'registered', worker_id = ?, registered_at = ?
			WHERE apply_id = ? AND pool = ? AND seq = ? AND status = 'launched'`, w.ID, ms(now), w.ApplyID, w.Pool, w.LaunchSeq)
		if err != nil {
			return Worker{}, fmt.Errorf("register worker %q: launch %d of pool %s: %w", w.ID, w.LaunchSeq, w.Pool, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return Worker{}, errors.Join(fmt.Errorf("register worker %q: launch %d of pool %s in apply %s: %w", w.ID, w.LaunchSeq, w.Pool, w.ApplyID, ErrLaunchUsed), err)
		}
	}
	return w, nil
}

// Heartbeat records a heartbeat of the worker at now and renews every active
// lease it holds that has not yet expired (expires_at > now):
//
//	expires_at = max(expires_at, min(now + worker ttl, hard_expires_at))
//
// so no renewal goes past hard_expires_at and none moves expiry backwards.
// A lease already past its expires_at is not revived; the sweep ends it.
// Heartbeat does not change the worker's status. It returns the number of
// leases renewed. Errors: ErrNotFound for an unknown worker.
func (s *Store) Heartbeat(ctx context.Context, workerID string, now time.Time) (renewed int, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		renewed, err = tx.Heartbeat(workerID, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return renewed, nil
}

// Heartbeat is Store.Heartbeat inside t.
func (t *Tx) Heartbeat(workerID string, now time.Time) (renewed int, err error) {
	var ttlMS int64
	err = t.QueryRowContext(t.ctx, `UPDATE workers SET last_heartbeat_at = ? WHERE id = ? RETURNING ttl_ms`,
		ms(now), workerID).Scan(&ttlMS)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("heartbeat: worker %q: %w", workerID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("heartbeat %q: %w", workerID, err)
	}
	res, err := t.ExecContext(t.ctx, `UPDATE leases
		SET renewed_at = ?1,
		    expires_at = max(expires_at, min(?1 + ?2, hard_expires_at))
		WHERE worker_id = ?3 AND status = 'active' AND expires_at > ?1`,
		ms(now), ttlMS, workerID)
	if err != nil {
		return 0, fmt.Errorf("heartbeat %q: renew leases: %w", workerID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

const workerColumns = `id, pool, labels, capacity, status, host, pid, version, registered_at,
	last_heartbeat_at, heartbeat_interval_ms, ttl_ms, apply_id, launch_seq, join_token_id,
	(SELECT count(*) FROM leases l WHERE l.worker_id = workers.id AND l.status = 'active')`

type scanner interface{ Scan(dest ...any) error }

func scanWorker(r scanner) (Worker, error) {
	var w Worker
	var labels, status string
	var reg, hb, interval, ttl int64
	if err := r.Scan(&w.ID, &w.Pool, &labels, &w.Capacity, &status, &w.Host, &w.PID, &w.Version,
		&reg, &hb, &interval, &ttl, &w.ApplyID, &w.LaunchSeq, &w.JoinTokenID, &w.LeasesHeld); err != nil {
		return Worker{}, err
	}
	var err error
	if w.Labels, err = decodeLabels(labels); err != nil {
		return Worker{}, fmt.Errorf("worker %q: %w", w.ID, err)
	}
	w.Status = WorkerStatus(status)
	w.RegisteredAt = fromMS(reg)
	w.LastHeartbeatAt = fromMS(hb)
	w.HeartbeatInterval = time.Duration(interval) * time.Millisecond
	w.TTL = time.Duration(ttl) * time.Millisecond
	return w, nil
}

func queryWorkers(ctx context.Context, tx *Tx) ([]Worker, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+workerColumns+` FROM workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read workers: %w", err)
	}
	defer rows.Close()
	out := []Worker{}
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			return nil, fmt.Errorf("read workers: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// Worker returns one worker. Errors: ErrNotFound.
func (s *Store) Worker(ctx context.Context, id string) (w Worker, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		w, err = tx.Worker(id)
		return err
	})
	return w, err
}

// Worker is Store.Worker inside t.
func (t *Tx) Worker(id string) (Worker, error) {
	w, err := scanWorker(t.QueryRowContext(t.ctx, `SELECT `+workerColumns+` FROM workers WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Worker{}, fmt.Errorf("worker %q: %w", id, ErrNotFound)
	}
	return w, err
}

// ShiftLiveness moves the last heartbeat of every active or draining
// worker d later, so the ttl of each counts from d after its last
// heartbeat: the step that lets a test clock jump d ahead (package
// testclock) without making a live worker stale. It refuses (ErrInvalid)
// d < 0, and while a lease is active: a jump happens only when no attempt
// runs. It returns the number of workers moved.
func (t *Tx) ShiftLiveness(d time.Duration) (int, error) {
	if d < 0 {
		return 0, invalidf("shift liveness: negative duration %s", d)
	}
	var active int
	if err := t.QueryRowContext(t.ctx, `SELECT count(*) FROM leases WHERE status = 'active'`).Scan(&active); err != nil {
		return 0, fmt.Errorf("shift liveness: %w", err)
	}
	if active > 0 {
		return 0, invalidf("shift liveness: %d active leases", active)
	}
	res, err := t.ExecContext(t.ctx, `UPDATE workers SET last_heartbeat_at = last_heartbeat_at + ?
		WHERE status IN ('active', 'draining')`, durMS(d))
	if err != nil {
		return 0, fmt.Errorf("shift liveness: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
