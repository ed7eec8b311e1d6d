package coordinator

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/engine/placement"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// The protocol operations, independent of HTTP: package httpapi decodes
// and authenticates a request, then calls one of these.

// Heartbeat records a heartbeat of s's worker in one write: it renews the
// worker's active leases (state.Heartbeat), makes a stale worker active
// again (or draining after Drain), releases leases the worker does not
// report holding although they were granted more than two heartbeat
// intervals ago (the claim answer never reached it), and answers drain,
// the reported tokens that are no longer active and those someone
// follows the logs of. Errors: the state's.
func (c *Coordinator) Heartbeat(ctx context.Context, s Session, req protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	w := s.w
	if c.faults != nil && c.faults.DropHeartbeat(w.id) {
		return protocol.HeartbeatResponse{}, ErrHeartbeatDropped
	}
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	reported := make(map[int64]bool, len(req.Leases))
	for _, t := range req.Leases {
		reported[t] = true
	}
	grace := 2 * w.pool.rt.HeartbeatInterval
	var (
		now         time.Time
		renewed     int
		cur, want   state.WorkerStatus
		draining    bool
		live        map[int64]bool
		released    []state.Lease
		releasedWhy = "the worker does not report holding it"
	)
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		released, live = nil, map[int64]bool{}
		var err error
		if renewed, err = tx.Heartbeat(w.id, now); err != nil {
			return err
		}
		wr, err := tx.Worker(w.id)
		if err != nil {
			return err
		}
		cur = wr.Status
		c.mu.Lock()
		draining = c.draining || w.drainRequested
		if cur == state.WorkerStale && !draining && w.joinID != "" && w.pool.rt.Max > 0 && c.liveWorkersLocked(w.pool) >= w.pool.rt.Max {
			// Its slot was taken while it was silent: coming back would
			// take the pool past max.
			w.drainRequested, draining = true, true
		}
		c.mu.Unlock()
		want = cur
		if cur == state.WorkerStale {
			want = state.WorkerActive
		}
		if draining && want == state.WorkerActive {
			want = state.WorkerDraining
		}
		if want != cur {
			if err := tx.SetWorkerStatus(w.id, want, now); err != nil {
				return err
			}
		}
		active, err := tx.ActiveLeases(w.id)
		if err != nil {
			return err
		}
		for _, l := range active {
			if l.ExpiresAt.After(now) {
				live[l.Token] = true
			}
			if !reported[l.Token] && now.Sub(l.GrantedAt) > grace {
				ok, err := tx.ReleaseLease(l.Token, releasedWhy, now)
				if err != nil {
					return err
				}
				if ok {
					released = append(released, l)
					delete(live, l.Token)
				}
			}
		}
		return nil
	}, func(err error) {
		if err != nil {
			return
		}
		c.mu.Lock()
		w.lastSeen = now
		if want != cur || w.status != want {
			w.status = want
			c.broadcastLocked()
		}
		evs := c.releasedLocked(released, releasedWhy, now)
		c.mu.Unlock()
		c.emit(evs)
	})
	if err != nil {
		return protocol.HeartbeatResponse{}, err
	}
	resp := protocol.HeartbeatResponse{Drain: draining || want == state.WorkerDraining || cur == state.WorkerGone,
		CancelLeases: []int64{}, Renewed: renewed}
	seen := map[int64]bool{}
	c.mu.Lock()
	if resp.Drain {
		w.toldDrain = true
	}
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
	return resp, nil
}

// Leave deregisters s's worker in one write: it hands back every active
// lease the worker holds (state.ReleaseLease: released, no budget spent,
// the task queued again) and marks the worker gone; then its session is
// revoked. reason, when not "", is why the worker left, and goes into the
// released leases' events. It answers the tokens it handed back. A worker
// that is already gone leaves again without error. Errors: the state's.
func (c *Coordinator) Leave(ctx context.Context, s Session, reason string) (protocol.LeaveResponse, error) {
	w := s.w
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	why := "its worker left"
	if reason != "" {
		why += ": " + reason
	}
	var (
		now      time.Time
		released []state.Lease
	)
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		released = nil
		active, err := tx.ActiveLeases(w.id)
		if err != nil {
			return err
		}
		for _, l := range active {
			ok, err := tx.ReleaseLease(l.Token, why, now)
			if err != nil {
				return err
			}
			if ok {
				released = append(released, l)
			}
		}
		return tx.SetWorkerStatus(w.id, state.WorkerGone, now)
	}, func(err error) {
		if err != nil {
			return
		}
		c.mu.Lock()
		w.lastSeen = now
		w.status = state.WorkerGone
		c.revokeSessionLocked(w)
		evs := c.releasedLocked(released, why, now)
		c.broadcastLocked()
		c.mu.Unlock()
		c.emit(evs)
	})
	if err != nil {
		return protocol.LeaveResponse{}, err
	}
	resp := protocol.LeaveResponse{Released: make([]int64, 0, len(released))}
	for _, l := range released {
		resp.Released = append(resp.Released, l.Token)
	}
	return resp, nil
}

