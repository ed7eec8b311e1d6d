package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// Apply-level event kinds, next to the coordinator's Event* kinds.
const (
	EventLaunched   = "launched"    // a worker process was launched (Pool, Message: pid and log)
	EventExited     = "exited"      // a launched worker exited (Pool, Message)
	EventPoolFailed = "pool_failed" // a pool's launches kept failing; its remaining tasks failed
	EventDraining   = "draining"    // apply stopped granting and asked workers to drain
)

// neverRegisteredLimit is how many launches in a row of one pool may fail
// to register before apply fails the pool's remaining tasks.
const neverRegisteredLimit = 3

// ApplyPool is one pool as apply launches it.
type ApplyPool struct {
	Runtime      PoolRuntime
	Provider     string
	Min, Max     int
	DrainTimeout time.Duration
	// Env is extra environment for the pool's workers (a local block's env).
	Env map[string]string
	// Workers is the number the plan launches (PoolChange.Workers).
	Workers int
}

// ApplyOptions configure Apply.
type ApplyOptions struct {
	// Store is the state, opened for writing, with the apply lock held.
	Store *state.Store
	// Plan is what to carry out; apply never re-decides from the
	// configuration.
	Plan *Plan
	// Pools and Tasks give the runtime settings of every pool and every
	// task of the plan (see ApplyInputs).
	Pools []ApplyPool
	Tasks map[string]TaskRuntime
	// Listen is the coordinator's address, "host" or "host:port"
	// (default 127.0.0.1 on a free port).
	Listen string
	// WorkDir is the work folder (the state file's folder): attempt logs,
	// scratch folders and worker logs (workers/<apply start>/<pool>-<n>.log)
	// go there.
	WorkDir string
	// Executable is the wdc binary workers run (default os.Executable()).
	Executable string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnEvent receives progress: the coordinator's events and apply's own
	// (EventLaunched, EventExited, EventPoolFailed, EventDraining). Called
	// from several goroutines, one call at a time.
	OnEvent func(Event)
	// Logger receives the coordinator's structured logs (default discarded).
	Logger *slog.Logger
	// Abort, when closed, stops at once: workers are killed instead of
	// drained (a second Ctrl-C). Cancelling ctx stops cleanly: no new
	// leases, workers drained within their drain_timeout.
	Abort <-chan struct{}
	// LockLost, when closed, means the apply lock was taken over or
	// removed: apply stops at once, kills its workers and writes nothing
	// more to the state (another apply owns it now).
	LockLost <-chan struct{}
	// Redact rewrites error texts that workers report before they are
	// stored or shown (see CoordinatorOptions.Redact); nil keeps them.
	Redact func(string) string
	// RegisterTimeout is how long a launched worker may take to register
	// before it counts as never registered (default 30 s).
	RegisterTimeout time.Duration
}

// ApplyResult summarizes an apply.
type ApplyResult struct {
	// Succeeded, Failed and Cancelled count the plan's tasks by final status
	// (cancellations of removed tasks included); Unfinished counts those
	// an interrupted apply left to the next one.
	Succeeded, Failed, Cancelled, Unfinished int
	// Removed counts the cancellations the plan asked for (tasks no longer
	// in the configuration); they are part of Cancelled but not a failure.
	Removed int
	// Attempts is the number of leases granted.
	Attempts int
	// Workers is the number of workers launched.
	Workers int
	// Interrupted is true when ctx was cancelled or Abort closed.
	Interrupted bool
	// Wall is the apply's wall time.
	Wall time.Duration
}

// OK reports whether every task of the plan succeeded (or there was
// nothing to do; removed tasks cancelled as planned do not count against
// it) and the apply was not interrupted.
func (r *ApplyResult) OK() bool {
	return r.Failed == 0 && r.Cancelled == r.Removed && r.Unfinished == 0 && !r.Interrupted
}

