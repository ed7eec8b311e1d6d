package state

import (
	"fmt"
	"time"
)

// RevokeLease ends active lease token as revoked, as an expiry would end
// it but at once: its attempt ends lost (error "lease revoked: " + reason),
// an EventRevoked event is appended, and its task spends one of max_lost
// (queued with a lost retry due at once, or failed when the budget is
// spent, its Downstream from pol cancelled). An unstarted lease goes back
// at no cost. A result posted for the lease afterwards is rejected: the
// lease is no longer the task's live one. It returns false (and changes
// nothing) when the lease is not active.
func (t *Tx) RevokeLease(token int64, reason string, pol PolicyFunc, now time.Time) (AttemptOutcome, bool, error) {
	leases, err := queryLeases(t.ctx, t, `WHERE token = ? AND status = 'active'`, token)
	if err != nil {
		return AttemptOutcome{}, false, fmt.Errorf("revoke lease %d: %w", token, err)
	}
	if len(leases) == 0 {
		return AttemptOutcome{}, false, nil
	}
	l := leases[0]
	out, err := t.lose(l, LeaseRevoked, EventRevoked, "lease revoked: "+reason, pol.of(l.Task), now)
	if err != nil {
		return AttemptOutcome{}, false, fmt.Errorf("revoke lease %d: %w", token, err)
	}
	return out, true, nil
}
