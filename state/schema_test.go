package state

import (
	"context"
	"strings"
	"testing"
	"time"
)

// seed creates pool "p", worker "w1" (ttl 10s) and queued task "task.a".
func seed(t testing.TB, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 4, Capacity: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterWorker(ctx, Worker{ID: "w1", Pool: "p", Capacity: 1, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertTask(ctx, TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h1", Status: TaskQueued, MaxAttempts: 3, MaxLost: 3}, t0); err != nil {
		t.Fatal(err)
	}
}

// rawLease inserts an active lease for task.a with raw SQL, with the
// counter's next token, as a grant does.
const rawLease = `INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
VALUES ((SELECT last_token + 1 FROM fencing_counter), 'task.a', 'h1', 'w1', 1, 'active', 0, 0, 10, 20)`

// rawLaunch inserts launch 1 of pool p in apply "a".
const rawLaunch = `INSERT INTO launches (apply_id, pool, seq, provider, credential_hash, status, launched_at)
VALUES ('a', 'p', 1, 'local', '` + "0000000000000000000000000000000000000000000000000000000000000000" + `', 'launched', 0)`

// rawJoinToken inserts join token "jt" of pool p.
const rawJoinToken = `INSERT INTO join_tokens (id, pool, secret_hash, created_at, expires_at)
VALUES ('jt', 'p', '` + "1111111111111111111111111111111111111111111111111111111111111111" + `', 0, 10)`

// TestSchemaInvariants checks that SQLite itself refuses what the design
// forbids, with raw SQL that bypasses the Go API. Each case runs on its own
// fresh, seeded file; setup runs first, then stmt must fail with an error
// containing want.
func TestSchemaInvariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup string
		stmt  string
		want  string
	}{
		{"second active lease for one task", rawLease, rawLease, "UNIQUE constraint failed: leases.task"},
		{"lease token taken before", rawLease + `; UPDATE leases SET status = 'expired', ended_at = 11`,
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
			 VALUES (1, 'task.a', 'h1', 'w1', 2, 'active', 0, 0, 10, 20)`, "UNIQUE constraint failed: leases.token"},
		{"lease token below the counter", `UPDATE fencing_counter SET last_token = 7`,
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
			 VALUES (3, 'task.a', 'h1', 'w1', 1, 'active', 0, 0, 10, 20)`, "above every fencing token taken before"},
		{"lease token beyond the reserved block", `UPDATE fencing_reservation SET reserved_through = 3`,
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
			 VALUES (4, 'task.a', 'h1', 'w1', 1, 'active', 0, 0, 10, 20)`, "beyond the reserved block"},
		{"fencing counter goes back", `UPDATE fencing_counter SET last_token = 5`, `UPDATE fencing_counter SET last_token = 4`, "strictly increase"},
		{"fencing counter stays", "", `UPDATE fencing_counter SET last_token = last_token`, "strictly increase"},
		{"fencing counter deleted", "", `DELETE FROM fencing_counter`, "cannot be deleted"},
		{"fencing counter id changes", "", `UPDATE fencing_counter SET id = 2, last_token = last_token + 1`, "strictly increase"},
		{"fencing token beyond the reserved block", `UPDATE fencing_reservation SET reserved_through = 3`,
			`UPDATE fencing_counter SET last_token = 4`, "beyond the reserved block"},
		{"fencing token within the reserved block but going back", `UPDATE fencing_reservation SET reserved_through = 9;
			UPDATE fencing_counter SET last_token = 5`, `UPDATE fencing_counter SET last_token = 4`, "strictly increase"},
		{"lease expires after hard expiry", "",
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
			 VALUES (1, 'task.a', 'h1', 'w1', 1, 'active', 0, 0, 30, 20)`, "CHECK constraint failed"},
		{"active lease with ended_at", rawLease, `UPDATE leases SET ended_at = 5`, "CHECK constraint failed"},
		{"ended lease without ended_at", rawLease, `UPDATE leases SET status = 'expired'`, "CHECK constraint failed"},
		{"ended lease reactivated", rawLease + `; UPDATE leases SET status = 'expired', ended_at = 11`,
			`UPDATE leases SET status = 'active', ended_at = NULL`, "never changes status again"},
		{"lease identity changed", rawLease, `UPDATE leases SET worker_id = 'w1'`, "identity"},
		{"lease deleted", rawLease, `DELETE FROM leases`, "never deleted"},
		{"lease for unknown worker", "",
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
			 VALUES (1, 'task.a', 'h1', 'w-nobody', 1, 'active', 0, 0, 10, 20)`, "FOREIGN KEY constraint failed"},
		{"lease status", "",
			`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at, ended_at)
			 VALUES (1, 'task.a', 'h1', 'w1', 1, 'lost', 0, 0, 10, 20, 5)`, "CHECK constraint failed"},
		{"worker status", "", `UPDATE workers SET status = 'dead'`, "CHECK constraint failed"},
		{"worker for unknown pool", "",
			`INSERT INTO workers (id, pool, capacity, status, registered_at, last_heartbeat_at, heartbeat_interval_ms, ttl_ms)
			 VALUES ('w2', 'nope', 1, 'active', 0, 0, 1, 1)`, "FOREIGN KEY constraint failed"},
		{"task status", "", `UPDATE tasks SET status = 'done'`, "CHECK constraint failed"},
		{"task spec not JSON", "", `UPDATE tasks SET spec = '{'`, "CHECK constraint failed"},
		{"task text in integer column", "", `UPDATE tasks SET attempts = 'many'`, "cannot store TEXT value in INTEGER column"},
		{"failure class", rawLease,
			`INSERT INTO attempts (task, number, worker_id, fencing_token, started_at, failure_class)
			 VALUES ('task.a', 1, 'w1', 1, 0, 'oops')`, "CHECK constraint failed"},
		{"retry kind", "",
			`INSERT INTO retry_directives (task, next_attempt, not_before, kind, created_at) VALUES ('task.a', 2, 0, 'refused', 0)`,
			"CHECK constraint failed"},
		{"second open retry directive", `INSERT INTO retry_directives (task, next_attempt, not_before, kind, created_at) VALUES ('task.a', 2, 0, 'lost', 0)`,
			`INSERT INTO retry_directives (task, next_attempt, not_before, kind, created_at) VALUES ('task.a', 3, 0, 'failure', 0)`,
			"UNIQUE constraint failed"},
		{"result decision", "",
			`INSERT INTO results (idempotency_key, token, decision, received_at) VALUES ('k', 1, 'maybe', 0)`, "CHECK constraint failed"},
		{"result reason", "",
			`INSERT INTO results (idempotency_key, token, decision, reason, received_at) VALUES ('k', 1, 'rejected', 'too_late', 0)`,
			"CHECK constraint failed"},
		{"accepted result with reason", "",
			`INSERT INTO results (idempotency_key, token, decision, reason, received_at) VALUES ('k', 1, 'accepted', 'stale_token', 0)`,
			"CHECK constraint failed"},
		{"rejected result without reason", "",
			`INSERT INTO results (idempotency_key, token, decision, received_at) VALUES ('k', 1, 'rejected', 0)`,
			"CHECK constraint failed"},
		{"second accepted result for a token", `INSERT INTO results (idempotency_key, token, decision, received_at) VALUES ('k1', 1, 'accepted', 0)`,
			`INSERT INTO results (idempotency_key, token, decision, received_at) VALUES ('k2', 1, 'accepted', 0)`,
			"UNIQUE constraint failed"},
		{"event updated", `INSERT INTO events (at, kind) VALUES (0, 'x')`, `UPDATE events SET message = 'changed'`, "append-only"},
		{"event deleted", `INSERT INTO events (at, kind) VALUES (0, 'x')`, `DELETE FROM events`, "append-only"},
		{"second apply lock", `INSERT INTO apply_lock (id, lock_id, started_at, expires_at) VALUES (1, 'a', 0, 1)`,
			`INSERT INTO apply_lock (id, lock_id, started_at, expires_at) VALUES (2, 'b', 0, 1)`, "CHECK constraint failed"},
		{"lineage changed", "", `UPDATE state_info SET lineage = 'other'`, "never changes"},
		{"hash key changed", "", `UPDATE state_info SET hash_key = 'other'`, "never changes"},
		{"serial goes back", `UPDATE state_info SET serial = 10`, `UPDATE state_info SET serial = 9`, "backwards"},
		{"state_info deleted", "", `DELETE FROM state_info`, "cannot be deleted"},
		{"launch registers twice", rawLaunch + `; UPDATE launches SET status = 'registered', worker_id = 'w1', registered_at = 1`,
			`UPDATE launches SET status = 'launched', worker_id = NULL, registered_at = NULL`, "never changes status again"},
		{"expired launch registers", rawLaunch + `; UPDATE launches SET status = 'expired'`,
			`UPDATE launches SET status = 'registered', worker_id = 'w1', registered_at = 1`, "never changes status again"},
		{"registered launch without worker", rawLaunch, `UPDATE launches SET status = 'registered'`, "CHECK constraint failed"},
		{"launch identity", rawLaunch, `UPDATE launches SET seq = 2`, "identity"},
		{"launch status", rawLaunch, `UPDATE launches SET status = 'maybe'`, "CHECK constraint failed"},
		{"short credential hash", "", `INSERT INTO launches (apply_id, pool, seq, provider, credential_hash, status, launched_at)
			VALUES ('a', 'p', 1, 'local', 'abc', 'launched', 0)`, "CHECK constraint failed"},
		{"same credential twice", rawLaunch, strings.Replace(rawLaunch, "'a', 'p', 1", "'a', 'p', 2", 1), "UNIQUE constraint failed"},
		{"join token changes", rawJoinToken, `UPDATE join_tokens SET pool = 'q'`, "only changes by being revoked"},
		{"join token revoked twice", rawJoinToken + `; UPDATE join_tokens SET revoked_at = 5`, `UPDATE join_tokens SET revoked_at = 6`, "only changes by being revoked"},
		{"apply ends without reason", `INSERT INTO applies (id, started_at) VALUES ('a', 0)`, `UPDATE applies SET ended_at = 1`, "CHECK constraint failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s)
			if tt.setup != "" {
				if _, err := s.db.Exec(tt.setup); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			_, err := s.db.Exec(tt.stmt)
			if err == nil {
				t.Fatalf("SQLite accepted %s", tt.stmt)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestSchemaAllowsLegalHistory checks the other side: a lease can end and a
// new active lease for the same task follows; events can be appended.
func TestSchemaAllowsLegalHistory(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	for _, stmt := range []string{
		rawLease,
		`UPDATE leases SET status = 'completed', ended_at = 11 WHERE token = 1`,
		rawLease,
		`UPDATE leases SET status = 'completed', ended_at = 12 WHERE token = 2`,
		// The grant of a wdc from before migration 013: the counter
		// bumped first, then the lease with that token.
		`UPDATE fencing_counter SET last_token = last_token + 1 WHERE id = 1`,
		`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
		 VALUES ((SELECT last_token FROM fencing_counter), 'task.a', 'h1', 'w1', 1, 'active', 0, 0, 10, 20)`,
		`INSERT INTO events (at, kind) VALUES (0, 'x')`,
		`INSERT INTO events (at, kind) VALUES (0, 'y')`,
	} {
		if _, err := s.db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var counter, tokens int64
	if err := s.db.QueryRow(`SELECT (SELECT last_token FROM fencing_counter), (SELECT group_concat(token, '') FROM (SELECT token FROM leases ORDER BY token))`).Scan(&counter, &tokens); err != nil {
		t.Fatal(err)
	}
	if counter != 3 || tokens != 123 {
		t.Errorf("counter %d, lease tokens %d, want 3 and 123", counter, tokens)
	}
}
