package state

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// statementTrace is the function TraceStatements set, or nil.
var statementTrace atomic.Pointer[func(query string, d time.Duration)]

// TraceStatements makes every statement of every Tx (and the BEGIN and
// COMMIT of the write groups) call fn with its SQL and its time, until
// stop is called: a measurement hook for tests and benchmarks
// (docs/PERFORMANCE.md, "Statements per claim and accept"). A statement's
// time runs from its start to the start of the transaction's next
// statement (or its COMMIT or ROLLBACK): the driver steps a query only
// when its rows are read, after the call returns. fn runs on the
// committer's goroutine, between statements.
func TraceStatements(fn func(query string, d time.Duration)) (stop func()) {
	statementTrace.Store(&fn)
	return func() { statementTrace.Store(nil) }
}

// Tx is one transaction on the state file, handed to the functions given
// to Store.Write (a write inside a group commit) and used by the Store's
// own read and write methods. The operations are implemented on Tx, beside
// the Store methods that run them (ClaimLease, AcceptResult, Heartbeat,
// …): a Store method submits one write to the committer (or opens one
// read) and calls its Tx method in it, so several operations can share one
// commit by calling the Tx methods inside one Store.Write. A Tx method
// never opens a transaction of its own. The writes of the apply lock, of
// garbage collection and of the commands that write only while no apply
// runs are not exported on Tx: they run in transactions of their own.
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
	// broken is set when a Part could not roll its changes back: the
	// transaction has ended, and the group commit runs its writes again.
	broken error
	// writes counts the statements run that may change rows (INSERT,
	// UPDATE, DELETE, REPLACE; with or without RETURNING): a write or Part
	// that fails before its first one has nothing to roll back.
	writes int

	// groupEvents: the events appended in a write group wait in events
	// for its end, which writes them in one statement (flushEvents); a
	// Tx of a read writes none.
	groupEvents bool
	events      []pendingEvent

	// traced and tracedAt: the statement being traced and its start.
	traced   string
	tracedAt time.Time
}

// trace ends the traced statement, if any, and starts tracing query
// ("" = none).
func (t *Tx) trace(query string) {
	fn := statementTrace.Load()
	if fn == nil {
		t.traced = ""
		return
	}
	now := time.Now()
	if t.traced != "" {
		(*fn)(t.traced, now.Sub(t.tracedAt))
	}
	t.traced, t.tracedAt = query, now
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

// guardedUpdate runs an UPDATE whose WHERE makes a write's checks and
// reports whether it changed a row. One that matched none changed nothing:
// it is not counted as a write (nothing to undo; a group of such leaves
// the serial alone), and the caller decides another way.
func (t *Tx) guardedUpdate(query string, args ...any) (changed bool, err error) {
	n, err := changedRows(t.ExecContext(t.ctx, query, args...))
	if err != nil {
		return false, err
	}
	if n == 0 {
		t.writes--
	}
	return n > 0, nil
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

// ExecContext is sql.Tx.ExecContext. Its ctx argument is ignored for
// t's own (see Tx.ctx); so are those of the methods below.
func (t *Tx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	t.noteWrite(query)
	t.trace(query)
	return t.tx.ExecContext(t.ctx, query, args...)
}

// QueryContext is sql.Tx.QueryContext. The rows must be closed before the
// transaction ends.
func (t *Tx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	t.noteWrite(query)
	t.trace(query)
	return t.tx.QueryContext(t.ctx, query, args...)
}

// QueryRowContext is sql.Tx.QueryRowContext.
func (t *Tx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	t.noteWrite(query)
	t.trace(query)
	return t.tx.QueryRowContext(t.ctx, query, args...)
}

// PrepareContext prepares a statement of this transaction (for a loop of
// many rows).
func (t *Tx) PrepareContext(_ context.Context, query string) (*sql.Stmt, error) {
	t.noteWrite(query) // counted once: a prepared write may change rows
	return t.tx.PrepareContext(t.ctx, query)
}

// insertRows runs head (an INSERT … VALUES), n rows of perRow
// placeholders, whose arguments row appends to args for row i, then tail
// (an ON CONFLICT clause, or ""), as one statement per perStatement rows.
// The driver prepares a statement again at every execution, so rows
// shared by one statement save preparing; it also binds every parameter
// by a scan of all the arguments, so a statement's binding grows with
// the square of its parameters, which perStatement keeps small
// (docs/PERFORMANCE.md, "Rows a statement"). On an error it returns the
// rows [from, to) of the statement that failed.
func (t *Tx) insertRows(head, tail string, n, perRow, perStatement int, row func(args []any, i int) []any) (from, to int, err error) {
	one := "(" + strings.Repeat("?, ", perRow-1) + "?)"
	for from = 0; from < n; from = to {
		to = min(n, from+perStatement)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, perRow*(to-from))
		for i := from; i < to; i++ {
			if i > from {
				q.WriteString(", ")
			}
			q.WriteString(one)
			args = row(args, i)
		}
		q.WriteString(tail)
		if _, err := t.ExecContext(t.ctx, q.String(), args...); err != nil {
			return from, to, err
		}
	}
	return n, n, nil
}
