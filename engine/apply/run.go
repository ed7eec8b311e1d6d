package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// ErrLockLost is Run's error when the apply lock was removed or taken over
// while it ran (Options.LockLost, or a write the state refused for it): it
// stopped its workers and wrote nothing more. It wraps state.ErrLockLost.
var ErrLockLost error = lockLostError{}

type lockLostError struct{}

func (lockLostError) Error() string {
	return "the state lock was taken over or removed (or the state file itself removed or replaced) while applying; stopped without writing more to the state"
}

func (lockLostError) Unwrap() error { return state.ErrLockLost }

// stepInterval is how often apply's loop observes and decides when nothing
// wakes it sooner (a worker's exit does).
const stepInterval = 200 * time.Millisecond

// poolRun is what apply knows and decides about one pool while it runs.
type poolRun struct {
	cfg *Pool
	// seq is the last launch sequence used.
	seq int
	// failedInRow counts the launches in a row that never registered (or
	// never started); a registration resets it.
	failedInRow int
	// lastLaunchErr is the pool's last launch that failed to start,
	// cleared by a launch that started; lastExit how its last worker that
	// never registered ended. The pool's failure quotes them.
	lastLaunchErr error
	lastExit      string
	// cannotStart: the pool's last worker that never registered could
	// not start for a reason its next launch would meet again
	// (providers.WaitResponse.Permanent); lastExit says which.
	cannotStart bool
	// failed: the pool failed; its tasks are failed and it launches no
	// more.
	failed bool
	// waitingSince is, for an external pool, since when it has had work
	// and no live worker; zero when it is not waiting.
	waitingSince time.Time
	// hold is the reason of the supervisor's last hold, logged when it
	// changes.
	hold string
}

func (p *poolRun) name() string { return p.cfg.Runtime.Name }

// poolFacts is what one step observes of a pool: the input of decidePool.
type poolFacts struct {
	External     bool
	Failed       bool
	Planned      int // workers the plan launches (0: the pool has no work)
	Unfinished   int // tasks of the pool not finished
	Live         int // registered workers active or draining
	WaitingSince time.Time
	FailedInRow  int
	CannotStart  bool // a worker could not start for a reason that will not change
	Now          time.Time
	SuperviseDue bool
}

// poolStepKind is what a step does to a pool.
type poolStepKind int

const (
	poolNothing   poolStepKind = iota
	poolSupervise              // ask the supervisor: launch, drain or hold
	poolFail                   // fail the pool's remaining tasks
)

// poolStep is decidePool's answer.
type poolStep struct {
	Kind poolStepKind
	// WaitingSince is the external pool's wait after this step.
	WaitingSince time.Time
	// TimedOut (poolFail of an external pool): no worker joined, or none
	// was left, within launch_timeout.
	TimedOut bool
	// NeverRegistered (poolFail of a launched pool): neverRegisteredLimit
	// launches in a row never registered.
	NeverRegistered bool
	// CannotStart (poolFail of a launched pool): a worker could not start
	// for a reason another launch would meet again.
	CannotStart bool
}

// decidePool decides one step of a pool from what was observed: an
// external pool waits for a worker to join while it has work and none is
// live, and fails after its launch_timeout of that; a launched pool fails
// after neverRegisteredLimit launches in a row that never registered, or at
// once when a worker could not start for a reason that will not change, and
// is otherwise supervised when the supervisor's tick is due. A failed pool
// and a pool with no planned work are left alone. It reads nothing but
// its argument.
func decidePool(f poolFacts, launchTimeout time.Duration) poolStep {
	st := poolStep{WaitingSince: f.WaitingSince}
	switch {
	case f.Failed || f.Planned == 0:
		return st
	case f.External:
		switch {
		case f.Unfinished == 0 || f.Live > 0:
			st.WaitingSince = time.Time{}
		case f.WaitingSince.IsZero():
			st.WaitingSince = f.Now
		case f.Now.Sub(f.WaitingSince) > launchTimeout:
			st.Kind, st.TimedOut = poolFail, true
		}
		return st
	case f.CannotStart:
		st.Kind, st.CannotStart = poolFail, true
	case f.FailedInRow >= neverRegisteredLimit:
		st.Kind, st.NeverRegistered = poolFail, true
	case f.SuperviseDue:
		st.Kind = poolSupervise
	}
	return st
}