// ApplyInputs derives the runtime settings apply needs from the
// configuration a plan was computed from.
func ApplyInputs(cfg *wdchcl.Config, p *Plan) ([]ApplyPool, map[string]TaskRuntime) {
	workers := map[string]int{}
	for _, pc := range p.Pools {
		workers[pc.Name] = pc.Workers
	}
	var pools []ApplyPool
	for _, pool := range cfg.Pools {
		ap := ApplyPool{
			Runtime: PoolRuntime{Name: pool.Name, Labels: pool.Labels, Capacity: pool.Capacity,
				HeartbeatInterval: pool.Heartbeat.Interval, TTL: pool.Heartbeat.TTL},
			Provider: pool.Provider, Min: pool.Min, Max: pool.Max, DrainTimeout: pool.DrainTimeout,
			Workers: workers[pool.Name],
		}
		if pool.Local != nil {
			ap.Env = pool.Local.Env
		}
		if pool.SensitiveLabels || len(pool.SensitiveLabelKeys) > 0 {
			// The state and its listings never hold a sensitive value.
			ap.Runtime.RecordedLabels = map[string]string{"(sensitive)": "(sensitive)"}
			if !pool.SensitiveLabels {
				ap.Runtime.RecordedLabels = map[string]string{}
				for k, v := range pool.Labels {
					if pool.SensitiveLabelKeys[k] {
						v = "(sensitive)"
					}
					ap.Runtime.RecordedLabels[k] = v
				}
			}
		}
		pools = append(pools, ap)
	}
	tasks := make(map[string]TaskRuntime, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		d := p.Definitions[t.Address()]
		tasks[t.Address()] = TaskRuntime{
			Address: t.Address(), DefHash: d.Hash, Definition: d.Definition, WorkDir: t.Dir,
			Placement: t.Placement, Timeout: t.Timeout, LeaseGrace: t.LeaseGrace,
			Retry: RetryPolicy{MaxAttempts: t.Retry.MaxAttempts, MaxLost: t.Retry.MaxLost, Backoff: t.Retry.Backoff, MaxBackoff: t.Retry.MaxBackoff,
				Immediate: t.Retry.Backoff == 0},
			DependsOn: t.DependsOn,
		}
	}
	return pools, tasks
}

// RecoverState ends what a dead or stopped apply left behind, under the
// apply lock: every active lease is revoked (its attempt lost, its task
// retried as lost or failed when the lost budget is spent) and every worker
// marked gone. It returns the number of leases revoked.
func RecoverState(ctx context.Context, store *state.Store, reason string, now time.Time) (int, error) {
	res, err := store.RevokeAllLeases(ctx, reason, now)
	if err != nil {
		return 0, err
	}
	return len(res.Revoked), nil
}

// Apply carries out p under the apply lock (which the caller holds): it
// records the plan's tasks in the state, starts the coordinator on an HTTP
// listener, launches workers through providers, replaces workers it loses
// while their pool still has work, waits until every task is finished,
// drains the workers, and revokes any lease left behind. See ApplyOptions
// for interruption.
func Apply(ctx context.Context, opts ApplyOptions) (*ApplyResult, error) {
	started := time.Now()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RegisterTimeout <= 0 {
		opts.RegisterTimeout = 30 * time.Second
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the wdc executable for workers: %w", err)
		}
		opts.Executable = exe
	}
	a := &applier{opts: opts, res: &ApplyResult{},
		// One folder of worker logs per apply, so applies do not mix.
		logDir: filepath.Join(opts.WorkDir, "workers", started.UTC().Format("20060102T150405.000Z"))}
	a.emitMu = &sync.Mutex{}
	defer func() { a.res.Wall = time.Since(started) }()

	runtimes, err := a.record(ctx)
	if err != nil {
		return a.res, err
	}
	if len(runtimes) == 0 {
		return a.res, nil
	}
	if err := a.run(ctx, runtimes); err != nil {
		return a.res, err
	}
	return a.res, nil
}

type applier struct {
	opts   ApplyOptions
	res    *ApplyResult
	emitMu *sync.Mutex

	coord  *Coordinator
	url    string
	logDir string

	lockLost bool

	mu         sync.Mutex
	registered []string // worker ids registered, not yet matched to a launch
	stale      map[string]bool
}

func (a *applier) emit(e Event) {
	if a.opts.OnEvent == nil {
		return
	}
	a.emitMu.Lock()
	defer a.emitMu.Unlock()
	a.opts.OnEvent(e)
}

