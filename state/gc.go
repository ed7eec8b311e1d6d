package state

import (
	"context"
	"database/sql"
	"fmt"
)

// Garbage collection of the artifact store (wdc gc): the state decides
// which blobs are still referred to; package artifact removes the others.

// ReferencedBlobs returns the hashes of the blobs the state still refers
// to, which garbage collection keeps: those an attempt of a task's current
// definition bound (the attempt's lease has the task's current def_hash),
// and the inputs of the tasks' current definitions (their spec's inputs).
// Blobs of attempts of replaced definitions, of rejected results and of
// tasks no longer in the state are not in it.
func (s *Store) ReferencedBlobs(ctx context.Context) (map[string]bool, error) {
	var out map[string]bool
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		out, err = referencedBlobs(ctx, tx)
		return err
	})
	return out, err
}

// CollectGarbage calls remove with ReferencedBlobs inside one write
// transaction, so that no result is accepted, no input recorded and no
// apply started while remove deletes what the state does not refer to.
// It does not change the state's content (the serial stays, so a saved
// plan stays valid). On a store that GuardWrites (the apply's own) it
// fails with ErrLockLost when the apply no longer holds the lock; on any
// other store it fails with a *LockedError when an apply holds it: a
// collection beside a running apply goes through its coordinator.
// remove's error is returned as it is.
func (s *Store) CollectGarbage(ctx context.Context, remove func(referenced map[string]bool) error) error {
	return s.writeTx(ctx, false, func(tx *Tx) error { return tx.collectGarbage(remove) })
}

// collectGarbage is CollectGarbage's transaction. It is not exported: it
// checks the apply lock itself and changes no content, so it runs in a
// transaction of its own (as the lock's writes do), never in a group of
// content writes.
func (t *Tx) collectGarbage(remove func(referenced map[string]bool) error) error {
	cur, err := queryLock(t.ctx, t)
	if err != nil {
		return err
	}
	switch guard := t.s.guard.Load(); {
	case guard != nil && (cur == nil || cur.ID != *guard):
		return fmt.Errorf("state file %s: garbage collection refused: %w (this apply no longer holds lock %s)", t.s.path, ErrLockLost, *guard)
	case guard == nil && cur != nil:
		return &LockedError{Path: t.s.path, Lock: *cur}
	}
	ref, err := referencedBlobs(t.ctx, t)
	if err != nil {
		return err
	}
	return remove(ref)
}

// referencedBlobs are the blobs the attempts of the current definitions
// bind (the empty blob too when one of them named an empty log, which is
// no row: migration 012) and the inputs of the tasks' definitions.
func referencedBlobs(ctx context.Context, tx *Tx) (map[string]bool, error) {
	out := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT a.sha256 FROM attempt_artifacts a
			JOIN leases l ON l.token = a.fencing_token
			JOIN tasks t ON t.address = a.task AND t.def_hash = l.def_hash
		UNION
		SELECT '' WHERE EXISTS (SELECT 1 FROM attempts a
			JOIN leases l ON l.token = a.fencing_token
			JOIN tasks t ON t.address = a.task AND t.def_hash = l.def_hash
			WHERE a.empty_logs != 0)
		UNION
		SELECT json_extract(i.value, '$.sha256') FROM tasks t, json_each(t.spec, '$.inputs') i
			WHERE t.spec != '' AND json_type(t.spec, '$.inputs') = 'array'`)
	if err != nil {
		return nil, fmt.Errorf("read referenced blobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h sql.NullString
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("read referenced blobs: %w", err)
		}
		if h.Valid {
			out[readSHA256(h.String)] = true // an input's hash is never ''
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read referenced blobs: %w", err)
	}
	return out, nil
}