// serve starts the coordinator and its listener, writes the operator
// credential and the coordinator's URL where commands find them, and
// returns what stops them again.
func (a *applier) serve(ctx context.Context, runtimes []coordinator.TaskRuntime) (stop func(), err error) {
	var pools []coordinator.PoolRuntime
	for _, p := range a.opts.Pools {
		pools = append(pools, p.Runtime)
	}
	coord, err := coordinator.New(coordinator.Options{
		Store: a.opts.Store, ApplyID: a.opts.ApplyID, Pools: pools, Tasks: runtimes, Now: a.opts.Now, Logger: a.opts.Logger,
		OnEvent: a.onCoordinatorEvent, Redact: a.opts.Redact, Faults: a.coordinatorFaults(), Artifacts: a.blobs, MetricsOpen: a.opts.Serve.Loopback(),
		Config: a.opts.Config, FixedPlan: a.opts.SavedPlan, HideFolders: []string{a.opts.WorkDir},
	})
	if err != nil {
		a.ep.Listener.Close()
		return nil, err
	}
	a.coord = coord
	ep := a.ep // opened by Run before anything was recorded
	// The server's own complaints (a TLS handshake a worker with a wrong
	// pin failed) go to the coordinator's log, not raw to stderr.
	srv := &http.Server{Handler: httpapi.New(coord), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(a.opts.logger().Handler(), slog.LevelWarn)}
	go srv.Serve(ep.Listener) //nolint:errcheck // returns on Shutdown
	coordCtx, stopCoord := context.WithCancel(context.Background())
	coordDone := make(chan struct{})
	go func() { defer close(coordDone); coord.Run(coordCtx) }()
	credFile := OperatorCredentialFile(a.opts.WorkDir)
	stop = func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutCtx) //nolint:errcheck // best effort at the end
		stopCoord()
		<-coordDone
		os.Remove(credFile)
		// Every event, the coordinator's and apply's, reaches OnEvent
		// before apply returns (and its caller prints the summary).
		coord.FlushEvents()
	}
	// Commands that change the state while this apply runs go through this
	// coordinator: they find it in the lock row and present the operator
	// credential, readable only by this user.
	if err := writePrivateFile(credFile, []byte(coord.OperatorCredential()+"\n")); err != nil {
		stop()
		return nil, fmt.Errorf("writing the operator credential: %w", err)
	}
	if a.opts.ApplyID != "" {
		if err := a.opts.Store.SetLockCoordinator(ctx, a.opts.ApplyID, ep.URL, ep.CASHA256); err != nil {
			stop()
			return nil, err
		}
	}
	if a.opts.OnServing != nil {
		a.opts.OnServing(ep)
	}
	return stop, nil
}

// run serves the coordinator, then loops — observe, decide, act — until
// every task is finished or something stops the apply, then stops the
// workers and settles the leases left.
func (a *applier) run(ctx context.Context, runtimes []coordinator.TaskRuntime) error {
	a.joined = map[string]int{}
	a.added = map[string]int{}
	for i := range a.opts.Pools {
		a.pools = append(a.pools, &poolRun{cfg: &a.opts.Pools[i]})
	}
	stop, err := a.serve(ctx, runtimes)
	if err != nil {
		return err
	}
	defer stop()
	if a.launcher, err = newLauncher(a); err != nil {
		return err
	}
	defer a.launcher.close() // a provider's watches end with the apply
	now := a.now()
	for _, p := range a.pools {
		if p.cfg.Provider == providers.External && p.cfg.Workers > 0 {
			p.waitingSince = now
			a.emit(coordinator.Event{At: now, Kind: EventAwaitingWorkers, Pool: p.name(), Message: joinHint(p.cfg, a.ep)})
		}
	}
	a.loop(ctx)
	return a.finish()
}