// releasedLocked brings memory in line with leases the state handed back
// (state.ReleaseLease answered true) and returns their events. mu must be
// held.
func (c *Coordinator) releasedLocked(ls []state.Lease, why string, now time.Time) []Event {
	var evs []Event
	for _, l := range ls {
		pool := c.poolOfWorker(l.WorkerID)
		c.poolMetrics(pool).leasesReleased.Inc()
		c.endLeaseLocked(l.Token, l.Unstarted)
		if ts := c.tasks[l.Task]; ts != nil && ts.status == state.TaskRunning {
			c.setStatus(ts, state.TaskQueued)
		}
		evs = append(evs, Event{At: now, Kind: EventReleased, Task: l.Task, WorkerID: l.WorkerID, Pool: pool,
			Attempt: l.Attempt, Token: l.Token, Message: why})
	}
	if len(ls) > 0 {
		c.broadcastLocked()
	}
	return evs
}

// release hands leases back (state.ReleaseLease), in one write, and
// updates memory; a lease that has ended meanwhile is left alone. It
// returns how many it released.
func (c *Coordinator) release(ctx context.Context, tokens []int64, why string) (int, error) {
	return c.releaseIf(ctx, tokens, why, nil)
}

// releaseIf is release, of the active leases for which keep (nil: every
// one) holds as the write reads them.
func (c *Coordinator) releaseIf(ctx context.Context, tokens []int64, why string, keep func(state.Lease) bool) (int, error) {
	var now time.Time
	var released []state.Lease
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		released = nil
		for _, t := range tokens {
			l, err := tx.Lease(t)
			if err != nil || l.Status != state.LeaseActive || (keep != nil && !keep(l)) {
				continue
			}
			ok, err := tx.ReleaseLease(t, why, now)
			if err != nil {
				return err
			}
			if ok {
				released = append(released, l)
			}
		}
		return nil
	}, func(err error) {
		if err != nil {
			return
		}
		c.mu.Lock()
		evs := c.releasedLocked(released, why, now)
		c.mu.Unlock()
		c.emit(evs)
	})
	if err != nil {
		return 0, err
	}
	return len(released), nil
}

// Claim grants up to max leases (capped by the worker's free capacity) of
// claimable tasks s's worker's pool can run, waiting up to wait (capped by
// MaxClaimWait) for one to become claimable. It answers at once, with
// drain=true, after Drain; after StopGranting, or while the worker is not
// active, it waits and answers with no assignments. Its latency, without
// the time it waited for work, goes to wdc_claim_duration_seconds. If ctx
// ends before the answer, the leases just granted are released again and
// ctx's error is returned. Errors: the state's.
func (c *Coordinator) Claim(ctx context.Context, s Session, max int, wait time.Duration) (resp protocol.ClaimResponse, err error) {
	w := s.w
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
	reclaims := 0
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
			picks = c.pickLocked(w, min(max, w.startedFree()), c.now(), tried)
		}
		if len(picks) > 0 {
			w.picking++ // DrainWorker leaves it alone until the grant is done
			w.pending += len(picks)
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
		var later time.Duration // until an unstarted lease becomes one to take over
		if reclaims < maxReclaims {
			asg, ok, until, err := c.takeOverUnstarted(ctx, w)
			if ok || err != nil {
				return protocol.ClaimResponse{Assignments: asg}, err
			}
			if later = until; later == 0 {
				reclaims++ // nothing to wait for: this try counts
			}
		}
		if wait <= 0 {
			return protocol.ClaimResponse{Assignments: []protocol.Assignment{}}, nil
		}
		var takeOver *time.Timer
		var takeOverC <-chan time.Time
		if later > 0 {
			takeOver = time.NewTimer(later)
			takeOverC = takeOver.C
		}
		waitStart := time.Now()
		select {
		case <-wake:
			waited += time.Since(waitStart)
		case <-takeOverC:
			waited += time.Since(waitStart)
			reclaims++
		case <-expired:
			waited += time.Since(waitStart)
			return protocol.ClaimResponse{Assignments: []protocol.Assignment{}}, nil
		case <-ctx.Done():
			return protocol.ClaimResponse{}, ctx.Err()
		}
		if takeOver != nil {
			takeOver.Stop() // (a timer left running on a return is collected: Go 1.23)
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
		if w.narrowed && !placement.Satisfies(w.labels, ts.rt.Placement) {
			continue
		}
		ts.claiming = true
		tried[ts] = true
		out = append(out, ts)
	}
	return out
}

