package state

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// schemaObject is one table, index or trigger of the state's schema.
type schemaObject struct {
	kind string // "table", "index" or "trigger", as sqlite_master names it
	name string
}

func (o schemaObject) String() string { return o.kind + " " + o.name }

// currentSchema lists every table, index and trigger a state file at
// SchemaVersion() has. Open and OpenReadOnly refuse a file that lacks one
// (a DamagedError), so a damaged file fails at once instead of failing
// query by query later. TestCurrentSchemaListed keeps the list equal to
// what the migrations create: a new migration that adds or removes an
// object updates it.
var currentSchema = []schemaObject{
	{"table", "applies"},
	{"table", "apply_lock"},
	{"table", "attempt_artifacts"},
	{"table", "attempts"},
	{"table", "edge_records"},
	{"table", "events"},
	{"table", "fencing_counter"},
	{"table", "fencing_reservation"},
	{"table", "join_tokens"},
	{"table", "launches"},
	{"table", "leases"},
	{"table", "pools"},
	{"table", "proposals"},
	{"table", "put_id"},
	{"table", "recommendations"},
	{"table", "results"},
	{"table", "retry_directives"},
	{"table", "schema_migrations"},
	{"table", "state_info"},
	{"table", "tasks"},
	{"table", "workers"},

	{"index", "events_task"},
	{"index", "launches_open"},
	{"index", "leases_one_active_per_task"},
	{"index", "leases_task"},
	{"index", "leases_worker_active"},
	{"index", "recommendations_new"},
	{"index", "results_one_accepted_per_token"},
	{"index", "retry_directives_one_open_per_task"},
	{"index", "tasks_status"},
	{"index", "workers_pool"},

	{"trigger", "attempt_artifacts_immutable"},
	{"trigger", "attempt_artifacts_no_delete"},
	{"trigger", "events_no_delete"},
	{"trigger", "events_no_update"},
	{"trigger", "fencing_counter_increases"},
	{"trigger", "fencing_counter_no_delete"},
	{"trigger", "fencing_reservation_increases"},
	{"trigger", "fencing_reservation_no_delete"},
	{"trigger", "join_tokens_revoke_once"},
	{"trigger", "launches_identity_immutable"},
	{"trigger", "launches_register_once"},
	{"trigger", "leases_identity_immutable"},
	{"trigger", "leases_no_delete"},
	{"trigger", "leases_no_reactivation"},
	{"trigger", "leases_take_token"},
	{"trigger", "proposals_decide_once"},
	{"trigger", "proposals_identity_immutable"},
	{"trigger", "proposals_no_delete"},
	{"trigger", "put_id_no_delete"},
	{"trigger", "recommendations_decide_once"},
	{"trigger", "recommendations_from_accepted_result"},
	{"trigger", "recommendations_identity_immutable"},
	{"trigger", "recommendations_no_delete"},
	{"trigger", "state_info_hash_key_immutable"},
	{"trigger", "state_info_lineage_immutable"},
	{"trigger", "state_info_no_delete"},
	{"trigger", "state_info_serial_increases"},
}

// DamagedError is returned (wrapping ErrDamaged) by Open, OpenReadOnly and
// Inspect when a state file records a schema version this wdc knows but
// lacks tables, indexes or triggers of that version: someone or something
// dropped them. wdc refuses such a file rather than fail (or wait) on every
// query that touches what is missing.
type DamagedError struct {
	Path    string   // the state file as given to Open/OpenReadOnly
	Version int      // the schema version the file records
	Missing []string // what is missing, e.g. "table leases", "index tasks_status"; sorted, tables first
}

// Error names the file and what it lacks, and says what to do: restore a
// backup, or move the file away to start fresh.
func (e *DamagedError) Error() string {
	return fmt.Sprintf("state file %s is damaged: it lacks %s of schema version %d. Restore the file from a backup; "+
		"or, to start a fresh state (every task runs again), move it away with its -wal and -shm files, if any: mv %s %s.damaged",
		e.Path, e.What(), e.Version, e.Path, e.Path)
}

