-- 001_initial: the first wdc state schema.
--
-- Conventions: every table is STRICT; times are INTEGER milliseconds since the
-- Unix epoch (UTC); NULL means "not set" for optional times. Status columns
-- carry CHECK constraints with exactly the enumerations of DESIGN §2 (keep them
-- in step with state/records.go). Invariants that matter for correctness are
-- enforced here, by SQLite, not only by Go code.

-- state_info: one row. lineage is set once, when the file is created, and never
-- changes; serial is bumped by every write transaction (Store.write).
CREATE TABLE state_info (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    lineage TEXT    NOT NULL CHECK (length(lineage) > 0),
    serial  INTEGER NOT NULL DEFAULT 0 CHECK (serial >= 0)
) STRICT;

INSERT INTO state_info (id, lineage, serial) VALUES (1, lower(hex(randomblob(16))), 0);

CREATE TRIGGER state_info_lineage_immutable
BEFORE UPDATE OF lineage ON state_info
WHEN NEW.lineage IS NOT OLD.lineage
BEGIN
    SELECT RAISE(ABORT, 'state_info.lineage is set once and never changes');
END;

CREATE TRIGGER state_info_serial_increases
BEFORE UPDATE OF serial ON state_info
WHEN NEW.serial < OLD.serial
BEGIN
    SELECT RAISE(ABORT, 'state_info.serial never goes backwards');
END;

CREATE TRIGGER state_info_no_delete
BEFORE DELETE ON state_info
BEGIN
    SELECT RAISE(ABORT, 'state_info cannot be deleted');
END;

-- pools: the pools apply has seen. labels is a JSON object of strings.
CREATE TABLE pools (
    name       TEXT    PRIMARY KEY CHECK (length(name) > 0),
    provider   TEXT    NOT NULL CHECK (length(provider) > 0),
    min        INTEGER NOT NULL CHECK (min >= 0),
    max        INTEGER NOT NULL CHECK (max >= min),
    capacity   INTEGER NOT NULL CHECK (capacity >= 1),
    labels     TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels) AND json_type(labels) = 'object'),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- workers: the registry. Durations are milliseconds.
CREATE TABLE workers (
    id                    TEXT    PRIMARY KEY CHECK (length(id) > 0),
    pool                  TEXT    NOT NULL REFERENCES pools (name),
    labels                TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels) AND json_type(labels) = 'object'),
    capacity              INTEGER NOT NULL CHECK (capacity >= 1),
    status                TEXT    NOT NULL CHECK (status IN ('active', 'draining', 'stale', 'gone')),
    host                  TEXT    NOT NULL DEFAULT '',
    pid                   INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    version               TEXT    NOT NULL DEFAULT '',
    registered_at         INTEGER NOT NULL,
    last_heartbeat_at     INTEGER NOT NULL,
    heartbeat_interval_ms INTEGER NOT NULL CHECK (heartbeat_interval_ms > 0),
    ttl_ms                INTEGER NOT NULL CHECK (ttl_ms > 0)
) STRICT;

CREATE INDEX workers_pool ON workers (pool);

