package coordinator

import (
	"context"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// Jumper is a clock that can jump ahead (testclock.Clock): the clock the
// coordinator's Options.Now reads.
type Jumper interface {
	// Advance jumps the clock d ahead.
	Advance(d time.Duration)
}

// SkipWait jumps clock over the wait ahead when nothing but waiting is
// left (`wdc test`'s clock, package testclock): no lease active (no
// attempt running, none granted unstarted), no claim being granted, no
// worker draining, no task a claim could take now, and the coordinator
// neither done nor stopping. The wait ahead ends at the earliest of the
// delayed retries' due times and of also (deadlines the caller waits for,
// such as the supervisor's idle delay) that is after now; the jump is
// rounded up to a whole millisecond, as the state keeps times.
//
// The jump moves every active or draining worker's last heartbeat by the
// same amount (state.Tx.ShiftLiveness, and in memory) in one write, with
// every other write held off, so no worker goes stale for it; the clock
// advances once that write is committed. Then the claims that the retries
// now due let through are woken. It returns how far the clock jumped: 0
// when the coordinator is not quiescent or nothing is waited for. Errors:
// the state's (the clock has not moved).
func (c *Coordinator) SkipWait(ctx context.Context, clock Jumper, also []time.Time) (time.Duration, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	now := c.now()
	next, ok := c.nextWaitLocked(now, also)
	c.mu.Unlock()
	if !ok {
		return 0, nil
	}
	d := next.Sub(now).Truncate(time.Millisecond) + time.Millisecond
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ShiftLiveness(d)
		return err
	}, func(err error) {
		if err != nil {
			return
		}
		clock.Advance(d)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, w := range c.workers {
			if w.status == state.WorkerActive || w.status == state.WorkerDraining {
				w.lastSeen = w.lastSeen.Add(d)
			}
		}
		if c.dueRetriesLocked(c.now()) {
			c.broadcastLocked()
		}
	})
	if err != nil {
		return 0, err
	}
	return d, nil
}

// nextWaitLocked is the end of the wait ahead at now, and whether the
// coordinator is quiescent and waits for one (see SkipWait). mu must be
// held.
func (c *Coordinator) nextWaitLocked(now time.Time, also []time.Time) (time.Time, bool) {
	select {
	case <-c.done:
		return time.Time{}, false
	default:
	}
	if c.stopped || c.draining || c.interrupted || len(c.leases) > 0 {
		return time.Time{}, false
	}
	for _, w := range c.workers {
		if w.picking > 0 || w.pending > 0 || w.status == state.WorkerDraining {
			return time.Time{}, false
		}
	}
	for _, ps := range c.pools {
		if c.claimableLocked(ps, now) > 0 {
			return time.Time{}, false
		}
	}
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for ts := range c.delayed {
		consider(ts.notBefore)
	}
	for _, t := range also {
		consider(t)
	}
	return next, !next.IsZero()
}
