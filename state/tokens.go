package state

import (
	"context"
	"database/sql"
	"fmt"
)

// ErrTokensNotReserved: a grant would take a fencing token past the block
// the last checkpoint reserved (ReserveTokens). It wraps ErrNotClaimable:
// nothing changed, and the claim is tried again once the next checkpoint
// has reserved more.
var ErrTokensNotReserved = fmt.Errorf("no fencing token is reserved for it yet (the next checkpoint reserves more): %w", ErrNotClaimable)

// TokenReservation is the fencing counter and the block reserved past it.
type TokenReservation struct {
	LastToken int64 // the last token granted
	// ReservedThrough is the last token an apply may grant before its
	// next checkpoint; Reserved is false when nothing is reserved (tokens
	// are not limited: a local state).
	ReservedThrough int64
	Reserved        bool
}

// Tokens returns the fencing counter and its reservation.
func (s *Store) Tokens(ctx context.Context) (TokenReservation, error) {
	var r TokenReservation
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		r, err = queryTokens(ctx, tx)
		return err
	})
	return r, err
}

func queryTokens(ctx context.Context, q *Tx) (TokenReservation, error) {
	var r TokenReservation
	var through sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT c.last_token, r.reserved_through FROM fencing_counter c, fencing_reservation r
		WHERE c.id = 1 AND r.id = 1`).Scan(&r.LastToken, &through)
	if err != nil {
		return r, fmt.Errorf("read the fencing counter: %w", err)
	}
	r.ReservedThrough, r.Reserved = through.Int64, through.Valid
	return r, nil
}

// ReserveTokens raises the reservation to through: grants may take tokens
// up to it. A reservation never goes back: a through below the current one
// (or below the last token granted) is ErrInvalid. Like the lock's writes
// it is coordination, not content: it does not bump the serial (a saved
// plan stays valid).
func (s *Store) ReserveTokens(ctx context.Context, through int64) error {
	return s.writeLock(ctx, func(tx *Tx) error {
		r, err := queryTokens(ctx, tx)
		if err != nil {
			return err
		}
		if through < r.LastToken || (r.Reserved && through < r.ReservedThrough) {
			return invalidf("reserve fencing tokens through %d: the counter is at %d, reserved through %d", through, r.LastToken, r.ReservedThrough)
		}
		_, err = tx.ExecContext(ctx, `UPDATE fencing_reservation SET reserved_through = ? WHERE id = 1`, through)
		return err
	})
}

// SkipReservedTokens moves the fencing counter past the reserved block, to
// its end, so that the next token granted is greater than every token an
// apply that had that block may have granted since the checkpoint it came
// from (a takeover after a lost tail: docs/design.md §3 invariant 2). It
// returns the counter before and after (equal when nothing was skipped).
// It does not bump the serial.
func (s *Store) SkipReservedTokens(ctx context.Context) (from, to int64, err error) {
	err = s.writeLock(ctx, func(tx *Tx) error {
		r, err := queryTokens(ctx, tx)
		if err != nil {
			return err
		}
		from, to = r.LastToken, r.LastToken
		if !r.Reserved || r.ReservedThrough <= r.LastToken {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE fencing_counter SET last_token = ? WHERE id = 1`, r.ReservedThrough); err != nil {
			return fmt.Errorf("skip the reserved fencing tokens: %w", err)
		}
		to = r.ReservedThrough
		return nil
	})
	return from, to, err
}