// grantTry is one pick of a grant: the lease it got, or why not.
type grantTry struct {
	ts     *taskState
	lease  state.Lease
	err    error
	fresh  *state.Task   // the task as the state has it, after a lost race
	worker *state.Worker // the worker as the state has it, when it was not active
}

// grant leases picks to w, in one write of the group commit (each pick in
// its own part of it). A pick that another writer took first
// (ErrLeaseHeld, ErrNotClaimable, ErrTaskFinished) is refreshed from the
// state and skipped. If ctx ends before the answer can be sent, the leases
// granted are released again.
func (c *Coordinator) grant(ctx context.Context, w *workerState, picks []*taskState) ([]protocol.Assignment, error) {
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	var tries []grantTry
	var now time.Time
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		tries = tries[:0]
		return c.grantTx(tx, w, picks, 0, now, &tries)
	}, func(err error) {
		c.mu.Lock()
		evs := c.grantedLocked(w, picks, 0, tries, err, now)
		c.mu.Unlock()
		c.emit(evs)
	})
	if err != nil {
		return nil, err
	}
	asg, err := c.assignments(ctx, w, tries, "the claim was abandoned before its answer was sent")
	if err != nil {
		return nil, err
	}
	var ferr error
	for _, g := range tries {
		switch {
		case g.err == nil:
		case errors.Is(g.err, state.ErrLeaseHeld), errors.Is(g.err, state.ErrNotClaimable), errors.Is(g.err, state.ErrTaskFinished):
			c.log.Debug("claim lost a race", "task", g.ts.rt.Address, "err", g.err)
		case errors.Is(g.err, state.ErrWorkerNotActive):
		default:
			ferr = g.err
		}
	}
	if ferr != nil {
		if len(asg) == 0 {
			return asg, ferr
		}
		c.log.Warn("granting a lease failed", "worker", w.id, "err", ferr)
	}
	return asg, nil
}

// grantTx tries to lease each pick to w inside tx, the last prefetched of
// them unstarted, appending what became of it to tries; it stops at the
// first pick that fails for a reason other than a lost race. It returns an
// error only for a broken transaction.
func (c *Coordinator) grantTx(tx *state.Tx, w *workerState, picks []*taskState, prefetched int, now time.Time, tries *[]grantTry) error {
	for i, ts := range picks {
		g := grantTry{ts: ts}
		g.err = tx.Part(func() error {
			var err error
			g.lease, err = tx.ClaimLease(state.GrantRequest{Task: ts.rt.Address, WorkerID: w.id,
				Timeout: ts.rt.Timeout, Grace: ts.rt.LeaseGrace, Prefetched: i >= len(picks)-prefetched,
				Expected: &state.ClaimExpectation{Attempts: int(ts.attempts.Load()), DefHash: ts.rt.DefHash, TTL: w.pool.rt.TTL}}, now)
			return err
		})
		switch {
		case g.err == nil:
		case errors.Is(g.err, state.ErrLeaseHeld), errors.Is(g.err, state.ErrNotClaimable), errors.Is(g.err, state.ErrTaskFinished):
			if t, err := tx.Task(ts.rt.Address); err == nil {
				g.fresh = &t
			}
		case errors.Is(g.err, state.ErrWorkerNotActive):
			if wr, err := tx.Worker(w.id); err == nil {
				g.worker = &wr
			}
		}
		*tries = append(*tries, g)
		if g.err != nil && g.fresh == nil {
			break // the worker is not active, or the state failed
		}
	}
	return nil
}

