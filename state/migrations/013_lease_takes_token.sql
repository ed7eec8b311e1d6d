-- 013_lease_takes_token: a grant takes its fencing token in the lease's
-- own INSERT, one statement instead of two (the counter's bump, then the
-- lease).
--
-- Before, a grant bumped fencing_counter (UPDATE … RETURNING) and inserted
-- the lease with that token, which leases_token_from_counter checked
-- against the counter. Now the lease is inserted with the counter's next
-- token and leases_take_token moves the counter to it, under the counter's
-- own guard (fencing_counter_increases): a lease whose token is not above
-- every token taken before (the counter only increases and every lease
-- sets it to its token), or is beyond the reserved block, is refused with
-- the guard's message. Tokens stay strictly increasing over every lease
-- ever granted (DESIGN §3); the counter still names the last token taken.
DROP TRIGGER leases_token_from_counter;

CREATE TRIGGER leases_take_token
AFTER INSERT ON leases
BEGIN
    UPDATE fencing_counter SET last_token = NEW.token WHERE id = 1;
END;