// loop steps until the coordinator is done or the apply is stopped: by an
// interrupt (ctx), an abort, the lock lost, the coordinator failing, or a
// failure of a step (the state or the disk).
func (a *applier) loop(ctx context.Context) {
	tick := time.NewTicker(stepInterval)
	defer tick.Stop()
	for {
		select {
		case <-a.coord.Done():
			return
		case <-ctx.Done():
			a.res.Interrupted = true
			return
		case <-a.opts.Abort:
			a.res.Interrupted = true
			return
		case <-a.opts.LockLost:
			a.res.Interrupted = true
			a.lockLost = true
			return
		case <-a.coord.Failed():
			if errors.Is(a.coord.Err(), state.ErrLockLost) {
				// A guarded write found the lock gone before its renewal
				// did: the same as LockLost.
				a.res.Interrupted = true
				a.lockLost = true
				return
			}
			a.failure = fmt.Errorf("the coordinator failed: %w", a.coord.Err())
			return
		case ex := <-a.launcher.exits:
			a.launcher.matchRegistrations()
			a.launcher.workerExited(ctx, ex)
			a.supervised = time.Time{} // a replacement may be due: decide at the next tick
			continue
		case <-tick.C:
		}
		a.step(ctx)
		if a.failure != nil {
			return
		}
	}
}

// step observes the coordinator and the launches, decides for each pool
// (decidePool) and acts on the decisions, all at one instant of the
// apply's clock.
func (a *applier) step(ctx context.Context) {
	now := a.now()
	a.launcher.matchRegistrations()
	a.launcher.mirrorLiveness(now)
	a.launcher.expireLaunches(ctx, now)
	a.growForAddedTasks()
	superviseDue := now.Sub(a.supervised) >= a.opts.supervisorTick()
	prog := a.coord.Progress()
	for i, p := range a.pools {
		pp := prog.Pools[i]
		st := decidePool(poolFacts{
			External: p.cfg.Provider == providers.External, Failed: p.failed, Planned: p.cfg.Workers,
			Unfinished: pp.Unfinished, Live: pp.Active + pp.Draining,
			WaitingSince: p.waitingSince, FailedInRow: p.failedInRow, CannotStart: p.cannotStart, Now: now, SuperviseDue: superviseDue,
		}, p.cfg.LaunchTimeout)
		p.waitingSince = st.WaitingSince
		var err error
		switch st.Kind {
		case poolSupervise:
			a.supervise(ctx, p)
		case poolFail:
			err = a.failPool(p, a.failReason(p, st))
		}
		if err != nil && a.failure == nil {
			a.failure = err
		}
	}
	if superviseDue {
		a.supervised = now
	}
	if a.opts.SkipWaits != nil && a.failure == nil {
		a.skipWaits(ctx, superviseDue)
	}
}

// failReason says why pool p fails (decidePool said it does).
func (a *applier) failReason(p *poolRun, st poolStep) string {
	name := p.name()
	if st.TimedOut {
		what := "no worker joined"
		if a.joinedCount(name) > 0 {
			what = "no worker was left"
		}
		return fmt.Sprintf("%s within its launch_timeout of %s (join with: wdc join-token create %s, then wdc agent --join-file)",
			what, p.cfg.LaunchTimeout, name)
	}
	if st.CannotStart {
		return "a worker could not start, and no other launch would: " + p.lastExit
	}
	why := fmt.Sprintf("%d workers launched in a row never registered with the coordinator (see the worker logs under %s)",
		neverRegisteredLimit, a.logDir)
	if p.lastExit != "" {
		why = fmt.Sprintf("%d workers launched in a row never registered with the coordinator; the last: %s", neverRegisteredLimit, p.lastExit)
	}
	if p.lastLaunchErr != nil {
		why = fmt.Sprintf("%d launches in a row failed; the last: %v", neverRegisteredLimit, p.lastLaunchErr)
	}
	return why
}

// failPool fails pool p's remaining tasks, saying why.
func (a *applier) failPool(p *poolRun, reason string) error {
	p.failed = true
	a.emit(coordinator.Event{At: a.now(), Kind: EventPoolFailed, Pool: p.name(), Message: reason})
	return a.coord.FailPool(p.name(), reason)
}