// grantedLocked brings memory in line with a grant's tries (err: the
// write's error, when the whole write failed) and returns the leased
// events. Every pick stops claiming; the last prefetched of them were to
// be granted unstarted. mu must be held.
func (c *Coordinator) grantedLocked(w *workerState, picks []*taskState, prefetched int, tries []grantTry, err error, now time.Time) []Event {
	for _, ts := range picks {
		ts.claiming = false
	}
	w.pending -= len(picks)
	w.pendingPrefetch -= prefetched
	if err != nil {
		return nil
	}
	var evs []Event
	for _, g := range tries {
		switch {
		case g.err == nil:
			l := g.lease
			c.setStatus(g.ts, state.TaskRunning)
			g.ts.attempts.Store(int64(l.Attempt))
			c.leases[l.Token] = &leaseState{task: l.Task, worker: w.id, attempt: l.Attempt, unstarted: l.Unstarted, grantedAt: l.GrantedAt}
			w.held++
			msg := fmt.Sprintf("attempt %d, expires %s", l.Attempt, l.ExpiresAt.Format(time.RFC3339))
			if l.Unstarted {
				w.unstarted++
				msg = fmt.Sprintf("attempt %d, prefetched: starts when a slot of its worker frees; expires %s unless renewed", l.Attempt, l.ExpiresAt.Format(time.RFC3339))
			}
			c.granted++
			w.pool.metrics.leasesGranted.Inc()
			evs = append(evs, Event{At: now, Kind: EventLeased, Task: l.Task, WorkerID: w.id, Pool: w.pool.rt.Name,
				Attempt: l.Attempt, Token: l.Token, Message: msg})
		case g.fresh != nil:
			c.setStatus(g.ts, g.fresh.Status)
			g.ts.attempts.Store(int64(g.fresh.Attempts))
		case g.worker != nil:
			w.status = g.worker.Status
		}
	}
	return evs
}

// assignment is the answer for lease l of task ts granted to w: the
// definition, the directory to run in and the inputs, which w may then
// download.
func (c *Coordinator) assignment(ctx context.Context, w *workerState, ts *taskState, l state.Lease) protocol.Assignment {
	inputs, err := c.assignmentInputs(ctx, ts)
	if err != nil {
		c.log.Warn("resolving a task's inputs", "task", ts.rt.Address, "err", err)
	}
	c.mu.Lock()
	c.readableLocked(w, inputs)
	c.mu.Unlock()
	workDir := ts.rt.WorkDir
	if w.pool.rt.SharesNoDisk && ts.rt.DefaultDir {
		workDir = "" // the configuration directory is not there
	}
	return protocol.Assignment{
		Task: l.Task, Attempt: l.Attempt, FencingToken: l.Token, DefHash: l.DefHash,
		Definition: ts.rt.Definition, WorkDir: workDir, DepHashes: ts.rt.DepHashes, Inputs: inputs,
		TimeoutMS: ts.rt.Timeout.Milliseconds(), ExpiresAt: l.ExpiresAt, Prefetched: l.Unstarted,
	}
}

// Result decides a result that s's worker posted for lease token
// (state.AcceptResult), in one write, and updates memory: the idempotency
// key first (a replay gets the first decision back), then the fencing
// checks (a rejection is an answer, decision "rejected" with its reason,
// not an error; recorded within the bounds keepRejection keeps), then
// its outputs against the task's declared ones (checkResultOutputs) and
// the blobs it names, then the settlement of the attempt and its task. An
// accepted result that asks for next leases gets them granted in the same
// write (eager dispatch). While the apply is interrupted, a lost attempt
// is handed back without spending retry.max_lost (answered rejected,
// lease_expired). Its answer is counted for the poster's pool
// (countResult). Errors (*Error): an artifact name that could leave the
// attempt's directory (CheckArtifactNames, CodeBadRequest, before
// anything else); outputs the task does not declare, or a
// success without a declared output (CodeBadRequest); blobs the
// coordinator lacks (CodeMissingArtifacts: the worker uploads them, then
// posts again; nothing was decided); the state's.
func (c *Coordinator) Result(ctx context.Context, s Session, token int64, req protocol.ResultRequest, body []byte) (resp protocol.ResultResponse, err error) {
	poster := s.w
	start := time.Now()
	defer func() { c.countResult(poster.pool.metrics, start, resp, err) }()
	if err := CheckArtifactNames(req.Artifacts); err != nil {
		return protocol.ResultResponse{}, invalid("%v", err)
	}
	if c.faults != nil && c.faults.RevokeBeforeResult(req.Task, req.Attempt) {
		if _, err := c.revokeLease(ctx, token, "the lease was revoked before its result arrived (fault late_result)", poster); err != nil {
			return protocol.ResultResponse{}, err
		}
	}
	in, req := c.resultInput(poster, token, req, body)
	in.Check = func(task string) error { return c.checkResultOutputs(task, req) }
	in.Keep = func(rej state.ResultDecision) (bool, string) {
		return c.keepRejection(poster, token, req.IdempotencyKey, rej)
	}
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	rw := &resultWrite{c: c, poster: poster, token: token, req: req, in: in,
		interrupted: in.Class == state.FailureClassLost && c.isInterrupted(), why: "apply interrupted; " + req.Error}
	rw.starts, rw.unknownStarts = c.takeStarts(poster, token, req.Started)
	rw.picks, rw.ending, rw.prefetched = c.pickNext(poster, token, req.Next, req.Prefetch)
	if in.Class == state.FailureClassFailure {
		rw.tail = c.stderrTail(in.Artifacts) // read before the write: the committer does no file reads
	}
	err = c.store.Write(ctx, rw.tx, rw.after)
	var miss *state.MissingArtifactsError
	if errors.As(err, &miss) {
		return protocol.ResultResponse{}, missingArtifacts(miss.Missing)
	}
	if err != nil {
		return protocol.ResultResponse{}, err // a refusal of checkResultOutputs among them
	}
	if len(rw.released) > 0 {
		return protocol.ResultResponse{Decision: state.DecisionRejected, Reason: protocol.ReasonLeaseExpired, CancelLeases: rw.cancelled()}, nil
	}
	resp = protocol.ResultResponse{Decision: rw.dec.Decision, Reason: rw.dec.Reason, Duplicate: rw.dec.Duplicate, CancelLeases: rw.cancelled()}
	resp.Assignments, err = c.assignments(ctx, poster, rw.tries, "the answer that granted it was abandoned before it was sent")
	if err != nil {
		return protocol.ResultResponse{}, err
	}
	return resp, nil
}

