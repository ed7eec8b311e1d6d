-- 007_token_reservation: the block of fencing tokens an apply on a
-- backend may grant before its next checkpoint.
--
-- An apply whose state lives in an object store works on a local copy and
-- puts consistent copies of it back (checkpoints). A runner that dies
-- loses what it did since its last checkpoint, fencing tokens included:
-- so that the counter never goes backwards across such a lost tail, every
-- checkpoint reserves a block of tokens past the last one granted
-- (reserved_through), and the apply grants only tokens the last
-- checkpoint it put back had reserved. An apply that takes over from a
-- checkpoint starts past its reserved block. NULL: no reservation (a
-- local state file, which has no lost tail): tokens are not limited.
CREATE TABLE fencing_reservation (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    reserved_through INTEGER CHECK (reserved_through IS NULL OR reserved_through >= 0)
) STRICT;

INSERT INTO fencing_reservation (id, reserved_through) VALUES (1, NULL);

CREATE TRIGGER fencing_reservation_increases
BEFORE UPDATE ON fencing_reservation
WHEN NEW.id IS NOT OLD.id
    OR (OLD.reserved_through IS NOT NULL AND (NEW.reserved_through IS NULL OR NEW.reserved_through < OLD.reserved_through))
BEGIN
    SELECT RAISE(ABORT, 'fencing_reservation.reserved_through never goes back');
END;

CREATE TRIGGER fencing_reservation_no_delete
BEFORE DELETE ON fencing_reservation
BEGIN
    SELECT RAISE(ABORT, 'fencing_reservation cannot be deleted');
END;

CREATE TRIGGER fencing_counter_within_reservation
BEFORE UPDATE ON fencing_counter
WHEN NEW.last_token > coalesce((SELECT reserved_through FROM fencing_reservation WHERE id = 1), NEW.last_token)
BEGIN
    SELECT RAISE(ABORT, 'fencing token beyond the reserved block');
END;
