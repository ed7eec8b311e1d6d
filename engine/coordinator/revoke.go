package coordinator

import (
	"context"
	"errors"

	"github.com/wdc-dev/wdc/state"
)

// RevokeLease ends the active lease token at once as revoked
// (state.Tx.RevokeLease): its attempt is lost, its task retried or failed
// as for an expiry, and the worker learns it from its next heartbeat or
// result, whose answer rejects it. It returns false when the lease is not
// active. Errors: the state's.
func (c *Coordinator) RevokeLease(ctx context.Context, token int64, reason string) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var (
		out     state.AttemptOutcome
		revoked bool
	)
	now := c.now()
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		var err error
		out, revoked, err = tx.RevokeLease(token, reason, c.policy, now)
		return err
	}, nil)
	if err != nil || !revoked {
		return false, err
	}
	c.mu.Lock()
	pool := c.poolOfWorker(out.WorkerID)
	c.poolMetrics(pool).leasesRevoked.Inc()
	evs := []Event{{At: now, Kind: EventRevoked, Task: out.Task, WorkerID: out.WorkerID, Pool: pool,
		Attempt: out.Attempt, Token: out.Token, Message: "attempt lost: lease revoked: " + reason}}
	evs = c.applyOutcomeLocked(out, now, evs)
	c.broadcastLocked()
	c.mu.Unlock()
	c.emitAndFlush(evs)
	return true, nil
}

// FaultInjector injects faults into the protocol, for `wdc test`'s fault
// blocks (package wdctest). Its methods are called from the request
// handlers, concurrently.
type FaultInjector interface {
	// DropHeartbeat reports whether a heartbeat of worker id is dropped,
	// as if lost on the way: it renews nothing and is answered with
	// ErrHeartbeatDropped (silence_worker).
	DropHeartbeat(workerID string) bool
	// RevokeBeforeResult reports whether the lease of a result posted for
	// attempt of task is revoked just before the result is judged, so the
	// result arrives after its lease ended (late_result).
	RevokeBeforeResult(task string, attempt int) bool
}

// ErrHeartbeatDropped answers a heartbeat a FaultInjector dropped.
var ErrHeartbeatDropped = errors.New("heartbeat dropped by an injected fault (silence_worker)")