// record writes the plan's pools and tasks into the state: tasks to run,
// replace or retry become queued (pending when they wait on dependencies),
// tasks to cancel are cancelled.
func (a *applier) record(ctx context.Context) ([]TaskRuntime, error) {
	st, now := a.opts.Store, a.opts.Now
	for _, p := range a.opts.Pools {
		labels := p.Runtime.Labels
		if p.Runtime.RecordedLabels != nil {
			labels = p.Runtime.RecordedLabels
		}
		if err := st.UpsertPool(ctx, state.Pool{Name: p.Runtime.Name, Provider: p.Provider, Min: p.Min, Max: p.Max,
			Capacity: p.Runtime.Capacity, Labels: labels}, now()); err != nil {
			return nil, err
		}
	}
	var runtimes []TaskRuntime
	for _, tc := range a.opts.Plan.Tasks {
		if tc.Action == ActionCancel {
			if _, err := st.FinishTasks(ctx, []state.TaskFinish{{Address: tc.Address, Status: state.TaskCancelled,
				Reason: "no longer in the configuration"}}, now()); err != nil {
				return nil, err
			}
			a.res.Cancelled++
			a.res.Removed++
			a.emit(Event{At: now(), Kind: EventCancelled, Task: tc.Address, Message: "no longer in the configuration"})
			continue
		}
		rt, ok := a.opts.Tasks[tc.Address]
		if !ok {
			return nil, fmt.Errorf("apply: the plan names %s, which has no runtime settings", tc.Address)
		}
		status := state.TaskQueued
		if len(rt.DependsOn) > 0 {
			status = state.TaskPending
		}
		name, index := splitAddress(tc.Address)
		if err := st.UpsertTask(ctx, state.TaskDef{Address: tc.Address, Name: name, Index: index, DefHash: rt.DefHash,
			Spec: rt.Definition.Canonical(), Status: status, MaxAttempts: rt.Retry.MaxAttempts, MaxLost: rt.Retry.MaxLost}, now()); err != nil {
			return nil, err
		}
		runtimes = append(runtimes, rt)
	}
	return runtimes, nil
}

// launched is one worker process apply started.
type launched struct {
	pool     *ApplyPool
	id       string // provider handle
	pid      int
	log      string
	at       time.Time
	workerID string // set once it registered
	exited   bool
}

