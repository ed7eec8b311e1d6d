package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// The protocol operations, independent of HTTP: the handlers decode and
// authenticate, then call these.

// heartbeat records a heartbeat: it renews the worker's active leases
// (state.Heartbeat), makes a stale worker active again (or draining after
// Drain), releases leases the worker does not report holding although they
// were granted more than two heartbeat intervals ago (the claim answer
// never reached it), and answers drain and the reported tokens that are no
// longer active.
func (c *Coordinator) heartbeat(ctx context.Context, w *workerState, req protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	renewed, err := c.store.Heartbeat(ctx, w.id, now)
	if err != nil {
		return protocol.HeartbeatResponse{}, err
	}
	c.mu.Lock()
	w.lastSeen = now
	cur, draining := w.status, c.draining || w.drainRequested
	if cur == state.WorkerStale && !draining && w.joinID != "" && w.pool.rt.Max > 0 && c.liveWorkersLocked(w.pool) >= w.pool.rt.Max {
		// Its slot was taken while it was silent: coming back would take
		// the pool past max.
		w.drainRequested, draining = true, true
	}
	c.mu.Unlock()
	want := cur
	if cur == state.WorkerStale {
		want = state.WorkerActive
	}
	if draining && want == state.WorkerActive {
		want = state.WorkerDraining
	}
	if want != cur {
		if err := c.store.SetWorkerStatus(ctx, w.id, want, now); err != nil {
			return protocol.HeartbeatResponse{}, err
		}
		c.mu.Lock()
		w.status = want
		c.broadcastLocked()
		c.mu.Unlock()
	}
	active, err := c.store.ActiveLeases(ctx, w.id)
	if err != nil {
		return protocol.HeartbeatResponse{}, err
	}
	reported := make(map[int64]bool, len(req.Leases))
	for _, t := range req.Leases {
		reported[t] = true
	}
	live := map[int64]bool{}
	var unreported []state.Lease
	grace := 2 * w.pool.rt.HeartbeatInterval
	for _, l := range active {
		if l.ExpiresAt.After(now) {
			live[l.Token] = true
		}
		if !reported[l.Token] && now.Sub(l.GrantedAt) > grace {
			unreported = append(unreported, l)
		}
	}
	resp := protocol.HeartbeatResponse{Drain: draining || want == state.WorkerDraining || cur == state.WorkerGone,
		CancelLeases: []int64{}, Renewed: renewed}
	if resp.Drain {
		c.mu.Lock()
		w.toldDrain = true
		c.mu.Unlock()
	}
	seen := map[int64]bool{}
	c.mu.Lock()
	for _, t := range req.Leases {
		switch {
		case seen[t]:
		case !live[t]:
			resp.CancelLeases = append(resp.CancelLeases, t)
		case c.followedLocked(t, now):
			resp.FollowLogs = append(resp.FollowLogs, t)
		}
		seen[t] = true
	}
	c.mu.Unlock()
	for _, l := range unreported {
		c.releaseLocked(ctx, l, "the worker does not report holding it", now)
	}
	return resp, nil
}

// releaseLocked hands a lease back (state.ReleaseLease) and updates memory.
// wmu must be held.
func (c *Coordinator) releaseLocked(ctx context.Context, l state.Lease, why string, now time.Time) {
	ok, err := c.store.ReleaseLease(ctx, l.Token, why, now)
	if err != nil {
		c.log.Warn("releasing a lease", "token", l.Token, "task", l.Task, "err", err)
		return
	}
	if !ok {
		return
	}
	c.mu.Lock()
	pool := c.poolOfWorker(l.WorkerID)
	c.poolMetrics(pool).leasesReleased.Inc()
	c.endLeaseLocked(l.Token)
	if ts := c.tasks[l.Task]; ts != nil && ts.status == state.TaskRunning {
		c.setStatus(ts, state.TaskQueued)
	}
	c.broadcastLocked()
	c.mu.Unlock()
	c.emit([]Event{{At: now, Kind: EventReleased, Task: l.Task, WorkerID: l.WorkerID, Pool: pool,
		Attempt: l.Attempt, Token: l.Token, Message: why}})
}

