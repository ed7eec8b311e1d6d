package state

import (
	"context"
	"fmt"
	"time"
)

// AppendEvent appends e to the event log at time now (e.At and e.Seq are
// ignored; the state assigns the next seq). Errors: ErrInvalid for an empty
// Kind.
func (s *Store) AppendEvent(ctx context.Context, e Event, now time.Time) error {
	return s.write(ctx, func(tx *Tx) error { return tx.AppendEvent(e, now) })
}

// AppendEvent is Store.AppendEvent inside t.
func (t *Tx) AppendEvent(e Event, now time.Time) error {
	if e.Kind == "" {
		return invalidf("event kind is empty")
	}
	return appendEvent(t.ctx, t, e, now)
}

// appendEvent appends e to the event log at now: in a write group, at
// the group's end, with the group's other events (flushEvents); it counts
// as a write then, so a write that fails after it is undone as one that
// changed rows.
func appendEvent(ctx context.Context, tx *Tx, e Event, now time.Time) error {
	if tx.groupEvents {
		tx.events = append(tx.events, pendingEvent{at: ms(now), Event: e})
		tx.writes++
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO events (at, kind, task, worker_id, token, message)
		VALUES (?, ?, ?, ?, ?, ?)`, ms(now), e.Kind, e.Task, e.WorkerID, e.Token, e.Message)
	if err != nil {
		return fmt.Errorf("append %s event: %w", e.Kind, err)
	}
	return nil
}

// pendingEvent is an event of a write group not yet written.
type pendingEvent struct {
	Event
	at int64 // ms
}

// eventsPerStatement is the most events one INSERT of flushEvents
// carries (6 parameters each; see insertRows).
const eventsPerStatement = 32

// flushEvents writes the events the write group appended, in their order
// (so their seq).
func (t *Tx) flushEvents() error {
	pending := t.events
	t.events = nil
	from, to, err := t.insertRows(`INSERT INTO events (at, kind, task, worker_id, token, message) VALUES `, "",
		len(pending), 6, eventsPerStatement, func(args []any, i int) []any {
			e := pending[i]
			return append(args, e.at, e.Kind, e.Task, e.WorkerID, e.Token, e.Message)
		})
	if err != nil {
		return fmt.Errorf("append %d events (%s first): %w", to-from, pending[from].Kind, err)
	}
	return nil
}

// Events returns the events of the task (task "" = all events) in ascending
// seq order.
func (s *Store) Events(ctx context.Context, task string) ([]Event, error) {
	out := []Event{}
	err := s.read(ctx, func(tx *Tx) error {
		q := `SELECT seq, at, kind, task, worker_id, token, message FROM events`
		var args []any
		if task != "" {
			q += ` WHERE task = ?`
			args = append(args, task)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY seq`, args...)
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var e Event
			var at int64
			if err := rows.Scan(&e.Seq, &at, &e.Kind, &e.Task, &e.WorkerID, &e.Token, &e.Message); err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			e.At = fromMS(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}