func (a *applier) run(ctx context.Context, runtimes []TaskRuntime) error {
	a.stale = map[string]bool{}
	var pools []PoolRuntime
	for _, p := range a.opts.Pools {
		pools = append(pools, p.Runtime)
	}
	coord, err := NewCoordinator(CoordinatorOptions{
		Store: a.opts.Store, Pools: pools, Tasks: runtimes, Now: a.opts.Now, Logger: a.opts.Logger,
		OnEvent: a.onCoordinatorEvent, Redact: a.opts.Redact,
	})
	if err != nil {
		return err
	}
	a.coord = coord

	ln, err := net.Listen("tcp", listenAddress(a.opts.Listen))
	if err != nil {
		return fmt.Errorf("coordinator listen address %q: %w", a.opts.Listen, err)
	}
	a.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: coord.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // returns on Shutdown
	coordCtx, stopCoord := context.WithCancel(context.Background())
	coordDone := make(chan struct{})
	go func() { defer close(coordDone); coord.Run(coordCtx) }()
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutCtx) //nolint:errcheck // best effort at the end
		stopCoord()
		<-coordDone
	}()

	provs := map[string]providers.Provider{}
	for i := range a.opts.Pools {
		p := &a.opts.Pools[i]
		if _, ok := provs[p.Provider]; ok {
			continue
		}
		prov, err := providers.Lookup(p.Provider)
		if err != nil {
			return fmt.Errorf("pool %s: %w", p.Runtime.Name, err)
		}
		provs[p.Provider] = prov
	}

	var workers []*launched
	failedInRow := map[string]int{}
	poolFailed := map[string]bool{}
	index := map[string]int{}
	launch := func(p *ApplyPool) {
		n := index[p.Runtime.Name]
		index[p.Runtime.Name]++
		logPath := filepath.Join(a.logDir, fmt.Sprintf("%s-%d.log", p.Runtime.Name, n))
		resp, err := provs[p.Provider].Launch(ctx, providers.LaunchRequest{
			Pool: p.Runtime.Name, Index: n, ServerURL: a.url, Token: coord.PoolToken(p.Runtime.Name),
			WorkDir: a.opts.WorkDir, LogPath: logPath, Env: p.Env, Executable: a.opts.Executable, DrainTimeout: p.DrainTimeout,
		})
		a.res.Workers++
		if err != nil {
			failedInRow[p.Runtime.Name]++
			a.emit(Event{At: a.opts.Now(), Kind: EventExited, Pool: p.Runtime.Name, Message: fmt.Sprintf("worker %d failed to launch: %v", n, err)})
			return
		}
		workers = append(workers, &launched{pool: p, id: resp.ID, pid: resp.PID, log: logPath, at: time.Now()})
		a.emit(Event{At: a.opts.Now(), Kind: EventLaunched, Pool: p.Runtime.Name,
			Message: fmt.Sprintf("worker %d (pid %d, log %s)", n, resp.PID, logPath)})
	}

	for i := range a.opts.Pools {
		for n := 0; n < a.opts.Pools[i].Workers; n++ {
			launch(&a.opts.Pools[i])
		}
	}

	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-coord.Done():
			break loop
		case <-ctx.Done():
			a.res.Interrupted = true
			break loop
		case <-a.opts.Abort:
			a.res.Interrupted = true
			break loop
		case <-a.opts.LockLost:
			a.res.Interrupted = true
			a.lockLost = true
			break loop
		case <-tick.C:
		}
		a.matchRegistrations(ctx, workers, failedInRow)
		// Workers that exited, or never registered in time.
		for _, w := range workers {
			if w.exited {
				continue
			}
			st, err := provs[w.pool.Provider].Status(ctx, providers.StatusRequest{ID: w.id})
			if err == nil && !st.Running {
				w.exited = true
				msg := fmt.Sprintf("pid %d exited", w.pid)
				if st.ExitCode != nil {
					msg = fmt.Sprintf("pid %d exited with status %d", w.pid, *st.ExitCode)
				} else if st.Signal != "" {
					msg = fmt.Sprintf("pid %d was killed by %s", w.pid, st.Signal)
				}
				if w.workerID == "" {
					failedInRow[w.pool.Runtime.Name]++
					msg += " before it registered; see " + w.log
				}
				a.cleanup(ctx, provs[w.pool.Provider], w)
				a.emit(Event{At: a.opts.Now(), Kind: EventExited, Pool: w.pool.Runtime.Name, WorkerID: w.workerID, Message: msg})
				continue
			}
			if w.workerID == "" && time.Since(w.at) > a.opts.RegisterTimeout {
				provs[w.pool.Provider].Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // counted below
				w.exited = true
				failedInRow[w.pool.Runtime.Name]++
				a.emit(Event{At: a.opts.Now(), Kind: EventExited, Pool: w.pool.Runtime.Name,
					Message: fmt.Sprintf("pid %d did not register within %s and was stopped; see %s", w.pid, a.opts.RegisterTimeout, w.log)})
			}
		}
		// Replace lost workers while the pool still has work.
		prog := coord.Progress()
		for i := range a.opts.Pools {
			p := &a.opts.Pools[i]
			name := p.Runtime.Name
			if poolFailed[name] || p.Workers == 0 {
				continue
			}
			if failedInRow[name] >= neverRegisteredLimit {
				poolFailed[name] = true
				reason := fmt.Sprintf("%d workers launched in a row never registered with the coordinator (see the worker logs under %s)",
					neverRegisteredLimit, a.logDir)
				a.emit(Event{At: a.opts.Now(), Kind: EventPoolFailed, Pool: name, Message: reason})
				if err := coord.FailPool(name, reason); err != nil {
					return err
				}
				continue
			}
			if prog.Pools[i].Unfinished == 0 {
				continue
			}
			live := 0
			for _, w := range workers {
				if w.pool == p && !w.exited && !a.isStale(w.workerID) {
					live++
				}
			}
			want := min(p.Workers, p.Max)
			for ; live < want; live++ {
				launch(p)
			}
		}
	}

	// Stop: no new leases; drain (or kill, on abort) every worker. An
	// operator's interruption spends no retry budget.
	if a.res.Interrupted && !a.lockLost {
		coord.Interrupt()
	} else {
		coord.Drain()
	}
	abort := a.lockLost
	select {
	case <-a.opts.Abort:
		abort = true
	default:
	}
	// The write that finished the last task may still be emitting its
	// events: they come first.
	coord.FlushEvents()
	a.emit(Event{At: a.opts.Now(), Kind: EventDraining, Message: map[bool]string{true: "killing workers", false: "draining workers"}[abort]})
	a.stopWorkers(workers, provs, abort)

	prog := coord.Progress()
	if a.lockLost {
		// Another apply owns the state now: write nothing more.
		a.res.Unfinished = prog.Total - prog.Finished
		a.res.Attempts = prog.AttemptsGranted
		return errors.New("the state lock was taken over or removed while applying; stopped without writing more to the state")
	}
	// Leases still active belong to workers that are gone now: handed back
	// without cost after an interruption, revoked as lost otherwise.
	if a.res.Interrupted {
		coord.ReleaseLeases(context.Background(), "apply interrupted before the attempt reported")
	}
	if _, err := coord.RevokeLeases(context.Background(), "apply stopped before the attempt reported"); err != nil {
		return err
	}
	prog = coord.Progress()
	a.res.Succeeded += prog.Tasks[state.TaskSucceeded]
	a.res.Failed += prog.Tasks[state.TaskFailed]
	a.res.Cancelled += prog.Tasks[state.TaskCancelled]
	a.res.Unfinished = prog.Total - prog.Finished
	a.res.Attempts = prog.AttemptsGranted
	return nil
}