// resultInput is what the state decides a posted result by, with its
// error text and body redacted (the error text of the request too, which
// the events quote).
func (c *Coordinator) resultInput(poster *workerState, token int64, req protocol.ResultRequest, body []byte) (state.ResultInput, protocol.ResultRequest) {
	in := state.ResultInput{
		Key: req.IdempotencyKey, Token: token, Task: req.Task, Attempt: req.Attempt, WorkerID: poster.id,
		Class: state.FailureClass(req.FailureClass), ExitCode: req.ExitCode, Signal: req.Signal, Error: req.Error,
		DefHash: req.DefHash, Artifacts: artifactsOf(req.Artifacts), Body: body,
		Recommendations: recommendationsOf(req),
		Held:            c.missingBlobs,
	}
	if c.redact != nil {
		in.Error = c.redact(in.Error)
		in.Body = []byte(c.redact(string(in.Body)))
		req.Error = in.Error
	}
	return in, req
}

// missingBlobs returns those of hashes the artifact store lacks (all of
// them without a store).
func (c *Coordinator) missingBlobs(hashes []string) ([]string, error) {
	if c.artifacts == nil {
		return hashes, nil
	}
	return c.artifacts.Missing(hashes)
}

// checkResultOutputs checks the outputs of a result that passed the
// fencing checks for a lease of task against the task's declared output
// patterns (checkOutputs): state.AcceptResult asks it inside the
// transaction, after those checks, so a late result gets its fenced
// rejection whatever outputs it names. Errors: CodeBadRequest.
func (c *Coordinator) checkResultOutputs(task string, req protocol.ResultRequest) error {
	c.mu.Lock()
	var patterns []string
	if ts := c.tasks[task]; ts != nil {
		patterns = ts.rt.Definition.Outputs
	}
	c.mu.Unlock()
	if err := checkOutputs(patterns, req); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// resultWrite is the write of one posted result: what it hands in, what
// the state decided, and the next leases granted with it.
type resultWrite struct {
	c      *Coordinator
	poster *workerState
	token  int64
	req    protocol.ResultRequest
	in     state.ResultInput
	// picks are the tasks picked for the worker's next leases (pickNext),
	// the last prefetched of them to be granted unstarted, ending the
	// lease whose slot they count as free.
	picks      []*taskState
	prefetched int
	ending     *leaseState
	// starts are the reported starts of the worker's prefetched leases
	// (takeStarts), taken in the write; unknownStarts were refused before
	// it, refusedStarts by it.
	starts                       []state.LeaseStart
	unknownStarts, refusedStarts []int64
	tail                         string // the stderr tail of a failed attempt
	// interrupted: the apply was interrupted and the attempt is lost; its
	// lease is handed back with reason why instead of being settled.
	interrupted bool
	why         string

	now      time.Time
	dec      state.ResultDecision
	released []state.Lease
	tries    []grantTry
}

// tx is the write's part of the transaction: the handing back of an
// interrupted attempt, or the decision and the eager grant of the next
// leases. It may run again in a new transaction.
func (rw *resultWrite) tx(tx *state.Tx) error {
	rw.now = rw.c.now()
	rw.dec, rw.released = state.ResultDecision{}, nil
	if len(rw.starts) > 0 {
		// The starts first, whatever the result's decision: the worker
		// runs those attempts now.
		var err error
		if rw.refusedStarts, err = tx.StartLeases(rw.poster.id, rw.starts, rw.now); err != nil {
			return err
		}
	}
	if rw.interrupted {
		// The operator stopped the apply: an attempt its worker gave up
		// while draining is handed back, not charged to retry.max_lost.
		req := rw.req
		if l, err := tx.Lease(rw.token); err == nil && l.Status == state.LeaseActive &&
			l.WorkerID == rw.poster.id && (req.Task == "" || l.Task == req.Task) && (req.Attempt == 0 || l.Attempt == req.Attempt) {
			ok, err := tx.ReleaseLease(rw.token, rw.why, rw.now)
			if ok {
				rw.released = append(rw.released, l)
			}
			return err
		}
	}
	var err error
	if rw.dec, err = tx.AcceptResult(rw.in, rw.c.policy, rw.now); err != nil {
		return err
	}
	rw.tries = rw.tries[:0]
	if len(rw.picks) > 0 && rw.dec.Decision == state.DecisionAccepted && !rw.dec.Duplicate {
		// Eager dispatch: the worker's next leases, in this write.
		return rw.c.grantTx(tx, rw.poster, rw.picks, rw.prefetched, rw.now, &rw.tries)
	}
	return nil
}

// cancelled lists the reported starts refused: the worker stops those
// attempts.
func (rw *resultWrite) cancelled() []int64 {
	return slices.Concat(rw.unknownStarts, rw.refusedStarts)
}

// after brings memory in line with the write's outcome (err) and queues
// its events, in commit order: the result's, then its next leases'.
func (rw *resultWrite) after(err error) {
	c := rw.c
	defer rw.settlePicks(err)
	var miss *state.MissingArtifactsError
	if errors.As(err, &miss) {
		c.mu.Lock()
		c.expectLocked(rw.poster, rw.token, miss.Missing)
		c.mu.Unlock()
		return
	}
	if err != nil {
		return
	}
	judge := false
	c.mu.Lock()
	evs := c.releasedLocked(rw.released, rw.why, rw.now)
	if rw.dec.Outcome != nil || rw.dec.Decision == state.DecisionRejected {
		// This result is decided: it uploads nothing more (the worker's
		// other results may still be uploading theirs).
		delete(rw.poster.expected, rw.token)
	}
	switch dec := rw.dec; {
	case len(rw.released) > 0:
	case dec.Outcome != nil:
		if judge = c.cfg != nil && len(rw.in.Recommendations) > 0; judge {
			c.judging++ // before the outcome: the apply is not done until they are judged
		}
		evs = c.applyOutcomeLocked(*dec.Outcome, rw.now, evs)
		evs = append(evs, intakeRejections(rw.in, dec.Task, rw.now)...)
	case dec.Decision == state.DecisionRejected && !dec.Duplicate && !dec.Unrecorded:
		evs = append(evs, Event{At: rw.now, Kind: EventRejected, Task: dec.Task, WorkerID: rw.poster.id, Pool: rw.poster.pool.rt.Name,
			Attempt: rw.req.Attempt, Token: rw.token, Message: dec.Reason + ": " + dec.Detail})
	}
	c.mu.Unlock()
	if rw.dec.Outcome != nil && rw.dec.Outcome.Class == state.FailureClassFailure && len(evs) > 0 {
		evs[0].StderrTail = rw.tail // the task's retried or failed event
	}
	c.emit(evs)
	if judge {
		c.nudgeJudge()
	}
}

// settlePicks ends the picks of the worker's next leases: granted ones
// become leases in memory (and leased events), the others claimable
// again.
func (rw *resultWrite) settlePicks(err error) {
	if len(rw.picks) == 0 {
		return
	}
	c := rw.c
	c.mu.Lock()
	rw.poster.picking--
	if rw.ending != nil {
		rw.ending.ending = false
	}
	evs := c.grantedLocked(rw.poster, rw.picks, rw.prefetched, rw.tries, err, rw.now)
	c.mu.Unlock()
	c.emit(evs)
}

// pickNext picks up to next tasks for poster to lease with its result of
// lease token (eager dispatch), capped by its free capacity once that
// lease has ended: slots of leases held and of picks still being written
// (its claims' and other results') are taken, and the ending lease's slot
// counts for one result only (the lease returned is marked ending until
// the result's write settles). After those, up to prefetch more to be
// granted unstarted (prefetched, the last of the picks), within
// maxUnstarted. None while the coordinator stops granting or drains, or
// while the worker is not active. The picks are marked claiming until the
// result's write settles them (grantedLocked).
func (c *Coordinator) pickNext(poster *workerState, token int64, next, prefetch int) (picks []*taskState, ending *leaseState, prefetched int) {
	if next <= 0 && prefetch <= 0 {
		return nil, nil, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.draining || poster.status != state.WorkerActive {
		return nil, nil, 0
	}
	free, pfree := poster.startedFree(), poster.prefetchFree()
	if c.poolHasFreeSlotLocked(poster) {
		pfree = 0 // another worker of the pool can start it now: no prefetch
	}
	l := c.leases[token]
	switch {
	case l == nil || l.worker != poster.id || l.ending:
		l = nil
	case l.unstarted:
		pfree++ // the unstarted lease this result ends (its start unreported)
	default:
		free++ // the lease this result ends; a copy of this result posted at the same time may not count it too
	}
	if c.faults != nil {
		// Injected faults act when an attempt starts; a prefetched one's
		// start is reported late (with its worker's next result).
		pfree = 0
	}
	started := max(0, min(next, free))
	picks = c.pickLocked(poster, started+max(0, min(prefetch, pfree)), c.now(), map[*taskState]bool{})
	if len(picks) == 0 {
		return nil, nil, 0
	}
	prefetched = max(0, len(picks)-started)
	poster.picking++
	poster.pending += len(picks)
	poster.pendingPrefetch += prefetched
	if l != nil {
		l.ending = true
	}
	return picks, l, prefetched
}

// maxReclaims bounds the unstarted leases one claim hands back to take.
const maxReclaims = 3

// takeOverAfter is how long an unstarted lease waits from its grant before
// a worker with a free slot may take it over. Its holder starts it the
// moment its running attempt ends and reports the start with that
// attempt's result; a takeover in the same instant would release a lease
// whose attempt has just begun (its start is then refused, and the holder
// stops it: the task's command would have started twice). Waiting leaves
// the attempts shorter than this to their holder, and the race only to
// longer ones, whose end falls in the few milliseconds of a result's
// round trip far less often (docs/design.md §3, prefetched leases).
const takeOverAfter = time.Second

// poolHasFreeSlotLocked reports whether a worker of w's pool other than w
// is active with a slot free for a started lease. c.mu must be held.
func (c *Coordinator) poolHasFreeSlotLocked(w *workerState) bool {
	for _, o := range c.workers {
		if o != w && o.pool == w.pool && o.status == state.WorkerActive && o.startedFree() > 0 {
			return true
		}
	}
	return false
}

// takeOverUnstarted takes over, for w, one unstarted lease that another
// worker of w's pool holds for a task w may run, when w has a free slot
// and found nothing to claim: a prefetched task never waits behind a
// running attempt while a worker that could run it idles. In one write
// the lease is handed back at no cost, if it is still unstarted (the
// state decides), and its task granted to w, so the takeover and the
// grant happen at one instant (docs/design.md §3, prefetched leases); the
// holder learns it from its next heartbeat or from its start, which is
// then refused. Only a lease granted takeOverAfter ago or longer is taken
// over. It reports whether a lease was taken over and granted, with the
// assignment; or else, in later, how long until one it could take becomes
// old enough (0: none).
func (c *Coordinator) takeOverUnstarted(ctx context.Context, w *workerState) (asg []protocol.Assignment, ok bool, later time.Duration, err error) {
	c.mu.Lock()
	if c.stopped || w.status != state.WorkerActive || w.startedFree() <= 0 {
		c.mu.Unlock()
		return nil, false, 0, nil
	}
	now := c.now()
	var tok int64
	var holder string
	var picked *taskState
	for t, l := range c.leases {
		if !l.unstarted || l.worker == w.id || l.ending {
			continue
		}
		o, ts := c.workers[l.worker], c.tasks[l.task]
		if o == nil || ts == nil || ts.claiming || o.pool != w.pool || (w.narrowed && !placement.Satisfies(w.labels, ts.rt.Placement)) {
			continue
		}
		if wait := l.grantedAt.Add(takeOverAfter).Sub(now); wait > 0 {
			if later == 0 || wait < later {
				later = wait
			}
			continue
		}
		if tok == 0 || t < tok {
			tok, holder, picked = t, l.worker, ts
		}
	}
	if tok == 0 {
		c.mu.Unlock()
		return nil, false, later, nil
	}
	picks := []*taskState{picked}
	picked.claiming = true
	w.picking++
	w.pending++
	c.mu.Unlock()
	why := "prefetched by worker " + holder + ", which had no free slot; worker " + w.id + " has one"
	c.wmu.RLock()
	var (
		released []state.Lease
		tries    []grantTry
	)
	err = c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		released, tries = nil, nil
		if c.hookTakeOverWrite != nil {
			c.hookTakeOverWrite()
		}
		l, err := tx.Lease(tok)
		if err != nil || l.Status != state.LeaseActive || !l.Unstarted {
			return err // started or ended meanwhile: nothing to take over
		}
		if ok, err := tx.ReleaseLease(tok, why, now); err != nil || !ok {
			return err
		}
		released = append(released, l)
		return c.grantTx(tx, w, picks, 0, now, &tries)
	}, func(err error) {
		c.mu.Lock()
		var evs []Event
		if err == nil {
			evs = c.releasedLocked(released, why, now)
		}
		evs = append(evs, c.grantedLocked(w, picks, 0, tries, err, now)...)
		w.picking--
		c.mu.Unlock()
		c.emit(evs)
	})
	c.wmu.RUnlock()
	if err != nil {
		return nil, false, 0, err
	}
	if len(released) == 0 {
		return nil, false, 0, nil
	}
	asg, err = c.assignments(ctx, w, tries, "the claim was abandoned before its answer was sent")
	return asg, len(asg) > 0, 0, err
}

