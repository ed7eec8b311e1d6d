-- 012_empty_logs: an accepted result's empty stdout and stderr logs are
-- not rows of attempt_artifacts; attempts.empty_logs says which of them the
-- result named empty (1: stdout, 2: stderr), and every reader of an
-- attempt's artifacts gives them back as they were: kind log, the empty
-- blob, size 0, text/plain. Most attempts print nothing: the two rows
-- (and the INSERT of them, one statement of every accept) were the same for
-- each. Rows written before this stay and are read as before.
ALTER TABLE attempts ADD COLUMN empty_logs INTEGER NOT NULL DEFAULT 0 CHECK (empty_logs BETWEEN 0 AND 3);
