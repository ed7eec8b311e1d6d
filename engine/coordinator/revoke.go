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
	return c.revokeLease(ctx, token, reason, nil)
}

// revokeLease is RevokeLease; when starter is set and the lease is its
// unstarted one, the lease is started first (a result reports its
// lease's start: its attempt ran), so the revoke loses that attempt.
func (c *Coordinator) revokeLease(ctx context.Context, token int64, reason string, starter *workerState) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var start []state.LeaseStart
	c.mu.Lock()
	if l := c.leases[token]; l != nil && starter != nil && l.unstarted && l.worker == starter.id {
		if ts := c.tasks[l.task]; ts != nil {
			start = []state.LeaseStart{{Token: token, Timeout: ts.rt.Timeout, Grace: ts.rt.LeaseGrace}}
		}
	}
	c.mu.Unlock()
	var (
		out     state.AttemptOutcome
		revoked bool
	)
	now := c.now()
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		if len(start) > 0 {
			if _, err := tx.StartLeases(starter.id, start, now); err != nil {
				return err
			}
		}
		var err error
		out, revoked, err = tx.RevokeLease(token, reason, c.policy, now)
		return err
	}, nil)
	if err != nil || !revoked {
		return false, err
	}
	c.mu.Lock()
	if l := c.leases[token]; l != nil && len(start) > 0 && l.unstarted {
		l.unstarted = false
		starter.unstarted--
	}
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
// handlers, concurrently. A coordinator with one grants no prefetched
// lease, so an attempt starts when it is granted.
type FaultInjector interface {
	// DropHeartbeat reports whether a heartbeat of worker id is dropped,
	// as if lost on the way: it renews nothing, Heartbeat returns
	// ErrHeartbeatDropped, and package httpapi closes the connection
	// without an answer (silence_worker).
	DropHeartbeat(workerID string) bool
	// RevokeBeforeResult reports whether the lease of a result posted for
	// attempt of task is revoked just before the result is judged, so the
	// result arrives after its lease ended (late_result).
	RevokeBeforeResult(task string, attempt int) bool
	// AttemptStarted is told that attempt of task starts on worker
	// workerID, which registered with process id pid: once the answer
	// that grants it is to be sent (a grant whose answer was abandoned is
	// released and never ran), or for a prefetched lease when its worker
	// reports the start. It is called
	// with the coordinator's lock held, so it must not call back into the
	// coordinator (kill_worker acts on it from a goroutine of its own).
	AttemptStarted(task string, attempt int, workerID string, pid int)
}

// ErrHeartbeatDropped answers a heartbeat a FaultInjector dropped.
var ErrHeartbeatDropped = errors.New("heartbeat dropped by an injected fault (silence_worker)")