// takeStarts brings memory in line with the starts poster reports with its
// result of lease own (ResultRequest.Started; the result starts its own
// lease too) and returns those the write is to take,
// with the task's timeout and lease grace, and the refused ones: tokens of
// no lease of poster's it knows. A lease it knows as started is passed on
// too (an earlier post that reported it may not have been written).
func (c *Coordinator) takeStarts(poster *workerState, own int64, tokens []int64) (starts []state.LeaseStart, refused []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := func(l *leaseState) {
		if l.unstarted {
			l.unstarted = false
			poster.unstarted--
			if c.faults != nil {
				c.faults.AttemptStarted(l.task, l.attempt, poster.id, poster.pid)
			}
		}
	}
	if l := c.leases[own]; l != nil && l.worker == poster.id {
		started(l) // a result is its lease's start too: its attempt ran
	}
	for _, tok := range tokens {
		if tok == own {
			continue
		}
		l := c.leases[tok]
		var ts *taskState
		if l != nil && l.worker == poster.id {
			ts = c.tasks[l.task]
		}
		if ts == nil {
			refused = append(refused, tok)
			continue
		}
		started(l)
		starts = append(starts, state.LeaseStart{Token: tok, Timeout: ts.rt.Timeout, Grace: ts.rt.LeaseGrace})
	}
	return starts, refused
}

