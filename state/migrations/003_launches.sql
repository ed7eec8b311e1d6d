-- 003_launches: applies, launches, join tokens and the coordinator's address.
--
-- applies: one row per apply, keyed by its lock id (the apply id). ended_at
-- and end_reason are set when its lock is released, forced or taken over;
-- an apply that died keeps NULL until the next one takes its lock over.
CREATE TABLE applies (
    id         TEXT    PRIMARY KEY CHECK (length(id) > 0),
    holder     TEXT    NOT NULL DEFAULT '',
    host       TEXT    NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    end_reason TEXT    CHECK (end_reason IS NULL OR end_reason IN ('released', 'forced', 'taken_over')),
    CHECK ((ended_at IS NULL) = (end_reason IS NULL)),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
) STRICT;

INSERT INTO applies (id, holder, host, pid, started_at)
    SELECT lock_id, holder, host, pid, started_at FROM apply_lock;

-- The running apply's coordinator: its URL (what workers are told to use) and
-- the SHA-256 fingerprint of the CA its certificate chains to ('' for HTTP).
ALTER TABLE apply_lock ADD COLUMN coordinator_url TEXT NOT NULL DEFAULT '';
ALTER TABLE apply_lock ADD COLUMN ca_sha256 TEXT NOT NULL DEFAULT '';

-- launches: every worker a provider launched, named by (apply, pool, launch
-- sequence). What the provider recorded at launch (handle, host, pid,
-- process start, argv, work folder) is what a later apply may stop after
-- this one died; nothing a worker reports about itself is. The launch
-- credential is kept only as its SHA-256. status: launched (the credential
-- may still register once), registered, expired (launch_timeout passed, the
-- credential is revoked), failed (the provider could not launch).
-- ended_at: the provider reported the worker gone.
CREATE TABLE launches (
    apply_id        TEXT    NOT NULL CHECK (length(apply_id) > 0),
    pool            TEXT    NOT NULL REFERENCES pools (name),
    seq             INTEGER NOT NULL CHECK (seq >= 1),
    provider        TEXT    NOT NULL CHECK (length(provider) > 0),
    credential_hash TEXT    NOT NULL UNIQUE CHECK (length(credential_hash) = 64),
    status          TEXT    NOT NULL CHECK (status IN ('launched', 'registered', 'expired', 'failed')),
    handle          TEXT    NOT NULL DEFAULT '',
    host            TEXT    NOT NULL DEFAULT '',
    pid             INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    process_start   TEXT    NOT NULL DEFAULT '',
    argv            TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(argv) AND json_type(argv) = 'array'),
    work_dir        TEXT    NOT NULL DEFAULT '',
    worker_id       TEXT    REFERENCES workers (id),
    launched_at     INTEGER NOT NULL,
    registered_at   INTEGER,
    ended_at        INTEGER,
    PRIMARY KEY (apply_id, pool, seq),
    CHECK ((status = 'registered') = (worker_id IS NOT NULL)),
    CHECK ((worker_id IS NULL) = (registered_at IS NULL))
) STRICT;

CREATE INDEX launches_open ON launches (apply_id) WHERE ended_at IS NULL;

-- A registered launch never registers again, and a launch's identity never
-- changes.
CREATE TRIGGER launches_register_once
BEFORE UPDATE OF status ON launches
WHEN OLD.status <> 'launched' AND NEW.status IS NOT OLD.status
BEGIN
    SELECT RAISE(ABORT, 'a launch leaves status launched once and never changes status again');
END;

CREATE TRIGGER launches_identity_immutable
BEFORE UPDATE OF apply_id, pool, seq, provider, credential_hash ON launches
BEGIN
    SELECT RAISE(ABORT, 'a launch''s identity (apply_id, pool, seq, provider, credential_hash) never changes');
END;

-- join_tokens: credentials that let workers of one pool join an apply from
-- anywhere (`wdc join-token create`), kept only as the SHA-256 of the secret.
-- labels NULL: workers get the pool's labels; otherwise the pool's labels are
-- restricted to these (a worker can narrow its placement, never broaden it).
CREATE TABLE join_tokens (
    id          TEXT    PRIMARY KEY CHECK (length(id) > 0),
    pool        TEXT    NOT NULL CHECK (length(pool) > 0),
    labels      TEXT    CHECK (labels IS NULL OR (json_valid(labels) AND json_type(labels) = 'object')),
    secret_hash TEXT    NOT NULL UNIQUE CHECK (length(secret_hash) = 64),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    CHECK (expires_at > created_at)
) STRICT;

CREATE TRIGGER join_tokens_revoke_once
BEFORE UPDATE ON join_tokens
WHEN OLD.revoked_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.pool IS NOT OLD.pool OR NEW.labels IS NOT OLD.labels
    OR NEW.secret_hash IS NOT OLD.secret_hash OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
BEGIN
    SELECT RAISE(ABORT, 'a join token only changes by being revoked, once');
END;

-- How a worker got in: the apply and launch sequence of a launched worker, or
-- the join token of a worker that joined.
ALTER TABLE workers ADD COLUMN apply_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN launch_seq INTEGER NOT NULL DEFAULT 0 CHECK (launch_seq >= 0);
ALTER TABLE workers ADD COLUMN join_token_id TEXT NOT NULL DEFAULT '';
