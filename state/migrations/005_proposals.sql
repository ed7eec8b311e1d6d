-- 005_proposals: chaining by typed recommendations.
--
-- A task may end an attempt with recommendations ({type, input} objects).
-- Only an accepted result's are recorded, in the transaction that accepts it
-- (recommendations_from_accepted_result). The coordinator judges each one
-- against the configuration's edges: it becomes a proposal of a follow-up
-- task, or is rejected with a reason. A person approves or rejects a
-- proposal; an edge whose approval is earned approves by itself after enough
-- consecutive approvals, counted in edge_records.

-- proposals: a follow-up task proposed by an edge for one recommendation.
-- (source_token, source_index) is the recommendation it answers: the same
-- recommendation is never proposed twice. spec and settings are the rendered
-- task definition and its scheduling settings, opaque to the state. earned
-- is set exactly when the edge's record approved it by itself.
CREATE TABLE proposals (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    edge           TEXT    NOT NULL CHECK (length(edge) > 0),
    edge_hash      TEXT    NOT NULL DEFAULT '',
    propose        TEXT    NOT NULL CHECK (length(propose) > 0),
    type           TEXT    NOT NULL CHECK (length(type) > 0),
    source_task    TEXT    NOT NULL CHECK (length(source_task) > 0),
    source_attempt INTEGER NOT NULL CHECK (source_attempt >= 1),
    source_token   INTEGER NOT NULL REFERENCES leases (token),
    source_index   INTEGER NOT NULL CHECK (source_index >= 0),
    input          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(input)),
    def_hash       TEXT    NOT NULL CHECK (length(def_hash) > 0),
    spec           TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(spec)),
    settings       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(settings)),
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'auto_approved')),
    decided_by     TEXT    NOT NULL DEFAULT '',
    reason         TEXT    NOT NULL DEFAULT '',
    earned         TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    decided_at     INTEGER,
    UNIQUE (source_token, source_index),
    FOREIGN KEY (source_token, source_index) REFERENCES recommendations (fencing_token, idx),
    CHECK ((status = 'pending') = (decided_at IS NULL)),
    CHECK ((status = 'auto_approved') = (earned <> '')),
    CHECK (status <> 'rejected' OR reason <> '')
) STRICT;

-- A proposal's identity and rendering never change; its status leaves
-- pending once and never changes again (nor does anything else of it then);
-- proposals are never deleted.
CREATE TRIGGER proposals_identity_immutable
BEFORE UPDATE OF id, edge, edge_hash, propose, type, source_task, source_attempt, source_token, source_index,
    input, def_hash, spec, settings, created_at ON proposals
BEGIN
    SELECT RAISE(ABORT, 'a proposal''s identity and rendering never change');
END;

CREATE TRIGGER proposals_decide_once
BEFORE UPDATE ON proposals
WHEN OLD.status <> 'pending'
BEGIN
    SELECT RAISE(ABORT, 'a proposal leaves status pending once and never changes again');
END;

CREATE TRIGGER proposals_no_delete
BEFORE DELETE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are never deleted');
END;

-- recommendations: the recommendations of accepted results, one row per
-- entry of an attempt's list (idx is its position). type may be '' only for
-- an entry rejected at intake. reason is set exactly when rejected,
-- proposal_id exactly when proposed, decided_at exactly when not new.
CREATE TABLE recommendations (
    fencing_token INTEGER NOT NULL REFERENCES leases (token),
    idx           INTEGER NOT NULL CHECK (idx >= 0),
    task          TEXT    NOT NULL CHECK (length(task) > 0),
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    type          TEXT    NOT NULL DEFAULT '',
    input         TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(input)),
    status        TEXT    NOT NULL CHECK (status IN ('new', 'proposed', 'rejected')),
    reason        TEXT    NOT NULL DEFAULT '',
    proposal_id   INTEGER REFERENCES proposals (id),
    received_at   INTEGER NOT NULL,
    decided_at    INTEGER,
    PRIMARY KEY (fencing_token, idx),
    CHECK (type <> '' OR status = 'rejected'),
    CHECK ((status = 'rejected') = (reason <> '')),
    CHECK ((status = 'proposed') = (proposal_id IS NOT NULL)),
    CHECK ((status = 'new') = (decided_at IS NULL))
) STRICT;

CREATE INDEX recommendations_new ON recommendations (fencing_token, idx) WHERE status = 'new';

-- A recommendation comes from an attempt whose result was accepted, and
-- names that attempt's task and number.
CREATE TRIGGER recommendations_from_accepted_result
BEFORE INSERT ON recommendations
WHEN NOT EXISTS (SELECT 1 FROM leases WHERE token = NEW.fencing_token AND task = NEW.task AND attempt = NEW.attempt)
    OR NOT EXISTS (SELECT 1 FROM results WHERE token = NEW.fencing_token AND decision = 'accepted')
BEGIN
    SELECT RAISE(ABORT, 'a recommendation comes from an accepted result of the lease''s own task and attempt');
END;

-- Once proposed or rejected, a recommendation never changes; what it says
-- never changes at all; recommendations are never deleted.
CREATE TRIGGER recommendations_decide_once
BEFORE UPDATE ON recommendations
WHEN OLD.status <> 'new'
BEGIN
    SELECT RAISE(ABORT, 'a recommendation leaves status new once and never changes again');
END;

CREATE TRIGGER recommendations_identity_immutable
BEFORE UPDATE OF fencing_token, idx, task, attempt, type, input, received_at ON recommendations
BEGIN
    SELECT RAISE(ABORT, 'a recommendation''s identity (fencing_token, idx, task, attempt, type, input, received_at) never changes');
END;

CREATE TRIGGER recommendations_no_delete
BEFORE DELETE ON recommendations
BEGIN
    SELECT RAISE(ABORT, 'recommendations are never deleted');
END;

-- edge_records: what each edge's proposals were decided so far. streak is
-- the number of consecutive approvals under edge_hash (a rejection or a
-- changed edge_hash sets it to 0); streak_proposals lists the ids of the
-- streak's proposals, newest last, at most the last 100.
CREATE TABLE edge_records (
    edge             TEXT    PRIMARY KEY CHECK (length(edge) > 0),
    edge_hash        TEXT    NOT NULL DEFAULT '',
    approvals        INTEGER NOT NULL DEFAULT 0 CHECK (approvals >= 0),
    rejections       INTEGER NOT NULL DEFAULT 0 CHECK (rejections >= 0),
    auto_approvals   INTEGER NOT NULL DEFAULT 0 CHECK (auto_approvals >= 0),
    streak           INTEGER NOT NULL DEFAULT 0 CHECK (streak >= 0 AND streak <= approvals),
    streak_proposals TEXT    NOT NULL DEFAULT '[]'
        CHECK (json_valid(streak_proposals) AND json_type(streak_proposals) = 'array'
            AND json_array_length(streak_proposals) = min(streak, 100)),
    updated_at       INTEGER NOT NULL
) STRICT;