// claim grants up to max leases (capped by the worker's free capacity) of
// claimable tasks the worker's pool can run, waiting up to wait (capped by
// MaxClaimWait) for one to become claimable. It answers at once, with
// drain=true, after Drain; after StopGranting, or while the worker is not
// active, it waits and answers with no assignments. Its latency, without
// the time it waited for work, goes to wdc_claim_duration_seconds.
func (c *Coordinator) claim(ctx context.Context, w *workerState, max int, wait time.Duration) (resp protocol.ClaimResponse, err error) {
	start := time.Now()
	var waited time.Duration
	defer func() { c.observeClaim(time.Since(start), waited, resp, err) }()
	wait = min(wait, c.maxClaimWait)
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	tried := map[*taskState]bool{}
	for {
		c.mu.Lock()
		if c.draining || w.status == state.WorkerDraining {
			w.toldDrain = true
			c.mu.Unlock()
			return protocol.ClaimResponse{Assignments: []protocol.Assignment{}, Drain: true}, nil
		}
		wake := c.wake
		var picks []*taskState
		if !c.stopped && w.status == state.WorkerActive {
			picks = c.pickLocked(w, min(max, w.pool.rt.Capacity-w.held), c.now(), tried)
		}
		if len(picks) > 0 {
			w.picking++ // DrainWorker leaves it alone until the grant is done
		}
		c.mu.Unlock()
		if len(picks) > 0 {
			asg, err := c.grant(ctx, w, picks)
			c.mu.Lock()
			w.picking--
			c.mu.Unlock()
			if len(asg) > 0 || err != nil {
				return protocol.ClaimResponse{Assignments: asg}, err
			}
			continue // every pick was taken by another writer: look again
		}
		if wait <= 0 {
			return protocol.ClaimResponse{Assignments: []protocol.Assignment{}}, nil
		}
		waitStart := time.Now()
		select {
		case <-wake:
			waited += time.Since(waitStart)
		case <-expired:
			waited += time.Since(waitStart)
			return protocol.ClaimResponse{Assignments: []protocol.Assignment{}}, nil
		case <-ctx.Done():
			return protocol.ClaimResponse{}, ctx.Err()
		}
	}
}

// pickLocked chooses up to n claimable tasks for worker w, in declaration
// order, and marks them claiming. The pool's queue holds the tasks its
// labels satisfy; a worker that joined with narrowed labels also checks its
// own.
func (c *Coordinator) pickLocked(w *workerState, n int, now time.Time, tried map[*taskState]bool) []*taskState {
	var out []*taskState
	for _, pos := range w.pool.queue {
		if len(out) >= n {
			break
		}
		ts := c.order[pos]
		if ts.claiming || tried[ts] || ts.notBefore.After(now) || !c.depsSucceeded(ts) {
			continue
		}
		if w.narrowed && !Satisfies(w.labels, ts.rt.Placement) {
			continue
		}
		ts.claiming = true
		tried[ts] = true
		out = append(out, ts)
	}
	return out
}

// grant leases picks to w, one state transaction each. A pick that another
// writer took first (ErrLeaseHeld, ErrNotClaimable, ErrTaskFinished) is
// refreshed from the state and skipped. If ctx ends before the answer can
// be sent, the leases granted are released again.
func (c *Coordinator) grant(ctx context.Context, w *workerState, picks []*taskState) ([]protocol.Assignment, error) {
	asg := []protocol.Assignment{}
	var granted []state.Lease
	var ferr error
	for i, ts := range picks {
		if ferr != nil || ctx.Err() != nil {
			c.mu.Lock()
			for _, rest := range picks[i:] {
				rest.claiming = false
			}
			c.mu.Unlock()
			break
		}
		l, err := c.grantOne(ctx, w, ts)
		switch {
		case err == nil:
			granted = append(granted, l)
			inputs, ierr := c.assignmentInputs(ctx, ts)
			if ierr != nil {
				c.log.Warn("resolving a task's inputs", "task", ts.rt.Address, "err", ierr)
			}
			c.mu.Lock()
			c.readableLocked(w, inputs)
			c.mu.Unlock()
			workDir := ts.rt.WorkDir
			if w.pool.rt.SharesNoDisk && ts.rt.DefaultDir {
				workDir = "" // the configuration directory is not there
			}
			asg = append(asg, protocol.Assignment{
				Task: l.Task, Attempt: l.Attempt, FencingToken: l.Token, DefHash: l.DefHash,
				Definition: ts.rt.Definition, WorkDir: workDir, DepHashes: ts.rt.DepHashes, Inputs: inputs,
				TimeoutMS: ts.rt.Timeout.Milliseconds(), ExpiresAt: l.ExpiresAt,
			})
		case errors.Is(err, state.ErrLeaseHeld), errors.Is(err, state.ErrNotClaimable), errors.Is(err, state.ErrTaskFinished):
			c.log.Debug("claim lost a race", "task", ts.rt.Address, "err", err)
		case errors.Is(err, state.ErrWorkerNotActive):
			ferr = errStopClaim
		default:
			ferr = err
		}
	}
	if ctx.Err() != nil && len(granted) > 0 {
		c.wmu.Lock()
		for _, l := range granted {
			c.releaseLocked(context.WithoutCancel(ctx), l, "the claim was abandoned before its answer was sent", c.now())
		}
		c.wmu.Unlock()
		return nil, ctx.Err()
	}
	if errors.Is(ferr, errStopClaim) || (ferr != nil && len(asg) > 0) {
		if ferr != nil && !errors.Is(ferr, errStopClaim) {
			c.log.Warn("granting a lease failed", "worker", w.id, "err", ferr)
		}
		ferr = nil
	}
	return asg, ferr
}

