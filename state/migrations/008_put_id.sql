-- 008_put_id: a random id that a copy of the state put in a backend may
-- carry, so that it differs from every object put before it.
--
-- A state in an object store is written with conditional PUTs on the
-- object's ETag, and the ETag is the store's hash of the object's bytes:
-- a copy put back unchanged would get the ETag it had, and would not
-- fence a writer that read the object before it (an apply whose lock
-- expired while it was paused, about to put a checkpoint that names blobs
-- uploaded since). wdc gc puts the state back with a new put_id before it
-- removes a blob from the bucket, so such a writer's PUT is refused
-- rather than name a blob that is gone. Like the lock and the fencing
-- reservation it is coordination, not content: it does not bump the
-- serial. '' until a put sets it.
CREATE TABLE put_id (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    put_id TEXT NOT NULL
) STRICT;

INSERT INTO put_id (id, put_id) VALUES (1, '');

CREATE TRIGGER put_id_no_delete
BEFORE DELETE ON put_id
BEGIN
    SELECT RAISE(ABORT, 'put_id cannot be deleted');
END;
