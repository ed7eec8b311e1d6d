-- 009_unstarted_leases: a prefetched lease, granted beyond its worker's
-- capacity, is unstarted until the worker reports that its attempt started
-- (docs/design.md §3, prefetched leases). While it is unstarted, heartbeats
-- renew it within the worker's ttl and hard_expires_at holds no bound (the
-- largest time wdc writes, 9999-12-31); its start sets hard_expires_at to
-- start + timeout + lease grace. An unstarted lease that ends otherwise
-- than by a result spends no budget and leaves no attempt.
ALTER TABLE leases ADD COLUMN unstarted INTEGER NOT NULL DEFAULT 0 CHECK (unstarted IN (0, 1));