// supervise asks the supervisor (supervise.Decide, a pure decision over what it
// observes) what pool p needs, and does it: launch workers, ask the newest
// idle one to drain, or hold.
func (a *applier) supervise(ctx context.Context, p *poolRun) {
	obs, idle := a.observe(p)
	d := supervise.Decide(obs)
	name := p.name()
	switch d.Action {
	case supervise.Launch:
		p.hold = ""
		for range d.Count {
			a.launcher.launch(ctx, p, d.Reason)
		}
	case supervise.Drain:
		p.hold = ""
		for _, wv := range idle { // the newest idle worker first
			ok, err := a.coord.DrainWorker(ctx, wv.ID)
			if err != nil {
				a.opts.logger().Warn("asking a worker to drain", "pool", name, "worker", wv.ID, "err", err)
				continue
			}
			if ok {
				a.emit(coordinator.Event{At: a.now(), Kind: EventDrainRequested, Pool: name, WorkerID: wv.ID, Launch: wv.Seq,
					Message: fmt.Sprintf("%s asked to drain: %s", describeWorker(wv), d.Reason)})
				break
			}
		}
	default:
		if p.hold != d.Reason {
			p.hold = d.Reason
			a.opts.logger().Info("supervisor holds", "pool", name, "reason", d.Reason,
				"queued", obs.Queued, "busy", obs.Busy, "idle", obs.Idle, "pending", obs.Pending, "min", obs.Min, "ceiling", obs.Max, "max", obs.PoolMax)
		}
	}
	a.coord.SetSupervision(name, d, a.now())
	a.coord.RecordDecision(name, d)
}

// observe counts what the supervisor sees of pool p: the coordinator's
// view of its tasks and registered workers, and the launches that have not
// registered yet. It also returns the pool's idle workers the supervisor
// may drain, the newest first: all idle ones when the pool has no work
// left, else those idle for supervise.DefaultIdleDelay.
func (a *applier) observe(p *poolRun) (supervise.Observation, []coordinator.WorkerView) {
	view, _ := a.coord.PoolView(p.name())
	o := supervise.Observation{Queued: view.Queued, Unfinished: view.Unfinished, Capacity: max(p.cfg.Runtime.Capacity, 1),
		Min: min(p.cfg.Min, p.cfg.Workers), Max: p.cfg.Workers, PoolMax: p.cfg.Max, Pending: a.launcher.pending(p)}
	now := a.now()
	var idle []coordinator.WorkerView
	for _, w := range view.Workers {
		switch {
		case w.Status == state.WorkerDraining:
			o.Draining++
		case w.Status != state.WorkerActive:
			// stale or gone: not counted; its leases expire and a
			// replacement is launched if the queue needs one
		case w.Held == 0 && !w.Claiming:
			o.Idle++
			o.FreeSlots += o.Capacity
			if view.Unfinished == 0 || now.Sub(w.IdleSince) >= supervise.DefaultIdleDelay {
				o.Drainable++
				idle = append(idle, w)
			}
		default:
			o.Busy++
			o.FreeSlots += max(o.Capacity-w.Held, 0)
		}
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].Seq > idle[j].Seq })
	return o, idle
}