var errStopClaim = errors.New("stop claiming")

// grantOne grants one lease (state.ClaimLease) and updates memory. On a
// lost race it refreshes the task's status from the state.
func (c *Coordinator) grantOne(ctx context.Context, w *workerState, ts *taskState) (state.Lease, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	l, err := c.store.ClaimLease(ctx, state.GrantRequest{Task: ts.rt.Address, WorkerID: w.id,
		Timeout: ts.rt.Timeout, Grace: ts.rt.LeaseGrace}, now)
	var fresh *state.Task
	var fworker *state.Worker
	switch {
	case err == nil:
	case errors.Is(err, state.ErrLeaseHeld), errors.Is(err, state.ErrNotClaimable), errors.Is(err, state.ErrTaskFinished):
		if t, terr := c.store.Task(ctx, ts.rt.Address); terr == nil {
			fresh = &t
		}
	case errors.Is(err, state.ErrWorkerNotActive):
		if wr, werr := c.store.Worker(ctx, w.id); werr == nil {
			fworker = &wr
		}
	}
	c.mu.Lock()
	ts.claiming = false
	if err == nil {
		c.setStatus(ts, state.TaskRunning)
		c.leases[l.Token] = &leaseState{task: l.Task, worker: w.id, attempt: l.Attempt}
		w.held++
		c.granted++
	}
	if fresh != nil {
		c.setStatus(ts, fresh.Status)
	}
	if fworker != nil {
		w.status = fworker.Status
	}
	c.mu.Unlock()
	if err != nil {
		return state.Lease{}, err
	}
	w.pool.metrics.leasesGranted.Inc()
	c.emit([]Event{{At: now, Kind: EventLeased, Task: l.Task, WorkerID: w.id, Pool: w.pool.rt.Name,
		Attempt: l.Attempt, Token: l.Token, Message: fmt.Sprintf("attempt %d, expires %s", l.Attempt, l.ExpiresAt.Format(time.RFC3339))}})
	return l, nil
}

