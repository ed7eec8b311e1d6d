package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// UpsertTask inserts the task, or replaces the definition of the task with
// the same address: name, index, def_hash, spec, budgets (max_attempts,
// max_lost) and status are set from d; failures_used, lost_used, last_error
// and finished_at are reset (a fresh budget, whether or not the def_hash
// changed: docs/design.md §1 retries a failed task with a fresh budget). attempts is
// kept, so attempt numbers stay unique per task. finished_at is set to now
// when d.Status is final. now is updated_at (and created_at for a new task).
//
// Errors: ErrInvalid for an empty address, name or def_hash, an index below
// -1, an unknown status or TaskRunning (only GrantLease makes a task
// running), MaxAttempts < 1, MaxLost < 0, or a spec that is not JSON;
// ErrLeaseHeld when the task has an active lease (end it first).
func (s *Store) UpsertTask(ctx context.Context, d TaskDef, now time.Time) error {
	return s.UpsertTasks(ctx, []TaskDef{d}, now)
}

// UpsertTasks is UpsertTask for many tasks in one transaction: every
// definition is checked first, then all are written, or none (the first
// error, naming its task, rolls the whole batch back). Apply records a
// plan's tasks with it, one commit for the whole record phase.
func (s *Store) UpsertTasks(ctx context.Context, defs []TaskDef, now time.Time) error {
	if len(defs) == 0 {
		return nil // nothing to write: the serial stays
	}
	return s.write(ctx, func(tx *Tx) error { return tx.UpsertTasks(defs, now) })
}

// UpsertTasks is Store.UpsertTasks inside t.
func (t *Tx) UpsertTasks(defs []TaskDef, now time.Time) error {
	for _, d := range defs {
		if err := checkTaskDef(d); err != nil {
			return err
		}
	}
	if len(defs) == 0 {
		return nil
	}
	// A task with an active lease is not redefined under it. Active
	// leases are few (at most one per slot of every worker): one read.
	active, err := queryLeases(t.ctx, t, `WHERE status = 'active'`)
	if err != nil {
		return fmt.Errorf("upsert tasks: %w", err)
	}
	activeToken := make(map[string]int64, len(active))
	for _, l := range active {
		activeToken[l.Task] = l.Token
	}
	for _, d := range defs {
		if token, ok := activeToken[d.Address]; ok {
			return fmt.Errorf("upsert task %s: lease %d is active: %w", d.Address, token, ErrLeaseHeld)
		}
	}
	from, to, err := t.insertRows(`INSERT INTO tasks (address, name, idx, def_hash, spec, status,
			max_attempts, max_lost, created_at, updated_at, finished_at) VALUES `, `
		ON CONFLICT (address) DO UPDATE SET name = excluded.name, idx = excluded.idx,
			def_hash = excluded.def_hash, spec = excluded.spec, status = excluded.status,
			max_attempts = excluded.max_attempts, max_lost = excluded.max_lost,
			failures_used = 0, lost_used = 0, last_error = '',
			updated_at = excluded.updated_at, finished_at = excluded.finished_at`,
		len(defs), 11, upsertTasksPerStatement, func(args []any, i int) []any {
			d := defs[i]
			finished := sql.NullInt64{}
			if d.Status.Finished() {
				finished = nullMS(now)
			}
			return append(args, d.Address, d.Name, d.Index, d.DefHash, string(d.Spec), string(d.Status),
				d.MaxAttempts, d.MaxLost, ms(now), ms(now), finished)
		})
	if err != nil {
		// checkTaskDef refuses what every CHECK of the table would, so a
		// constraint failing here is not expected.
		if sqliteCode(err)&0xff == sqliteConstraint {
			return fmt.Errorf("upsert tasks %s to %s: %w: %v", defs[from].Address, defs[to-1].Address, ErrInvalid, err)
		}
		return fmt.Errorf("upsert tasks %s to %s: %w", defs[from].Address, defs[to-1].Address, err)
	}
	return nil
}

// upsertTasksPerStatement is the most rows one INSERT of UpsertTasks
// carries (11 parameters each; see insertRows): BenchmarkRecordPhase was
// fastest with 50 (of 25, 50, 100, 200 and 500: docs/PERFORMANCE.md).
const upsertTasksPerStatement = 50

// checkTaskDef returns an ErrInvalid error for a definition UpsertTask
// refuses before it writes.
func checkTaskDef(d TaskDef) error {
	switch {
	case d.Address == "" || d.Name == "":
		return invalidf("task address and name must be set, have %q and %q", d.Address, d.Name)
	case d.DefHash == "":
		return invalidf("task %s: def_hash is empty", d.Address)
	case d.Index < -1:
		return invalidf("task %s: index must be -1 (not counted) or >= 0, have %d", d.Address, d.Index)
	case !d.Status.Valid():
		return invalidf("task %s: unknown status %q", d.Address, d.Status)
	case d.Status == TaskRunning:
		return invalidf("task %s: status running is set by GrantLease, not UpsertTask", d.Address)
	case d.MaxAttempts < 1:
		return invalidf("task %s: max_attempts must be at least 1, have %d", d.Address, d.MaxAttempts)
	case d.MaxLost < 0:
		return invalidf("task %s: max_lost must not be negative, have %d", d.Address, d.MaxLost)
	case len(d.Spec) > 0 && !json.Valid(d.Spec):
		return invalidf("task %s: spec is not valid JSON", d.Address)
	}
	return nil
}

const taskColumns = `address, name, idx, def_hash, spec, status, attempts, failures_used, lost_used,
	max_attempts, max_lost, last_error, created_at, updated_at, finished_at`

func scanTask(r scanner) (Task, error) {
	var t Task
	var spec, status string
	var created, updated int64
	var finished sql.NullInt64
	if err := r.Scan(&t.Address, &t.Name, &t.Index, &t.DefHash, &spec, &status, &t.Attempts,
		&t.FailuresUsed, &t.LostUsed, &t.MaxAttempts, &t.MaxLost, &t.LastError,
		&created, &updated, &finished); err != nil {
		return Task{}, err
	}
	if spec != "" {
		t.Spec = []byte(spec)
	}
	t.Status = TaskStatus(status)
	t.CreatedAt = fromMS(created)
	t.UpdatedAt = fromMS(updated)
	t.FinishedAt = fromNullMS(finished)
	return t, nil
}

func queryTasks(ctx context.Context, tx *Tx) ([]Task, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks ORDER BY address`)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	defer rows.Close()
	out := []Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("read tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Task returns one task. Errors: ErrNotFound.
func (s *Store) Task(ctx context.Context, address string) (task Task, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		task, err = tx.Task(address)
		return err
	})
	return task, err
}

// Task is Store.Task inside t (it sees t's own changes).
func (t *Tx) Task(address string) (Task, error) {
	task, err := scanTask(t.QueryRowContext(t.ctx, `SELECT `+taskColumns+` FROM tasks WHERE address = ?`, address))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("task %s: %w", address, ErrNotFound)
	}
	return task, err
}
