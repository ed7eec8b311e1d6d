-- 006_hash_key: the key of the keyed hashes that stand for sensitive values.
--
-- A task's spec never holds a value computed from a sensitive variable: it
-- holds a placeholder and the HMAC-SHA-256 of the value under this key
-- (protocol.SensitiveHash), and the definition hash covers that. The key is
-- made with the state (here, for a state made before this migration), 32
-- random bytes as hex, and never changes: it travels with the state, so a
-- plan and an apply on two machines agree. It unlocks nothing; it only keeps
-- a keyed hash in a plan document from being tested against guesses by
-- whoever does not have the state.
ALTER TABLE state_info ADD COLUMN hash_key TEXT NOT NULL DEFAULT '';

UPDATE state_info SET hash_key = lower(hex(randomblob(32))) WHERE id = 1;

CREATE TRIGGER state_info_hash_key_immutable
BEFORE UPDATE OF hash_key ON state_info
WHEN NEW.hash_key IS NOT OLD.hash_key
BEGIN
    SELECT RAISE(ABORT, 'state_info.hash_key is set once and never changes');
END;
