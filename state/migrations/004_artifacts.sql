-- 004_artifacts: what an accepted result binds. A result names its logs and
-- outputs only by content hash (with name, size and media type); the blobs
-- are in the work folder's content-addressed store (package artifact). No
-- path of the worker's machine is recorded. Rows are written only when a
-- result is accepted, in the same transaction, and never change.
CREATE TABLE attempt_artifacts (
    fencing_token INTEGER NOT NULL REFERENCES leases (token),
    task          TEXT    NOT NULL REFERENCES tasks (address),
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    kind          TEXT    NOT NULL CHECK (kind IN ('log', 'output')),
    name          TEXT    NOT NULL CHECK (length(name) > 0),
    sha256        TEXT    NOT NULL CHECK (length(sha256) = 64),
    size          INTEGER NOT NULL CHECK (size >= 0),
    media_type    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (fencing_token, kind, name)
) STRICT;

CREATE INDEX attempt_artifacts_task ON attempt_artifacts (task, attempt);
CREATE INDEX attempt_artifacts_sha256 ON attempt_artifacts (sha256);

CREATE TRIGGER attempt_artifacts_immutable
BEFORE UPDATE ON attempt_artifacts
BEGIN
    SELECT RAISE(ABORT, 'an attempt''s artifacts never change');
END;

CREATE TRIGGER attempt_artifacts_no_delete
BEFORE DELETE ON attempt_artifacts
BEGIN
    SELECT RAISE(ABORT, 'an attempt''s artifacts are never deleted');
END;