// stopWorkers drains every live worker within its pool's drain timeout (plus
// a few seconds for the agent to post results and exit), then kills what is
// left; with abort it kills at once.
func (a *applier) stopWorkers(workers []*launched, provs map[string]providers.Provider, abort bool) {
	ctx := context.Background()
	var deadline time.Time
	for _, w := range workers {
		if w.exited {
			continue
		}
		prov := provs[w.pool.Provider]
		if abort {
			prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // best effort
			continue
		}
		prov.Stop(ctx, providers.StopRequest{ID: w.id}) //nolint:errcheck // checked through Status below
		if d := time.Now().Add(w.pool.DrainTimeout + 5*time.Second); d.After(deadline) {
			deadline = d
		}
	}
	for _, w := range workers {
		if w.exited {
			continue
		}
		prov := provs[w.pool.Provider]
		for {
			st, err := prov.Status(ctx, providers.StatusRequest{ID: w.id})
			if err != nil || !st.Running {
				break
			}
			select {
			case <-a.opts.Abort:
				prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // best effort
			default:
			}
			if time.Now().After(deadline) {
				prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // best effort
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		w.exited = true
		a.cleanup(ctx, prov, w)
	}
}

// cleanup asks the provider, when it can, to remove what an exited worker
// left running (for local workers: its attempts' process groups).
func (a *applier) cleanup(ctx context.Context, prov providers.Provider, w *launched) {
	if c, ok := prov.(providers.Cleaner); ok {
		_ = c.Cleanup(ctx, providers.CleanupRequest{ID: w.id, WorkDir: a.opts.WorkDir})
	}
}

func (a *applier) onCoordinatorEvent(e Event) {
	switch e.Kind {
	case EventRegistered:
		a.mu.Lock()
		a.registered = append(a.registered, e.WorkerID)
		a.mu.Unlock()
	case EventStale:
		a.mu.Lock()
		a.stale[e.WorkerID] = true
		a.mu.Unlock()
	}
	a.emit(e)
}

func (a *applier) isStale(workerID string) bool {
	if workerID == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stale[workerID]
}

// matchRegistrations ties registered worker ids to launched processes by
// pid, and resets the pool's count of launches that never registered.
func (a *applier) matchRegistrations(ctx context.Context, workers []*launched, failedInRow map[string]int) {
	a.mu.Lock()
	ids := a.registered
	a.registered = nil
	a.mu.Unlock()
	for _, id := range ids {
		w, err := a.opts.Store.Worker(ctx, id)
		if err != nil {
			continue
		}
		for _, l := range workers {
			if l.workerID == "" && l.pid == w.PID && l.pool.Runtime.Name == w.Pool {
				l.workerID = id
				failedInRow[w.Pool] = 0
				break
			}
		}
	}
}

// listenAddress turns the listen setting into a net.Listen address:
// "" → 127.0.0.1:0 (a free port), "host" → host:0.
func listenAddress(listen string) string {
	if listen == "" {
		return "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return net.JoinHostPort(listen, "0")
	}
	return listen
}

// splitAddress returns the block name and index of "task.NAME" (index -1)
// or "task.NAME[INDEX]".
func splitAddress(addr string) (string, int) {
	s := strings.TrimPrefix(addr, "task.")
	if open := strings.LastIndexByte(s, '['); open > 0 && strings.HasSuffix(s, "]") {
		if k, err := strconv.Atoi(s[open+1 : len(s)-1]); err == nil && k >= 0 {
			return s[:open], k
		}
	}
	return s, -1
}
