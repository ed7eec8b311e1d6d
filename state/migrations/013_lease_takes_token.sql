-- 013_lease_takes_token: a grant takes its fencing token in the lease's
-- own INSERT, one statement instead of two (the counter's bump, then the
-- lease).
--
-- Before, a grant bumped fencing_counter (UPDATE … RETURNING) and inserted
-- the lease with that token, which leases_token_from_counter checked
-- against the counter. Now the lease is inserted with the counter's next
-- token and leases_take_token moves the counter to it, under the counter's
-- own guard (fencing_counter_increases: strictly increasing, not beyond
-- the reserved block). A lease whose token is below the counter is refused:
-- the counter is at or above every token taken (it only increases, and
-- every lease moves it to its token), so a lease's token is above every
-- lease's before it, and leases.token's key refuses a token taken twice.
-- Tokens stay strictly increasing over every lease ever granted (DESIGN
-- §3).
--
-- A lease whose token is the counter's value is the grant of a wdc from
-- before this migration (it bumped the counter first, then inserted the
-- lease with that token): it is accepted and leaves the counter as it is,
-- so an apply of an older wdc that runs while a newer one migrates the
-- file goes on granting.
DROP TRIGGER leases_token_from_counter;

CREATE TRIGGER leases_take_token
AFTER INSERT ON leases
BEGIN
    SELECT RAISE(ABORT, 'leases.token must be above every fencing token taken before')
        WHERE NEW.token < (SELECT last_token FROM fencing_counter WHERE id = 1);
    UPDATE fencing_counter SET last_token = NEW.token WHERE id = 1 AND last_token < NEW.token;
END;
