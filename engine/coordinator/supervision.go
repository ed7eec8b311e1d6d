package coordinator

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// PoolView is what the coordinator knows of one pool for the supervisor:
// its tasks and the workers registered with it.
type PoolView struct {
	// Queued counts the tasks the pool's workers could claim now;
	// Unfinished the pool's tasks not finished (see supervise.Observation).
	Queued, Unfinished int
	// Workers are the pool's registered workers, by launch sequence
	// (joined workers, sequence 0, first).
	Workers []WorkerView
}

// WorkerView is one registered worker as the supervisor sees it.
type WorkerView struct {
	ID string
	// Seq is its launch sequence in the pool, or 0 for a worker that
	// joined with a join token.
	Seq    int
	Status state.WorkerStatus
	// Held is the number of leases it holds; Claiming is true while a
	// claim of its is being granted.
	Held     int
	Claiming bool
	// IdleSince is when it last held no lease (its registration, or its
	// last lease's end); meaningful only when Held is 0.
	IdleSince time.Time
}

// WorkerLastSeen returns when the coordinator last heard from the worker
// (its registration or last heartbeat); false for a worker it does not
// know.
func (c *Coordinator) WorkerLastSeen(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[id]
	if w == nil {
		return time.Time{}, false
	}
	return w.lastSeen, true
}

// PoolView returns the supervisor's view of the pool named pool; false
// when the coordinator has no such pool.
func (c *Coordinator) PoolView(pool string) (PoolView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.poolByNam[pool]
	if ps == nil {
		return PoolView{}, false
	}
	v := PoolView{Queued: c.claimableLocked(ps, c.now())}
	for _, w := range c.workers {
		if w.pool == ps {
			v.Queued += w.unstarted // a prefetched task waits for a slot, as a queued one does
		}
	}
	for _, ts := range c.order {
		if ts.status.Finished() {
			continue
		}
		for _, p := range ts.pools {
			if p == ps {
				v.Unfinished++
				break
			}
		}
	}
	for _, w := range c.workers {
		if w.pool == ps {
			v.Workers = append(v.Workers, WorkerView{ID: w.id, Seq: w.seq, Status: w.status, Held: w.held - w.unstarted, Claiming: w.picking > 0, IdleSince: w.idleSince})
		}
	}
	sort.Slice(v.Workers, func(i, j int) bool {
		if v.Workers[i].Seq != v.Workers[j].Seq {
			return v.Workers[i].Seq < v.Workers[j].Seq
		}
		return v.Workers[i].ID < v.Workers[j].ID
	})
	return v, true
}

// claimableLocked counts the tasks of the pool's queue its workers could
// claim at now: queued, not being granted, retry due, dependencies
// succeeded. c.mu must be held.
func (c *Coordinator) claimableLocked(ps *poolState, now time.Time) int {
	n := 0
	for _, pos := range ps.queue {
		ts := c.order[pos]
		if ts.status == state.TaskQueued && !ts.claiming && !ts.notBefore.After(now) && c.depsSucceeded(ts) {
			n++
		}
	}
	return n
}

// DrainWorker asks an idle worker to drain: its status becomes draining
// (in the state, then in memory), so its next claim or heartbeat answer
// says drain and it exits without taking more work. It is a request
// through the protocol, never a signal. It refuses (false, nil) a worker
// that holds a lease or is being granted one, or that is not active: the
// supervisor never stops a worker with work. Errors: an unknown worker;
// state errors.
func (c *Coordinator) DrainWorker(ctx context.Context, id string) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	w := c.workers[id]
	if w == nil {
		c.mu.Unlock()
		return false, fmt.Errorf("no worker %s: %w", id, state.ErrNotFound)
	}
	if w.held > 0 || w.picking > 0 || w.status != state.WorkerActive {
		c.mu.Unlock()
		return false, nil
	}
	// Draining in memory first: no claim picks for it from here on.
	w.status, w.drainRequested = state.WorkerDraining, true
	c.mu.Unlock()
	if err := c.store.SetWorkerStatus(ctx, id, state.WorkerDraining, c.now()); err != nil {
		return false, err
	}
	c.mu.Lock()
	c.broadcastLocked()
	c.mu.Unlock()
	return true, nil
}

// supervision is what apply reports of a pool's supervisor for `wdc
// status` (SetSupervision).
type supervision struct {
	decision supervise.Decision
	at       time.Time
}

// SetSupervision records the supervisor's last step for a pool, taken at
// at; `wdc status` reads it through POST /v1/operator/status.
func (c *Coordinator) SetSupervision(pool string, d supervise.Decision, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.supervised == nil {
		c.supervised = map[string]supervision{}
	}
	c.supervised[pool] = supervision{decision: d, at: at}
}

// pendingLaunches counts the pool's launches whose credential may still
// register: launched, not registered, not closed, within launch_timeout.
func (c *Coordinator) pendingLaunches(ps *poolState) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	n := 0
	for k, cred := range c.launches {
		if k.pool == ps.rt.Name && cred.launch == launchOpen && now.Before(cred.deadline) {
			n++
		}
	}
	return n
}

// Status is what `wdc status` shows of the running apply's supervisor
// (POST /v1/operator/status): per pool, its claimable tasks, its launches
// not registered yet, and the supervisor's last step.
func (c *Coordinator) Status() protocol.StatusResponse {
	resp := protocol.StatusResponse{Pools: []protocol.PoolSupervision{}}
	for _, ps := range c.pools {
		v, _ := c.PoolView(ps.rt.Name)
		c.mu.Lock()
		sv, ok := c.supervised[ps.rt.Name]
		c.mu.Unlock()
		p := protocol.PoolSupervision{Pool: ps.rt.Name, Queued: v.Queued, Pending: c.pendingLaunches(ps)}
		if ok {
			p.Decision = &protocol.SupervisorDecision{Action: string(sv.decision.Action), Count: sv.decision.Count, Reason: sv.decision.Reason, At: sv.at}
		}
		resp.Pools = append(resp.Pools, p)
	}
	return resp
}