-- tasks: one row per task instance (address), with its current definition,
-- status and budgets. attempts counts every lease ever granted for the task
-- (it is never reset, so attempt numbers stay unique per task); failures_used
-- and lost_used are the budgets spent under the current definition.
CREATE TABLE tasks (
    address       TEXT    PRIMARY KEY CHECK (length(address) > 0),
    name          TEXT    NOT NULL CHECK (length(name) > 0),
    idx           INTEGER NOT NULL DEFAULT -1 CHECK (idx >= -1),
    def_hash      TEXT    NOT NULL CHECK (length(def_hash) > 0),
    spec          TEXT    NOT NULL DEFAULT '' CHECK (spec = '' OR json_valid(spec)),
    status        TEXT    NOT NULL CHECK (status IN ('pending', 'queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    failures_used INTEGER NOT NULL DEFAULT 0 CHECK (failures_used >= 0),
    lost_used     INTEGER NOT NULL DEFAULT 0 CHECK (lost_used >= 0),
    max_attempts  INTEGER NOT NULL CHECK (max_attempts >= 1),
    max_lost      INTEGER NOT NULL CHECK (max_lost >= 0),
    last_error    TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    finished_at   INTEGER
) STRICT;

CREATE INDEX tasks_status ON tasks (status);

-- fencing_counter: one row; last_token is the last fencing token granted.
-- It only ever goes up (trigger) and cannot be deleted.
CREATE TABLE fencing_counter (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_token INTEGER NOT NULL CHECK (last_token >= 0)
) STRICT;

INSERT INTO fencing_counter (id, last_token) VALUES (1, 0);

CREATE TRIGGER fencing_counter_increases
BEFORE UPDATE ON fencing_counter
WHEN NEW.last_token <= OLD.last_token OR NEW.id IS NOT OLD.id
BEGIN
    SELECT RAISE(ABORT, 'fencing_counter.last_token must strictly increase');
END;

CREATE TRIGGER fencing_counter_no_delete
BEFORE DELETE ON fencing_counter
BEGIN
    SELECT RAISE(ABORT, 'fencing_counter cannot be deleted');
END;

-- leases: token is the fencing token. At most one active lease per task
-- (leases_one_active_per_task); a new lease must carry the token just taken
-- from fencing_counter; an ended lease never becomes active again; the
-- identity of a lease never changes.
CREATE TABLE leases (
    token           INTEGER PRIMARY KEY CHECK (token >= 1),
    task            TEXT    NOT NULL REFERENCES tasks (address),
    def_hash        TEXT    NOT NULL CHECK (length(def_hash) > 0),
    worker_id       TEXT    NOT NULL REFERENCES workers (id),
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    status          TEXT    NOT NULL CHECK (status IN ('active', 'completed', 'expired', 'released', 'revoked')),
    granted_at      INTEGER NOT NULL,
    renewed_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    hard_expires_at INTEGER NOT NULL,
    ended_at        INTEGER,
    CHECK (expires_at <= hard_expires_at),
    CHECK ((status = 'active') = (ended_at IS NULL))
) STRICT;

CREATE UNIQUE INDEX leases_one_active_per_task ON leases (task) WHERE status = 'active';
CREATE INDEX leases_worker_active ON leases (worker_id) WHERE status = 'active';
CREATE INDEX leases_task ON leases (task, token);

CREATE TRIGGER leases_token_from_counter
BEFORE INSERT ON leases
WHEN NEW.token IS NOT (SELECT last_token FROM fencing_counter WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'leases.token must be the token just taken from fencing_counter');
END;

CREATE TRIGGER leases_identity_immutable
BEFORE UPDATE OF token, task, def_hash, worker_id, attempt, granted_at ON leases
BEGIN
    SELECT RAISE(ABORT, 'a lease''s identity (token, task, def_hash, worker_id, attempt, granted_at) never changes');
END;

CREATE TRIGGER leases_no_reactivation
BEFORE UPDATE OF status ON leases
WHEN OLD.status <> 'active' AND NEW.status IS NOT OLD.status
BEGIN
    SELECT RAISE(ABORT, 'an ended lease never changes status again');
END;

CREATE TRIGGER leases_no_delete
BEFORE DELETE ON leases
BEGIN
    SELECT RAISE(ABORT, 'leases are never deleted');
END;

-- attempts: one row per lease granted, numbered 1, 2, 3 … per task.
CREATE TABLE attempts (
    task          TEXT    NOT NULL REFERENCES tasks (address),
    number        INTEGER NOT NULL CHECK (number >= 1),
    worker_id     TEXT    NOT NULL REFERENCES workers (id),
    fencing_token INTEGER NOT NULL UNIQUE REFERENCES leases (token),
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    exit_code     INTEGER,
    signal        TEXT    NOT NULL DEFAULT '',
    failure_class TEXT    CHECK (failure_class IS NULL OR failure_class IN ('failure', 'lost', 'refused')),
    error         TEXT    NOT NULL DEFAULT '',
    stdout_path   TEXT    NOT NULL DEFAULT '',
    stderr_path   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task, number)
) STRICT;

-- retry_directives: the record that an attempt will be retried. At most one
-- unconsumed directive per task.
CREATE TABLE retry_directives (
    id           INTEGER PRIMARY KEY,
    task         TEXT    NOT NULL REFERENCES tasks (address),
    next_attempt INTEGER NOT NULL CHECK (next_attempt >= 1),
    not_before   INTEGER NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('failure', 'lost')),
    reason       TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    consumed_at  INTEGER
) STRICT;

CREATE UNIQUE INDEX retry_directives_one_open_per_task ON retry_directives (task) WHERE consumed_at IS NULL;

-- results: every result posted, keyed by its idempotency key, with the
-- decision taken. token/task/worker_id are what the poster named; they carry
-- no foreign keys because a rejected result may name things that do not exist.
-- A token has at most one accepted result.
CREATE TABLE results (
    idempotency_key TEXT    PRIMARY KEY CHECK (length(idempotency_key) > 0),
    token           INTEGER NOT NULL,
    task            TEXT    NOT NULL DEFAULT '',
    attempt         INTEGER NOT NULL DEFAULT 0,
    worker_id       TEXT    NOT NULL DEFAULT '',
    decision        TEXT    NOT NULL CHECK (decision IN ('accepted', 'rejected')),
    reason          TEXT    CHECK (reason IS NULL OR reason IN ('stale_token', 'lease_expired', 'wrong_worker', 'unknown_lease')),
    body            TEXT    NOT NULL DEFAULT '',
    received_at     INTEGER NOT NULL,
    CHECK ((decision = 'accepted') = (reason IS NULL))
) STRICT;

CREATE UNIQUE INDEX results_one_accepted_per_token ON results (token) WHERE decision = 'accepted';

-- events: an append-only log. task/worker_id/token are informational (no
-- foreign keys: the log outlives what it names); 0 / '' mean "none".
CREATE TABLE events (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    at        INTEGER NOT NULL,
    kind      TEXT    NOT NULL CHECK (length(kind) > 0),
    task      TEXT    NOT NULL DEFAULT '',
    worker_id TEXT    NOT NULL DEFAULT '',
    token     INTEGER NOT NULL DEFAULT 0,
    message   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX events_task ON events (task, seq);

CREATE TRIGGER events_no_update
BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TRIGGER events_no_delete
BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

-- apply_lock: at most one row; present means an apply holds the state.
CREATE TABLE apply_lock (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    lock_id    TEXT    NOT NULL CHECK (length(lock_id) > 0),
    holder     TEXT    NOT NULL DEFAULT '',
    host       TEXT    NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    CHECK (expires_at >= started_at)
) STRICT;