// result decides a posted result (state.AcceptResult) and updates memory.
// Its answer is counted for the poster's pool (countResult).
func (c *Coordinator) result(ctx context.Context, poster *workerState, token int64, req protocol.ResultRequest, body []byte) (resp protocol.ResultResponse, err error) {
	start := time.Now()
	defer func() { c.countResult(poster.pool.metrics, start, resp, err) }()
	in := state.ResultInput{
		Key: req.IdempotencyKey, Token: token, Task: req.Task, Attempt: req.Attempt, WorkerID: poster.id,
		Class: state.FailureClass(req.FailureClass), ExitCode: req.ExitCode, Signal: req.Signal, Error: req.Error,
		DefHash: req.DefHash, Artifacts: artifactsOf(req.Artifacts), Body: body,
		Held: func(hashes []string) ([]string, error) {
			if c.artifacts == nil {
				return hashes, nil
			}
			return c.artifacts.Missing(hashes)
		},
	}
	if c.redact != nil {
		in.Error = c.redact(in.Error)
		in.Body = []byte(c.redact(string(in.Body)))
		req.Error = in.Error
	}
	c.mu.Lock()
	var outputs []string
	if l := c.leases[token]; l != nil && l.worker == poster.id {
		if ts := c.tasks[l.task]; ts != nil {
			outputs = ts.rt.Definition.Outputs
		}
	}
	c.mu.Unlock()
	if err := checkOutputs(outputs, req); err != nil {
		return protocol.ResultResponse{}, badRequest("%v", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	if in.Class == state.FailureClassLost && c.isInterrupted() {
		// The operator stopped the apply: an attempt its worker gave up
		// while draining is handed back, not charged to retry.max_lost.
		if l, err := c.store.Lease(ctx, token); err == nil && l.Status == state.LeaseActive &&
			l.WorkerID == poster.id && (req.Task == "" || l.Task == req.Task) && (req.Attempt == 0 || l.Attempt == req.Attempt) {
			c.releaseLocked(ctx, l, "apply interrupted; "+req.Error, now)
			return protocol.ResultResponse{Decision: state.DecisionRejected, Reason: protocol.ReasonLeaseExpired}, nil
		}
	}
	dec, err := c.store.AcceptResult(ctx, in, c.policy, now)
	var miss *state.MissingArtifactsError
	if errors.As(err, &miss) {
		c.mu.Lock()
		c.expectLocked(poster, miss.Missing)
		c.mu.Unlock()
		return protocol.ResultResponse{}, missingAnswer(miss.Missing)
	}
	if err != nil {
		return protocol.ResultResponse{}, err
	}
	tail := ""
	if dec.Outcome != nil && dec.Outcome.Class == state.FailureClassFailure {
		tail = c.stderrTail(in.Artifacts)
	}
	var evs []Event
	c.mu.Lock()
	switch {
	case dec.Outcome != nil:
		poster.expected = nil
		n := len(evs)
		evs = c.applyOutcomeLocked(*dec.Outcome, now, evs)
		if tail != "" && len(evs) > n {
			evs[n].StderrTail = tail // the task's retried or failed event
		}
	case dec.Decision == state.DecisionRejected && !dec.Duplicate:
		evs = append(evs, Event{At: now, Kind: EventRejected, Task: dec.Task, WorkerID: poster.id, Pool: poster.pool.rt.Name,
			Attempt: req.Attempt, Token: token, Message: dec.Reason + ": " + dec.Detail})
	}
	c.mu.Unlock()
	c.emit(evs)
	return protocol.ResultResponse{Decision: dec.Decision, Reason: dec.Reason, Duplicate: dec.Duplicate}, nil
}

// leaseInfo is the wire form of a lease.
func leaseInfo(l state.Lease) protocol.LeaseInfo {
	return protocol.LeaseInfo{FencingToken: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: l.WorkerID, DefHash: l.DefHash,
		Status: string(l.Status), GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt}
}

// lease returns a task's latest lease (the operator route behind `wdc
// workers lease`). Errors: a task the state does not have (404).
func (c *Coordinator) lease(ctx context.Context, task string) (protocol.LeaseLookupResponse, error) {
	if _, err := c.store.Task(ctx, task); err != nil {
		return protocol.LeaseLookupResponse{}, err
	}
	ls, err := c.store.Leases(ctx, task)
	if err != nil {
		return protocol.LeaseLookupResponse{}, err
	}
	resp := protocol.LeaseLookupResponse{Task: task}
	for _, l := range ls {
		if resp.Lease == nil || l.Token > resp.Lease.FencingToken {
			li := leaseInfo(l)
			resp.Lease = &li
		}
	}
	return resp, nil
}

// checkOutputs checks the outputs a result of the current lease names
// against the task's declared output patterns: each must match a pattern,
// and a result that succeeds must name at least one output for each
// pattern (as the agent checks before it reports success). A result of no
// current lease is not checked: the fencing checks reject it anyway.
func checkOutputs(patterns []string, req protocol.ResultRequest) error {
	var names []string
	for _, a := range req.Artifacts {
		if a.Kind != protocol.ArtifactOutput {
			continue
		}
		names = append(names, a.Name)
		matched := false
		for _, p := range patterns {
			if ok, _ := path.Match(p, a.Name); ok {
				matched = true
				break
			}
		}
		if !matched {
			if len(patterns) == 0 {
				return fmt.Errorf("output %q: the task declares no outputs", a.Name)
			}
			return fmt.Errorf("output %q matches none of the task's declared outputs (%s)", a.Name, strings.Join(patterns, ", "))
		}
	}
	if req.FailureClass != "" {
		return nil
	}
	for _, p := range patterns {
		found := false
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("the result succeeds but names no output matching the declared %q: report the attempt failed instead", p)
		}
	}
	return nil
}