// What names what is missing, briefly: a dropped table takes its indexes
// and triggers with it, so when tables are missing it names them and
// counts the rest ("table leases and 7 indexes and triggers"); otherwise
// it names each ("index tasks_status, trigger leases_no_delete").
func (e *DamagedError) What() string {
	var tables []string
	for _, m := range e.Missing {
		if name, ok := strings.CutPrefix(m, "table "); ok {
			tables = append(tables, name)
		}
	}
	if len(tables) == 0 {
		return strings.Join(e.Missing, ", ")
	}
	what := "table " + strings.Join(tables, ", table ")
	if rest := len(e.Missing) - len(tables); rest > 0 {
		what += fmt.Sprintf(" and %d %s", rest, map[bool]string{true: "index or trigger", false: "indexes and triggers"}[rest == 1])
	}
	return what
}

// Unwrap returns ErrDamaged.
func (e *DamagedError) Unwrap() error { return ErrDamaged }

// querier is what verifySchema and checkLines read with: a *sql.DB, a
// *sql.Conn or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// verifySchema checks that the database holds every object of
// currentSchema; the file p records schema version version (which must be
// SchemaVersion()). It returns a *DamagedError naming what is missing.
func verifySchema(ctx context.Context, q querier, p string, version int) error {
	rows, err := q.QueryContext(ctx, `SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')`)
	if err != nil {
		return fmt.Errorf("read the schema of %s: %w", p, err)
	}
	defer rows.Close()
	have := map[schemaObject]bool{}
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.kind, &o.name); err != nil {
			return fmt.Errorf("read the schema of %s: %w", p, err)
		}
		have[o] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the schema of %s: %w", p, err)
	}
	var missing []schemaObject
	for _, o := range currentSchema {
		if !have[o] {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return verifySingletons(ctx, q, p, version)
	}
	rank := map[string]int{"table": 0, "index": 1, "trigger": 2}
	sort.SliceStable(missing, func(i, j int) bool { return rank[missing[i].kind] < rank[missing[j].kind] })
	names := make([]string, len(missing))
	for i, o := range missing {
		names[i] = o.String()
	}
	return &DamagedError{Path: p, Version: version, Missing: names}
}

// singletonTables are the tables the first migrations fill with their one
// row (id 1), which every write and read of the state needs: the lineage
// and serial, the fencing counter and its reservation, the put id.
// singletonsQuery reads, in this order, whether each holds its row.
var singletonTables = []string{"state_info", "fencing_counter", "fencing_reservation", "put_id"}

const singletonsQuery = `SELECT EXISTS (SELECT 1 FROM state_info WHERE id = 1), EXISTS (SELECT 1 FROM fencing_counter WHERE id = 1),
	EXISTS (SELECT 1 FROM fencing_reservation WHERE id = 1), EXISTS (SELECT 1 FROM put_id WHERE id = 1)`

// verifySingletons checks that every table of singletonTables holds its
// row (its guard trigger refuses a DELETE, but a file can be changed by
// other means than wdc). It returns a *DamagedError naming each row that
// is missing ("the row of table state_info").
func verifySingletons(ctx context.Context, q querier, p string, version int) error {
	rows, err := q.QueryContext(ctx, singletonsQuery)
	if err != nil {
		return fmt.Errorf("read the schema of %s: %w", p, err)
	}
	defer rows.Close()
	var have [4]bool
	if rows.Next() {
		err = rows.Scan(&have[0], &have[1], &have[2], &have[3])
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return fmt.Errorf("read the schema of %s: %w", p, err)
	}
	var missing []string
	for i, t := range singletonTables {
		if !have[i] {
			missing = append(missing, "the row of table "+t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &DamagedError{Path: p, Version: version, Missing: missing}
}