// assignments answers the leases granted in tries (a claim's or a
// result's), releasing them again, with the reason abandoned, when ctx
// ended before the answer could be sent. A FaultInjector is told of the
// started ones only once they are kept: a lease released here never ran,
// so a worker killed as its attempt starts must not be killed before.
func (c *Coordinator) assignments(ctx context.Context, w *workerState, tries []grantTry, abandoned string) ([]protocol.Assignment, error) {
	if c.hookAnswer != nil {
		c.hookAnswer()
	}
	var granted []int64
	asg := []protocol.Assignment{}
	for _, g := range tries {
		if g.err == nil {
			granted = append(granted, g.lease.Token)
			asg = append(asg, c.assignment(ctx, w, g.ts, g.lease))
		}
	}
	if ctx.Err() != nil && len(granted) > 0 {
		if _, err := c.release(context.WithoutCancel(ctx), granted, abandoned); err != nil {
			c.log.Warn("releasing abandoned leases", "worker", w.id, "err", err)
		}
		return nil, ctx.Err()
	}
	if c.faults != nil && len(granted) > 0 {
		c.mu.Lock()
		for _, a := range asg {
			if !a.Prefetched {
				c.faults.AttemptStarted(a.Task, a.Attempt, w.id, w.pid)
			}
		}
		c.mu.Unlock()
	}
	return asg, nil
}

// leaseInfo is the wire form of a lease.
func leaseInfo(l state.Lease) protocol.LeaseInfo {
	return protocol.LeaseInfo{FencingToken: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: l.WorkerID, DefHash: l.DefHash,
		Status: string(l.Status), GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt, Unstarted: l.Unstarted}
}

// Lease returns a task's latest lease (the operator route behind `wdc
// workers lease`). Errors: a task the state does not have
// (state.ErrNotFound).
//
// It reads in the group commit's order, like a write: a read transaction
// of its own could miss a write already decided (its answer waiting for
// its commit) and so show a lease older than what the coordinator has
// answered.
func (c *Coordinator) Lease(ctx context.Context, task string) (protocol.LeaseLookupResponse, error) {
	var ls []state.Lease
	err := c.store.Write(ctx, func(tx *state.Tx) error {
		if _, err := tx.Task(task); err != nil {
			return err
		}
		var err error
		ls, err = tx.Leases(task)
		return err
	}, nil)
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
// current lease never gets here: the fencing checks reject it first.
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
