-- 002_result_scope: an idempotency key replays a decision only for the same
-- lease token and the same worker. Before, a result was matched to an earlier
-- decision by its key alone, so a client that posted first with another
-- worker's key made that worker's real result a "duplicate" of its own
-- rejection (and the task ran again). A key is now scoped to (token,
-- worker_id): the same key with another token or worker is judged afresh and
-- recorded as a row of its own.
CREATE TABLE results_scoped (
    idempotency_key TEXT    NOT NULL CHECK (length(idempotency_key) > 0),
    token           INTEGER NOT NULL,
    task            TEXT    NOT NULL DEFAULT '',
    attempt         INTEGER NOT NULL DEFAULT 0,
    worker_id       TEXT    NOT NULL DEFAULT '',
    decision        TEXT    NOT NULL CHECK (decision IN ('accepted', 'rejected')),
    reason          TEXT    CHECK (reason IS NULL OR reason IN ('stale_token', 'lease_expired', 'wrong_worker', 'unknown_lease')),
    body            TEXT    NOT NULL DEFAULT '',
    received_at     INTEGER NOT NULL,
    CHECK ((decision = 'accepted') = (reason IS NULL)),
    PRIMARY KEY (idempotency_key, token, worker_id)
) STRICT;

INSERT INTO results_scoped (idempotency_key, token, task, attempt, worker_id, decision, reason, body, received_at)
    SELECT idempotency_key, token, task, attempt, worker_id, decision, reason, body, received_at FROM results;

DROP TABLE results;

ALTER TABLE results_scoped RENAME TO results;

CREATE UNIQUE INDEX results_one_accepted_per_token ON results (token) WHERE decision = 'accepted';
