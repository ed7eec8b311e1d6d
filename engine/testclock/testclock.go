// Package testclock is the clock of `wdc test`: it runs with the wall
// clock, and jumps ahead over the waits that only wait.
//
// A Clock reads the wall clock plus an offset that only grows. The apply
// under test reads every decision from Now (apply.Operation.SkipWaits);
// when the run is quiescent — no attempt running, no launch waiting to
// register, no request in flight, no task that could be claimed — the
// apply asks the coordinator to jump the clock to the next deadline that
// only waits (a retry's backoff, the supervisor's idle delay before a
// drain). The coordinator moves every bound of a live thing (each
// worker's last heartbeat, and so its ttl) by the same amount in the same
// write, so a jump never makes a live worker stale; only a fault does.
package testclock

import (
	"sync/atomic"
	"time"
)

// Clock is the wall clock plus an offset that Advance grows. The zero
// value reads the wall clock. It is safe for concurrent use.
type Clock struct {
	offset atomic.Int64 // nanoseconds
}

// Now is the wall clock's time plus the time skipped so far. Its
// monotonic reading moves with the offset, so durations between two
// readings of one Clock include the jumps between them.
func (c *Clock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// Advance jumps the clock d ahead; d ≤ 0 does nothing (the clock never
// goes back).
func (c *Clock) Advance(d time.Duration) {
	if d > 0 {
		c.offset.Add(int64(d))
	}
}

// Skipped is the time the clock has jumped so far.
func (c *Clock) Skipped() time.Duration { return time.Duration(c.offset.Load()) }
