package coordinator

import (
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// Bounds on what refused requests make the state keep (docs/protocol.md,
// "Bounds"). A refusal changes nothing, so recording every one would let
// anyone holding a credential grow the state without bound: a loop of
// result posts with fresh idempotency keys, or of registrations with a
// revoked join token. So:
//
//   - a worker's late results of its own leases (stale_token,
//     lease_expired) are recorded once per lease: the first; later posts
//     with other keys are answered without being recorded;
//   - a worker's results for leases not its own (unknown_lease,
//     wrong_worker) and the refused registrations of one credential are
//     recorded once per RefusalInterval; the others are counted (in
//     wdc_results_rejected_total and wdc_registrations_refused_total) and
//     the next one recorded says how many were not.
//
// A rejection not recorded is judged afresh when its key is posted again,
// to a rejection again (a lease's fencing never comes undone), but not as
// a duplicate. A recorded rejection keeps at most
// state.MaxRejectedBodyBytes of its body.

// RefusalInterval is how often repeated refusals of one source (a
// credential's registrations, a worker's results for leases not its own)
// are recorded.
const RefusalInterval = time.Minute

// refusalLog thins out the repeated refusals of one source: the first is
// recorded, then at most one per RefusalInterval; the others are only
// counted, and the next one recorded says how many. Guarded by c.mu.
type refusalLog struct {
	at      time.Time // when the last recorded one was; zero: none yet
	key     string    // its request's key, recorded again if its write runs again
	carried int       // the count it carried
	since   time.Time // the time that count was since
	skipped int       // refusals after it, not recorded
}

// record reports whether a refusal at now (of a request with key, "" when
// requests have none) is recorded, with how many were not since the
// previous recorded one (at since).
func (r *refusalLog) record(now time.Time, key string) (ok bool, skipped int, since time.Time) {
	switch {
	case key != "" && key == r.key:
		return true, r.carried, r.since // its write runs again
	case !r.at.IsZero() && now.Sub(r.at) < RefusalInterval:
		r.skipped++
		return false, 0, time.Time{}
	}
	r.since, r.carried = r.at, r.skipped
	r.at, r.key, r.skipped = now, key, 0
	return true, r.carried, r.since
}

// keepRejection is state.ResultInput.Keep for a result worker w posted
// with key for lease token: whether the state records its rejection rej,
// and what the record adds (see the bounds above). It runs inside the
// write's transaction, maybe twice when the write runs again.
func (c *Coordinator) keepRejection(w *workerState, token int64, key string, rej state.ResultDecision) (bool, string) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch rej.Reason {
	case state.ReasonStaleToken, state.ReasonLeaseExpired:
		// A late result of a lease of its own (the fencing checks find
		// another worker's lease wrong_worker first): its first is kept.
		if k, ok := w.lateKept[token]; ok && k != key {
			return false, ""
		}
		if w.lateKept == nil {
			w.lateKept = map[int64]string{}
		}
		w.lateKept[token] = key
		return true, ""
	}
	ok, skipped, since := w.foreign.record(now, key)
	if !ok || skipped == 0 {
		return ok, ""
	}
	return true, fmt.Sprintf("%d more results of worker %s for leases not its own were rejected without being recorded since %s",
		skipped, w.id, since.UTC().Format(time.RFC3339))
}

// refusalText is the recorded text of a refused registration with
// credential cred at now, or "" when it is not recorded (see the bounds
// above). c.mu must be held.
func (cred *Credential) refusalText(now time.Time, reason, msg string) string {
	ok, skipped, since := cred.refusals.record(now, "")
	switch {
	case !ok:
		return ""
	case skipped > 0:
		return fmt.Sprintf("%s: %s (%d more refusals of this credential since %s were not recorded)",
			reason, msg, skipped, since.UTC().Format(time.RFC3339))
	}
	return reason + ": " + msg
}
