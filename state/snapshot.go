package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Snapshot reads the whole state in one read transaction, so every part of
// it belongs to the same moment: lineage, serial, pools, workers (with
// LeasesHeld), tasks, the active leases, each task's latest lease, the
// proposals, the edge records and the apply lock.
func (s *Store) Snapshot(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{}
	err := s.read(ctx, func(tx *Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT lineage, serial FROM state_info WHERE id = 1`).
			Scan(&snap.Lineage, &snap.Serial); err != nil {
			return fmt.Errorf("read state_info: %w", err)
		}
		var err error
		if snap.Pools, err = queryPools(ctx, tx); err != nil {
			return err
		}
		if snap.Workers, err = queryWorkers(ctx, tx); err != nil {
			return err
		}
		if snap.Tasks, err = queryTasks(ctx, tx); err != nil {
			return err
		}
		if snap.Leases, err = queryLeases(ctx, tx, `WHERE status = 'active'`); err != nil {
			return err
		}
		if snap.LatestLeases, err = queryLeases(ctx, tx, `WHERE token IN (SELECT MAX(token) FROM leases GROUP BY task)`); err != nil {
			return err
		}
		if snap.Proposals, err = queryProposals(ctx, tx); err != nil {
			return err
		}
		if snap.EdgeRecords, err = queryEdgeRecords(ctx, tx); err != nil {
			return err
		}
		snap.Lock, err = queryLock(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", s.path, err)
	}
	return snap, nil
}

// Info returns the lineage and serial of the state.
func (s *Store) Info(ctx context.Context) (lineage string, serial int64, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, `SELECT lineage, serial FROM state_info WHERE id = 1`).Scan(&lineage, &serial)
	})
	return lineage, serial, err
}

func queryLock(ctx context.Context, tx *Tx) (*Lock, error) {
	var l Lock
	var started, expires int64
	err := tx.QueryRowContext(ctx, `SELECT lock_id, holder, host, pid, started_at, expires_at, coordinator_url, ca_sha256
		FROM apply_lock WHERE id = 1`).
		Scan(&l.ID, &l.Holder, &l.Host, &l.PID, &started, &expires, &l.CoordinatorURL, &l.CASHA256)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read apply_lock: %w", err)
	}
	l.StartedAt = fromMS(started)
	l.ExpiresAt = fromMS(expires)
	return &l, nil
}
