// Package state is wdc's durable state: one SQLite file (by default
// .wdc/state.db) holding pools, the worker registry, tasks and their
// attempts, leases with fencing tokens, retry directives, results, an
// append-only event log and the apply lock.
//
// # What it owns, and what it does not
//
// All SQL of the project lives here: the schema (numbered, embedded,
// forward-only migrations in migrations/NNN_name.sql, recorded in
// schema_migrations), the queries and the transactions (and, for tests and
// benchmarks only, the raw claim loop of package statetest). The package
// knows nothing of HCL, plans, providers or the protocol: callers pass
// plain records and get plain records back. No function reads the clock:
// every operation where time matters takes now as a parameter. Times are
// stored as INTEGER milliseconds since the Unix epoch, UTC; durations as
// whole milliseconds.
//
// It applies the lifecycle decision and does not make it. What an ended
// attempt means for its task (retried or not, which budget it spends, when
// the retry may start, failed for good, dependants queued or cancelled, and
// the words of the task's event and last error) is decided by package
// state/lifecycle, a pure function: state reads the facts it needs (the
// task's budgets and the attempts spent) in the transaction that ends the
// attempt, asks lifecycle.Decide, and writes the decision in that same
// transaction. Nor does it decide which worker may claim what, when to
// sweep, drain or lose a worker, or which tasks to finish: the engine's
// coordinator and apply do, and use this package to record their
// decisions atomically. It enforces the invariants of docs/design.md §3
// that concern the state, in its schema (triggers, unique and partial
// indexes, CHECK constraints) and in its transactions.
//
// # Imports
//
// database/sql, with the SQLite driver of github.com/glebarez/sqlite (a
// GORM dialector over the pure-Go github.com/glebarez/go-sqlite; GORM only
// opens the *sql.DB); modernc.org/sqlite/lib and modernc.org/libc, to
// configure SQLite before its first connection (sqlite_config.go);
// golang.org/x/sys/unix, to say why a file or folder cannot be read or
// written (file_errors.go); and, of wdc, only state/lifecycle, which
// imports nothing of wdc. It imports nothing above it: the dependency
// direction is cmd → engine/* → state.
//
// # Connections and transactions
//
// The file is used through a *sql.DB with hand-written SQL. The connection
// string (DSN) sets page_size(2048) (for a file it creates), journal_mode(WAL),
// synchronous(FULL), foreign_keys(1) and _txlock=immediate, so every write
// transaction is BEGIN IMMEDIATE; the driver
// sets busy_timeout(5000) first. _time_format is never used (it silently
// disables _txlock).
//
// Every write goes through one committer goroutine (Store.Write, group
// commit: docs/sqlite.md), which runs the writes submitted together in one
// transaction and bumps state_info.serial once in a transaction that changed
// the state's content: the serial changes on every write of the state's
// content, and a saved plan that recorded (lineage, serial) can tell that the
// state moved. Each write is implemented as a method of Tx, the
// transaction (as are the reads a write needs), beside the Store method
// that submits it to the committer and calls it; a caller that needs
// several operations in one commit calls the exported Tx methods inside one
// Store.Write. The apply lock's own methods (acquire, renew, release,
// force-unlock) do not bump the serial: the lock is coordination beside the
// content, as Terraform's lock is, and taking it must not make a saved plan
// stale. GuardWrites fences a Store by its lock: each content write then
// checks, in its own transaction, that the lock is still held, so an apply
// whose lock was removed or taken over cannot write a row more. The lineage
// is random hex set once when the file is created.
//
// Opening a new file is safe when several processes race: a new state file
// is made and migrated under a temporary name beside it and linked into
// place only when complete (so nobody ever sees it empty or half made, and
// the switch to WAL happens in a file nobody else has open); migrations of
// an existing file run in one BEGIN IMMEDIATE transaction that re-reads
// schema_migrations after taking the lock, and an open or migration step
// that fails with SQLITE_BUSY is retried with backoff for up to about 10 s.
// A file written by a newer wdc (a schema version this binary does not
// know) is refused with ErrNewerSchema. OpenReadOnly (used by `wdc plan`)
// opens with mode=ro and never creates, migrates or writes the database
// file.
//
// # A state file wdc refuses
//
// Open and OpenReadOnly check, after migrating, that the file has every
// table, index and trigger of its schema version (a *DamagedError names what
// is missing), so a damaged file fails the command at once instead of
// failing every query that touches it. A file of 0 bytes is refused
// (*EmptyFileError), never silently re-created. A folder or file that cannot
// be written or read gives an *AccessError saying which path and why, and a
// full disk a *DiskFullError naming the file, from every write. Content
// SQLite finds damaged (SQLITE_CORRUPT) gives a *CorruptError naming the
// file and what to do, from every read and write; QuickCheck looks for it
// before a command writes anything. Inspect
// reports all of these, and SQLite's PRAGMA integrity_check, without
// writing: `wdc doctor` shows them.
//
// # Durability decision: synchronous=FULL
//
// The fencing counter must never go backwards, not even after a power loss:
// a token handed to a worker and then lost by a rolled-back WAL would be
// granted again to another worker, and two holders would share one token.
// With WAL and synchronous=NORMAL the last transactions can roll back on
// power loss, so wdc uses synchronous=FULL: every commit is synced before it
// returns. docs/sqlite.md has the measured cost (claims ~2,800/s → ~935/s on one process;
// renewals ~23,000/s → ~1,390/s); the remedy is the group commit above
// (several claims, renewals and results share one commit and its fsync), not
// weaker syncing.
//
// # Schema summary (migrations/001_initial.sql)
//
//   - state_info: one row (lineage, serial, and from migration 006 the
//     hash_key that keys the hashes standing for sensitive values in specs);
//     the lineage and the key cannot change and the serial cannot go down
//     (triggers). The file and its side files are made 0600 (modes.go).
//   - pools, workers: the registry; worker status CHECK in
//     active/draining/stale/gone; workers reference pools.
//   - tasks: address, definition (name, idx, def_hash, spec JSON), status
//     CHECK in pending/queued/running/succeeded/failed/cancelled, attempt
//     counter and budgets.
//   - fencing_counter: one row, last_token; only ever increases (trigger).
//   - leases: token INTEGER PRIMARY KEY is the fencing token: a lease is
//     inserted with the counter's next token and moves the counter to it,
//     and a lease whose token is below the counter is refused (trigger,
//     from migration 013; before it, a grant bumped the counter and the
//     lease had to carry that value, which the trigger still accepts from
//     an older wdc's apply running on a migrated file); status CHECK in
//     active/completed/expired/released/revoked; a unique partial index allows
//     at most one active lease per task; ended_at is set exactly when the lease
//     is not active; identity columns are immutable; an ended lease never
//     changes status again; leases are never deleted.
//   - attempts: (task, number) primary key, one per lease (fencing_token
//     unique); failure_class CHECK in failure/lost/refused or NULL.
//   - retry_directives: kind CHECK in failure/lost; at most one unconsumed
//     directive per task.
//   - results: keyed by idempotency key; decision CHECK in accepted/rejected;
//     a reason (stale_token/lease_expired/wrong_worker/unknown_lease) exactly
//     when rejected; at most one accepted result per token.
//   - events: append-only log (UPDATE and DELETE abort in triggers).
//   - apply_lock: at most one row (id = 1): lock_id, holder, host, pid,
//     started_at, expires_at.
//
// Later migrations add applies, launches and join tokens (003), the
// artifacts an accepted result binds (004), and chaining (005, see
// proposals.go): recommendations, recorded only with an accepted result
// (a trigger checks it), status new → proposed or rejected once;
// proposals, one per recommendation at most (UNIQUE (source_token,
// source_index)), whose identity never changes and whose status leaves
// pending once; and edge_records, the approval streak an earned edge
// approves by. For a state kept in a backend, 007 adds the block of
// fencing tokens a checkpoint reserves (tokens.go) and 008 the put id
// that makes a copy put back differ from the objects before it (copy.go);
// neither is content (the serial stays).
package state
