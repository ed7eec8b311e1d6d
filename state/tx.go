package state

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Tx is one transaction on the state file, handed to the functions given
// to Store.Write (a write inside a group commit) and used by the Store's
// own read and write methods. Its methods run the statements of the
// exported operations (ClaimLease, AcceptResult, Heartbeat, …) inside the
// transaction, so several operations can share one commit.
//
// Its statements are not prepared ahead: the driver (glebarez/go-sqlite
// v1.23) parses a prepared statement again at every execution, so a cache
// of *sql.Stmt saves nothing (docs/sqlite.md).
//
// A Tx is valid only during the function it was passed to, and must not
// be used by several goroutines at once.
type Tx struct {
	tx *sql.Tx
	// ctx is the context the statements run with. In a group commit it
	// is the request's context without its cancellation: a statement
	// interrupted half-way makes SQLite roll back the whole transaction,
	// and with it the other requests of the group. A request whose
	// context ends before its turn is not run at all.
	ctx context.Context
	s   *Store // the Store it belongs to
	v   *Store // its view (view), made on first use
	// broken is set when a Part could not roll its changes back: the
	// transaction has ended, and the group commit runs its writes again.
	broken error
	// writes counts the statements run that may change rows (INSERT,
	// UPDATE, DELETE, REPLACE; with or without RETURNING): a write or Part
	// that fails before its first one has nothing to roll back.
	writes int
}

// noteWrite counts query when it may change rows.
func (t *Tx) noteWrite(query string) {
	q := strings.TrimLeft(query, " \t\r\n")
	if len(q) < 6 {
		return
	}
	switch strings.ToUpper(q[:6]) {
	case "INSERT", "UPDATE", "DELETE", "REPLAC":
		t.writes++
	}
}

// Part runs fn as a part of t that may fail alone: when fn fails, its
// changes are undone and its error returned, and t goes on, so one write
// can try several operations and keep those that succeed (a claim
// granting several leases, some of which lost a race). A part that fails
// before it changed anything costs nothing; one that fails after it did
// cannot be undone in place (Part sets no savepoint, which would cost two
// statements every time): then Part returns an error, and the whole write
// is run again in a new transaction — once; a second such failure fails
// the write (see Store.Write).
func (t *Tx) Part(fn func() error) error {
	if t.broken != nil {
		return t.broken
	}
	before := t.writes
	err := fn()
	if err != nil && t.writes != before {
		t.broken = fmt.Errorf("a part of the write failed after changing rows: %w", err)
		return t.broken
	}
	return err
}

// view returns a Store whose methods run inside t instead of in their own
// transactions: the Tx methods below are the Store's, sharing t.
func (t *Tx) view() *Store {
	if t.v == nil {
		t.v = &Store{path: t.s.path, db: t.s.db, in: t}
		t.v.guard.Store(t.s.guard.Load())
	}
	return t.v
}

// ClaimLease is Store.ClaimLease inside t.
func (t *Tx) ClaimLease(req GrantRequest, now time.Time) (Lease, error) {
	return t.view().ClaimLease(t.ctx, req, now)
}

// ReleaseLease is Store.ReleaseLease inside t.
func (t *Tx) ReleaseLease(token int64, reason string, now time.Time) (bool, error) {
	return t.view().ReleaseLease(t.ctx, token, reason, now)
}

// AcceptResult is Store.AcceptResult inside t.
func (t *Tx) AcceptResult(in ResultInput, pol PolicyFunc, now time.Time) (ResultDecision, error) {
	return t.view().AcceptResult(t.ctx, in, pol, now)
}

// Heartbeat is Store.Heartbeat inside t.
func (t *Tx) Heartbeat(workerID string, now time.Time) (renewed int, err error) {
	return t.view().Heartbeat(t.ctx, workerID, now)
}

// SetWorkerStatus is Store.SetWorkerStatus inside t.
func (t *Tx) SetWorkerStatus(id string, status WorkerStatus, now time.Time) error {
	return t.view().SetWorkerStatus(t.ctx, id, status, now)
}

// Sweep is Store.Sweep inside t, without its read-only check that
// anything is due (the caller checks Store.SweepDue before it writes).
func (t *Tx) Sweep(now time.Time, pol PolicyFunc) (SweepResult, error) {
	res, err := sweepTx(t.ctx, t, now, pol)
	if err != nil {
		return SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// Task is Store.Task inside t (it sees t's own changes).
func (t *Tx) Task(address string) (Task, error) {
	return t.view().Task(t.ctx, address)
}

// Worker is Store.Worker inside t.
func (t *Tx) Worker(id string) (Worker, error) {
	return t.view().Worker(t.ctx, id)
}

// Lease is Store.Lease inside t.
func (t *Tx) Lease(token int64) (Lease, error) {
	return t.view().Lease(t.ctx, token)
}

// Leases is Store.Leases inside t.
func (t *Tx) Leases(task string) ([]Lease, error) {
	return t.view().Leases(t.ctx, task)
}

// ActiveLeases is Store.ActiveLeases inside t.
func (t *Tx) ActiveLeases(workerID string) ([]Lease, error) {
	return t.view().ActiveLeases(t.ctx, workerID)
}

// ExecContext is sql.Tx.ExecContext. Its ctx argument is ignored for
// t's own (see Tx.ctx); so are those of the methods below.
func (t *Tx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	t.noteWrite(query)
	return t.tx.ExecContext(t.ctx, query, args...)
}

// QueryContext is sql.Tx.QueryContext. The rows must be closed before the
// transaction ends.
func (t *Tx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	t.noteWrite(query)
	return t.tx.QueryContext(t.ctx, query, args...)
}

// QueryRowContext is sql.Tx.QueryRowContext.
func (t *Tx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	t.noteWrite(query)
	return t.tx.QueryRowContext(t.ctx, query, args...)
}

// PrepareContext prepares a statement of this transaction (for a loop of
// many rows).
func (t *Tx) PrepareContext(_ context.Context, query string) (*sql.Stmt, error) {
	t.noteWrite(query) // counted once: a prepared write may change rows
	return t.tx.PrepareContext(t.ctx, query)
}

// NewRecommendations is Store.NewRecommendations inside t.
func (t *Tx) NewRecommendations(limit int) ([]Recommendation, error) {
	return t.view().NewRecommendations(t.ctx, limit)
}

// RejectRecommendation is Store.RejectRecommendation inside t.
func (t *Tx) RejectRecommendation(token int64, idx int, reason string, now time.Time) error {
	return t.view().RejectRecommendation(t.ctx, token, idx, reason, now)
}

// Propose is Store.Propose inside t.
func (t *Tx) Propose(in ProposeInput, now time.Time) (Proposal, bool, error) {
	return t.view().Propose(t.ctx, in, now)
}

// Proposal is Store.Proposal inside t.
func (t *Tx) Proposal(id int64) (Proposal, error) {
	return t.view().Proposal(t.ctx, id)
}
