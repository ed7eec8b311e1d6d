package state

import (
	"context"
	"database/sql"
	"encoding/hex"
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
		var err error
		if snap.Lineage, snap.Serial, snap.HashKey, err = queryInfo(ctx, tx); err != nil {
			return err
		}
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

// HashKey returns the state's hash key (Snapshot.HashKey).
func (s *Store) HashKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		_, _, key, err = queryInfo(ctx, tx)
		return err
	})
	return key, err
}

// queryInfo reads the state_info row: lineage, serial and hash key.
func queryInfo(ctx context.Context, tx *Tx) (lineage string, serial int64, key []byte, err error) {
	var hexKey string
	if err := tx.QueryRowContext(ctx, `SELECT lineage, serial, hash_key FROM state_info WHERE id = 1`).
		Scan(&lineage, &serial, &hexKey); err != nil {
		return "", 0, nil, fmt.Errorf("read state_info: %w", err)
	}
	key, err = hex.DecodeString(hexKey)
	if err != nil || len(key) < 16 {
		return "", 0, nil, fmt.Errorf("read state_info: its hash key is not 32 random bytes in hex")
	}
	return lineage, serial, key, nil
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
