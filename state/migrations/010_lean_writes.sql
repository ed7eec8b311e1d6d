-- 010_lean_writes: less for a claim and an accept to write, and less state
-- per finished task.
--
-- attempt_artifacts_sha256 and attempt_artifacts_task served no query
-- (garbage collection reads every row; an attempt's artifacts are found by
-- its token, through the primary key): each only cost every artifact
-- insert an index write and the state about 220 bytes per task.
DROP INDEX attempt_artifacts_sha256;
DROP INDEX attempt_artifacts_task;

-- The counter's two guards in one trigger: a grant's counter bump runs one
-- trigger program instead of two. It still refuses a token that does not
-- strictly increase, a changed id, and a token beyond the reserved block,
-- each with the message it had.
DROP TRIGGER fencing_counter_increases;
DROP TRIGGER fencing_counter_within_reservation;

CREATE TRIGGER fencing_counter_increases
BEFORE UPDATE ON fencing_counter
WHEN NEW.last_token <= OLD.last_token OR NEW.id IS NOT OLD.id
    OR NEW.last_token > coalesce((SELECT reserved_through FROM fencing_reservation WHERE id = 1), NEW.last_token)
BEGIN
    SELECT RAISE(ABORT, 'fencing_counter.last_token must strictly increase')
        WHERE NEW.last_token <= OLD.last_token OR NEW.id IS NOT OLD.id;
    SELECT RAISE(ABORT, 'fencing token beyond the reserved block');
END;

-- An accepted result's body repeated what its attempt, lease and artifacts
-- rows hold (only a rejected result's body is read: the artifacts it
-- named); accepted results keep none from now on.
UPDATE results SET body = '' WHERE decision = 'accepted' AND body <> '';