// finish stops every worker — drained, or killed on abort, a lost lock or
// a failure — and settles what is left: leases still active belong to
// workers that are gone now, handed back without cost after an
// interruption and revoked as lost otherwise. It fills in the result.
func (a *applier) finish() error {
	// Stop: no new leases; drain (or kill, on abort) every worker. An
	// operator's interruption spends no retry budget.
	coord := a.coord
	if a.res.Interrupted && !a.lockLost {
		coord.Interrupt()
	} else {
		coord.Drain()
	}
	if errors.Is(a.failure, state.ErrLockLost) {
		a.res.Interrupted, a.lockLost, a.failure = true, true, nil
	}
	abort := a.lockLost || a.failure != nil // a broken state records nothing: stop at once
	select {
	case <-a.opts.Abort:
		abort = true
	default:
	}
	// The write that finished the last task may still be emitting its
	// events: they come first.
	coord.FlushEvents()
	a.stopWorkers(abort)
	if !abort {
		a.waitExternal()
	}
	counted := func() {
		prog := coord.Progress()
		a.res.Unfinished = prog.Total - prog.Finished
		a.res.Attempts = prog.AttemptsGranted
	}
	switch {
	case a.lockLost:
		// Another apply owns the state now: write nothing more.
		counted()
		return ErrLockLost
	case a.failure != nil:
		// What can still be written: the leases of the workers just
		// killed (a full disk may have room for that; a damaged file not).
		if _, err := coord.RevokeLeases(context.Background(), "apply stopped: "+a.failure.Error()); err != nil {
			a.opts.logger().Warn("revoking leases after a failure", "err", err)
		}
		counted()
		return fmt.Errorf("%w; apply stopped its workers", a.failure)
	}
	if a.res.Interrupted {
		coord.ReleaseLeases(context.Background(), "apply interrupted before the attempt reported")
	}
	if _, err := coord.RevokeLeases(context.Background(), "apply stopped before the attempt reported"); err != nil {
		return err
	}
	a.mu.Lock()
	for _, n := range a.joined {
		a.res.Joined += n
	}
	a.mu.Unlock()
	prog := coord.Progress()
	a.res.Succeeded += prog.Tasks[state.TaskSucceeded]
	a.res.Failed += prog.Tasks[state.TaskFailed]
	a.res.Cancelled += prog.Tasks[state.TaskCancelled]
	counted()
	return nil
}

// growForAddedTasks raises the worker count of pools that tasks joined
// while the apply ran (approved proposals) to what their planned and added
// tasks need, as a plan computes it (WorkersFor).
func (a *applier) growForAddedTasks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for pool, n := range a.added {
		for _, p := range a.pools {
			if p.name() != pool || p.cfg.Provider == providers.External {
				continue
			}
			planned := 0
			for _, pc := range a.opts.Plan.Pools {
				if pc.Name == pool {
					planned = pc.Tasks
				}
			}
			p.cfg.Workers = max(p.cfg.Workers, plan.WorkersFor(planned+n, max(p.cfg.Runtime.Capacity, 1), p.cfg.Min, p.cfg.Max))
		}
	}
}

// joinHint is what apply prints for an external pool: how a worker joins.
func joinHint(p *Pool, ep *httpapi.Endpoint) string {
	cmd := "wdc agent --server " + ep.URL + " --pool " + p.Runtime.Name + " --join-file FILE"
	if ep.CASHA256 != "" {
		cmd += " --ca-sha256 " + ep.CASHA256
	}
	note := ""
	switch {
	case ep.ListensOnLoopback():
		note = " (the coordinator listens on loopback: only this machine can join; set listen in the wdc block for others)"
	case ep.AdvertisesLoopback():
		note = fmt.Sprintf(" (the coordinator listens on %s and advertises %s, which only this machine reaches: for workers elsewhere, set advertise in the wdc block to an address they reach)",
			ep.ListensOn(), ep.URL)
	}
	return fmt.Sprintf("waiting up to %s for workers to join pool %s (up to %d): with a join file from `wdc join-token create %s -o FILE`, run `%s`%s",
		p.LaunchTimeout, p.Runtime.Name, p.Max, p.Runtime.Name, cmd, note)
}

// onCoordinatorEvent keeps what apply needs of the coordinator's events
// (registrations to match to launches, joins, tasks added while it runs)
// and passes every event on; the coordinator's queue of events calls it,
// for its own events and for apply's (emit).
func (a *applier) onCoordinatorEvent(e coordinator.Event) {
	switch e.Kind {
	case coordinator.EventRegistered:
		a.mu.Lock()
		if e.Launch > 0 {
			a.registered = append(a.registered, e)
		} else {
			a.joined[e.Pool]++
		}
		a.mu.Unlock()
	case coordinator.EventTaskAdded:
		a.mu.Lock()
		a.added[e.Pool]++
		a.mu.Unlock()
	}
	a.deliver(e)
}

// describeWorker names a registered worker in messages: "worker 2
// (w-…)", or "worker w-…" for one that joined by itself.
func describeWorker(w coordinator.WorkerView) string {
	if w.Seq > 0 {
		return fmt.Sprintf("worker %d (%s)", w.Seq, w.ID)
	}
	return "worker " + w.ID
}
