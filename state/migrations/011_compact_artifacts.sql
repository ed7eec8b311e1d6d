-- 011_compact_artifacts: attempt_artifacts without its rowid (its primary
-- key is the table: no second B-tree of the same columns), and the hash
-- of an empty artifact kept as '' (size 0). Most attempts of trivial
-- tasks bind two empty logs: their 64 hex digits, twice per attempt, were
-- a tenth of the state. A log's media type is kept as '' when it is
-- text/plain; charset=utf-8, the one every log has. Readers give '' back
-- as that media type (of a log) and as the SHA-256 of no bytes,
-- e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.
CREATE TABLE attempt_artifacts_compact (
    fencing_token INTEGER NOT NULL REFERENCES leases (token),
    task          TEXT    NOT NULL REFERENCES tasks (address),
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    kind          TEXT    NOT NULL CHECK (kind IN ('log', 'output')),
    name          TEXT    NOT NULL CHECK (length(name) > 0),
    sha256        TEXT    NOT NULL CHECK (length(sha256) = 64 OR (sha256 = '' AND size = 0)),
    size          INTEGER NOT NULL CHECK (size >= 0),
    media_type    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (fencing_token, kind, name)
) STRICT, WITHOUT ROWID;

INSERT INTO attempt_artifacts_compact (fencing_token, task, attempt, kind, name, sha256, size, media_type)
    SELECT fencing_token, task, attempt, kind, name,
        CASE WHEN size = 0 AND sha256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' THEN '' ELSE sha256 END,
        size,
        CASE WHEN kind = 'log' AND media_type = 'text/plain; charset=utf-8' THEN '' ELSE media_type END
    FROM attempt_artifacts;

DROP TABLE attempt_artifacts;

ALTER TABLE attempt_artifacts_compact RENAME TO attempt_artifacts;

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
