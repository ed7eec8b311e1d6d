package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/supervise"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// Apply-level event kinds, next to the coordinator's (coordinator.Event*).
const (
	EventLaunched   = "launched"    // a worker process was launched (Pool, Message: pid and log)
	EventExited     = "exited"      // a launched worker exited (Pool, Message)
	EventPoolFailed = "pool_failed" // a pool's launches kept failing; its remaining tasks failed
	EventDraining   = "draining"    // apply stopped granting and asked workers to drain (the shutdown ladder's first rung)
	// EventStopping: workers still running after their drain timeout are
	// stopped through their provider (the ladder's second rung).
	EventStopping = "stopping"
	// EventKilling: workers still running after that are killed (the
	// ladder's last rung).
	EventKilling = "killing"
	// EventDrainRequested: the supervisor asked an idle worker to drain
	// (Pool, WorkerID, Launch; Message: which worker and the counts why).
	EventDrainRequested = "drain_requested"
	// EventAwaitingWorkers: an external pool waits for workers to join
	// (Pool; Message: the join command and the wait).
	EventAwaitingWorkers = "awaiting_workers"
	// EventLeftBehind: what an ended worker left on its launch target
	// could not be removed (Pool, Launch; Message: the provider's words,
	// e.g. a Ray job still PENDING that a stop does not end).
	EventLeftBehind = "left_behind"
)

// ProviderExternal is the provider of a pool apply launches nothing for:
// its workers join from anywhere with a join token.
const ProviderExternal = "external"

// neverRegisteredLimit is how many launches in a row of one pool may fail
// to register before apply fails the pool's remaining tasks.
const neverRegisteredLimit = 3

// ApplyPool is one pool as apply launches it.
type ApplyPool struct {
	Runtime      coordinator.PoolRuntime
	Provider     string
	Min, Max     int
	DrainTimeout time.Duration
	// LaunchTimeout is how long a launched worker has to register before
	// its credential is revoked and it counts as never registered; for an
	// external pool, how long apply waits for a worker to join while the
	// pool has work and no live worker (default DefaultLaunchTimeout of
	// the provider).
	LaunchTimeout time.Duration
	// Env is extra environment for the pool's workers (a local block's env).
	Env map[string]string
	// Workers is the number the plan launches (PoolChange.Workers).
	Workers int
	// Settings is the pool's provider block (for kubernetes:
	// *hcl.KubernetesPool, for ray: *hcl.RayPool), handed to the provider with every launch; nil
	// for a provider without one.
	Settings any
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
	Tasks map[string]coordinator.TaskRuntime
	// Serve says where and how the coordinator listens (default 127.0.0.1
	// on a free port, plain HTTP; see Listen). CADir defaults to
	// CAFolder(WorkDir).
	Serve ListenSettings
	// ApplyID is the apply's id, the ID of the lock the caller holds:
	// launches and workers are recorded under it, and the coordinator's
	// URL is written into that lock row. Lineage is the state's lineage.
	ApplyID, Lineage string
	// WorkDir is the work folder (the state file's folder): attempt logs,
	// scratch folders and worker logs (workers/<apply start>/<pool>-<n>.log)
	// go there.
	WorkDir string
	// Executable is the wdc binary workers run (default os.Executable()).
	Executable string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnEvent receives progress: the coordinator's events and apply's own
	// (EventLaunched, EventExited, EventPoolFailed, EventDraining), one
	// call at a time, in the order they happened (once the coordinator
	// runs, from the goroutine that delivers its queue of events); every
	// event has been delivered when Apply returns.
	OnEvent func(coordinator.Event)
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
	// stored or shown (see coordinator.Options.Redact); nil keeps them.
	Redact func(string) string
	// OnServing, when set, is called once the coordinator serves, with its
	// endpoint (URL, TLS, pin, warning).
	OnServing func(*Endpoint)
	// MaxArtifactSize caps each log and output a worker uploads, in bytes
	// (default 1 GiB). The blobs go to ArtifactFolder(WorkDir).
	MaxArtifactSize int64
	// SupervisorTick is how often the supervisor takes a step for each
	// pool (default supervise.DefaultTick, 1 s).
	SupervisorTick time.Duration
	// Config is the configuration the plan was made from: its edges judge
	// the recommendations of the results this apply accepts, and proposals
	// approved while it runs join it (coordinator.Options.Config). Nil
	// leaves recommendations to a later apply.
	Config *wdchcl.Config
	// SavedPlan: Plan is a saved plan, carried out exactly; proposals
	// approved while it runs wait for a later apply
	// (coordinator.Options.FixedPlan).
	SavedPlan bool
}

func (o ApplyOptions) supervisorTick() time.Duration {
	if o.SupervisorTick > 0 {
		return o.SupervisorTick
	}
	return supervise.DefaultTick
}

// ArtifactFolder is where the work folder keeps its content-addressed
// blobs (logs, outputs, inputs): the folder "artifacts" of it.
func ArtifactFolder(workDir string) string { return filepath.Join(workDir, "artifacts") }

// DefaultLaunchTimeout returns a provider's default launch_timeout: 60 s
// for local, 10 min for external (waiting for a worker to join), 5 min for
// the others (a pod or a Ray job takes a while to start).
func DefaultLaunchTimeout(provider string) time.Duration {
	switch provider {
	case "local":
		return time.Minute
	case ProviderExternal:
		return 10 * time.Minute
	}
	return 5 * time.Minute
}

// OperatorCredentialFile is the file, in the work folder, that holds the
// operator credential of the running apply's coordinator (mode 0600):
// commands that change the state while an apply runs present it.
func OperatorCredentialFile(workDir string) string {
	return filepath.Join(workDir, "operator-credential")
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
	// Workers is the number of workers launched; Joined the number that
	// joined external pools with a join token.
	Workers, Joined int
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
func ApplyInputs(cfg *wdchcl.Config, p *Plan) ([]ApplyPool, map[string]coordinator.TaskRuntime) {
	workers := map[string]int{}
	for _, pc := range p.Pools {
		workers[pc.Name] = pc.Workers
	}
	var pools []ApplyPool
	for _, pool := range cfg.Pools {
		ap := ApplyPool{
			Runtime: coordinator.PoolRuntime{Name: pool.Name, Labels: pool.Labels, Capacity: pool.Capacity,
				HeartbeatInterval: pool.Heartbeat.Interval, TTL: pool.Heartbeat.TTL},
			Provider: pool.Provider, Min: pool.Min, Max: pool.Max, DrainTimeout: pool.DrainTimeout,
			LaunchTimeout: pool.LaunchTimeout, Workers: workers[pool.Name],
		}
		if pool.Provider == ProviderExternal {
			ap.Runtime.Joinable, ap.Runtime.Max = true, pool.Max
		}
		if pool.Local != nil {
			ap.Env = pool.Local.Env
		}
		if b := pool.ClusterBlock(); b != nil {
			// A pod or a Ray job may run on any node of the cluster.
			ap.Settings = b
			ap.Runtime.SharesNoDisk = true
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
	tasks := make(map[string]coordinator.TaskRuntime, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		d := p.Definitions[t.Address()]
		workDir := t.Dir
		if d.Definition.RunsInAttemptDir() {
			workDir = "" // the attempt's own directory
		}
		tasks[t.Address()] = coordinator.TaskRuntime{
			Address: t.Address(), DefHash: d.Hash, Definition: d.Definition, WorkDir: workDir, DefaultDir: !t.DirSet, InputRoot: cfg.Dir,
			DepHashes: DependencyHashes(p.Definitions, d.Definition),
			Placement: t.Placement, Timeout: t.Timeout, LeaseGrace: t.LeaseGrace,
			Retry: coordinator.RetryPolicy{MaxAttempts: t.Retry.MaxAttempts, MaxLost: t.Retry.MaxLost, Backoff: t.Retry.Backoff, MaxBackoff: t.Retry.MaxBackoff,
				Immediate: t.Retry.Backoff == 0},
			DependsOn: t.DependsOn,
		}
	}
	for _, tc := range p.Tasks {
		if tc.Proposal == nil {
			continue
		}
		// A runtime that does not decode is left out: record refuses the
		// plan, naming the task.
		if rt, err := coordinator.ProposalRuntime(*tc.Proposal, cfg.Dir); err == nil {
			tasks[tc.Address] = rt
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
	for i := range opts.Pools {
		if opts.Pools[i].LaunchTimeout <= 0 {
			opts.Pools[i].LaunchTimeout = DefaultLaunchTimeout(opts.Pools[i].Provider)
		}
	}
	if opts.Serve.CADir == "" {
		opts.Serve.CADir = CAFolder(opts.WorkDir)
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

	maxSize := opts.MaxArtifactSize
	if maxSize <= 0 {
		maxSize = 1 << 30
	}
	blobs, err := artifact.Open(ArtifactFolder(opts.WorkDir), maxSize)
	if err != nil {
		return a.res, err
	}
	if _, err := blobs.CleanTemp(time.Hour); err != nil {
		opts.logger().Warn("removing temporary uploads an earlier apply left", "err", err)
	}
	a.blobs = blobs
	// The inputs go into the store before anything is recorded: a file
	// that changed since the plan was made is refused here, with nothing
	// written.
	if err := a.storeInputs(ctx); err != nil {
		return a.res, err
	}
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

	coord  *coordinator.Coordinator
	url    string
	logDir string
	blobs  *artifact.Store

	lockLost bool

	mu         sync.Mutex
	registered []coordinator.Event // registrations of launched workers, not yet matched to their launch
	joined     map[string]int      // pool → workers that joined with a join token
	added      map[string]int      // pool → tasks that joined the apply while it ran (approved proposals)
	stale      map[string]bool     // worker ids gone silent
}

// joinedCount is the number of workers that joined the pool.
func (a *applier) joinedCount(pool string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.joined[pool]
}

// emit reports one of apply's own events: once the coordinator runs,
// through its queue of events (coordinator.Publish), so that apply's events
// and the coordinator's reach OnEvent in the order they happened.
func (a *applier) emit(e coordinator.Event) {
	if a.coord != nil {
		a.coord.Publish(e)
		return
	}
	a.deliver(e)
}

// deliver passes an event to OnEvent, one call at a time.
func (a *applier) deliver(e coordinator.Event) {
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
func (a *applier) record(ctx context.Context) ([]coordinator.TaskRuntime, error) {
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
	// The plan's removals and its tasks, each kind in one transaction:
	// the record phase costs two commits, not one per task.
	var runtimes []coordinator.TaskRuntime
	var cancels []state.TaskFinish
	var defs []state.TaskDef
	for _, tc := range a.opts.Plan.Tasks {
		if tc.Action == ActionCancel {
			cancels = append(cancels, state.TaskFinish{Address: tc.Address, Status: state.TaskCancelled, Reason: "no longer in the configuration"})
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
		name, index := coordinator.SplitAddress(tc.Address)
		if tc.Proposal != nil {
			name = strings.TrimPrefix(tc.Proposal.Propose, "task.")
		}
		defs = append(defs, state.TaskDef{Address: tc.Address, Name: name, Index: index, DefHash: rt.DefHash,
			Spec: rt.Definition.Canonical(), Status: status, MaxAttempts: rt.Retry.MaxAttempts, MaxLost: rt.Retry.MaxLost})
		runtimes = append(runtimes, rt)
	}
	if len(cancels) > 0 {
		if _, err := st.FinishTasks(ctx, cancels, now()); err != nil {
			return nil, err
		}
		for _, c := range cancels {
			a.res.Cancelled++
			a.res.Removed++
			a.emit(coordinator.Event{At: now(), Kind: coordinator.EventCancelled, Task: c.Address, Message: c.Reason})
		}
	}
	if err := st.UpsertTasks(ctx, defs, now()); err != nil {
		return nil, err
	}
	return runtimes, nil
}

// storeInputs puts the input files of the plan's tasks into the artifact
// store, each checked against the hash its definition recorded (for a
// saved plan: when the plan was made). A file that changed is refused.
func (a *applier) storeInputs(ctx context.Context) error {
	done := map[string]bool{}
	for _, tc := range a.opts.Plan.Tasks {
		rt, ok := a.opts.Tasks[tc.Address]
		if tc.Action == ActionCancel || !ok {
			continue
		}
		for _, f := range rt.Definition.Inputs {
			if done[f.SHA256] {
				continue
			}
			path := filepath.Join(rt.InputRoot, filepath.FromSlash(f.Path))
			file, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("input %s of %s: %w", f.Path, tc.Address, err)
			}
			_, err = a.blobs.Put(ctx, f.SHA256, file)
			file.Close()
			var mm *artifact.MismatchError
			switch {
			case errors.As(err, &mm):
				return fmt.Errorf("input %s of %s changed since the plan was made (its SHA-256 was %s, now %s): make the plan again", f.Path, tc.Address,
					protocolShort(f.SHA256), protocolShort(mm.Got))
			case err != nil:
				return fmt.Errorf("input %s of %s: %w", f.Path, tc.Address, err)
			}
			done[f.SHA256] = true
		}
	}
	return nil
}

func protocolShort(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// launched is one worker apply launched through a provider.
type launched struct {
	pool     *ApplyPool
	seq      int    // launch sequence within the pool
	id       string // provider handle
	pid      int
	log      string
	at       time.Time
	workerID string // set once it registered
	exited   bool
	// mirrored is the last sighting handed to a liveness mirror, at
	// mirroredAt; mirroring is set while a call is under way.
	mirrored, mirroredAt time.Time
	mirroring            atomic.Bool
}

// workerExit is a provider's report that a launched worker ended.
type workerExit struct {
	w    *launched
	resp providers.WaitResponse
	err  error
}

// workerExited handles a provider's report that a worker ended: the
// worker's leases are revoked as lost at once (their tasks queued again
// without backoff), a worker that never registered counts toward failing
// its pool, and the exit is reported. For a worker that ended before it
// registered it returns the message (the pool's failure quotes the last).
func (a *applier) workerExited(ctx context.Context, prov providers.Provider, ex workerExit, failedInRow map[string]int) (neverRegistered string) {
	w := ex.w
	if w.exited {
		return "" // apply stopped it and said so already
	}
	msg := w.describe() + " exited"
	switch {
	case ex.err != nil:
		msg = fmt.Sprintf("%s: its provider could not say how it ended: %v", w.describe(), ex.err)
	case ex.resp.Reason != "":
		msg = w.describe() + " " + ex.resp.Reason
	}
	if w.workerID == "" {
		failedInRow[w.pool.Runtime.Name]++
		msg += " before it registered; see " + w.log
		// Its credential must not register anything now.
		if _, err := a.coord.CloseLaunch(context.WithoutCancel(ctx), w.pool.Runtime.Name, w.seq, true); err != nil {
			a.opts.logger().Warn("closing the launch of a worker that exited", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
		}
	}
	a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventExited, Pool: w.pool.Runtime.Name, WorkerID: w.workerID, Launch: w.seq, Message: msg})
	a.ended(ctx, prov, w, msg)
	if w.workerID == "" {
		return msg
	}
	return ""
}

// describe names the launch in messages: "worker 2 (pid 123)".
func (l *launched) describe() string {
	if l.pid > 0 {
		return fmt.Sprintf("worker %d (pid %d)", l.seq, l.pid)
	}
	return fmt.Sprintf("worker %d (%s)", l.seq, l.id)
}

func (a *applier) run(ctx context.Context, runtimes []coordinator.TaskRuntime) error {
	a.stale = map[string]bool{}
	a.joined = map[string]int{}
	a.added = map[string]int{}
	var pools []coordinator.PoolRuntime
	for _, p := range a.opts.Pools {
		pools = append(pools, p.Runtime)
	}
	coord, err := coordinator.New(coordinator.Options{
		Store: a.opts.Store, ApplyID: a.opts.ApplyID, Pools: pools, Tasks: runtimes, Now: a.opts.Now, Logger: a.opts.Logger,
		OnEvent: a.onCoordinatorEvent, Redact: a.opts.Redact, Artifacts: a.blobs, MetricsOpen: a.opts.Serve.Loopback(),
		Config: a.opts.Config, FixedPlan: a.opts.SavedPlan,
	})
	if err != nil {
		return err
	}
	a.coord = coord
	// Every event, the coordinator's and apply's, reaches OnEvent before
	// apply returns (and its caller prints the summary).
	defer coord.FlushEvents()

	ep, err := Listen(a.opts.Serve, a.opts.Now())
	if err != nil {
		return err
	}
	a.url = ep.URL
	// The server's own complaints (a TLS handshake a worker with a wrong
	// pin failed) go to the coordinator's log, not raw to stderr.
	srv := &http.Server{Handler: httpapi.New(coord), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(a.opts.logger().Handler(), slog.LevelWarn)}
	go srv.Serve(ep.Listener) //nolint:errcheck // returns on Shutdown
	coordCtx, stopCoord := context.WithCancel(context.Background())
	coordDone := make(chan struct{})
	go func() { defer close(coordDone); coord.Run(coordCtx) }()
	credFile := OperatorCredentialFile(a.opts.WorkDir)
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutCtx) //nolint:errcheck // best effort at the end
		stopCoord()
		<-coordDone
		os.Remove(credFile)
	}()
	// Commands that change the state while this apply runs go through this
	// coordinator: they find it in the lock row and present the operator
	// credential, readable only by this user.
	if err := writePrivateFile(credFile, []byte(coord.OperatorCredential()+"\n")); err != nil {
		return fmt.Errorf("writing the operator credential: %w", err)
	}
	if a.opts.ApplyID != "" {
		if err := a.opts.Store.SetLockCoordinator(ctx, a.opts.ApplyID, ep.URL, ep.CASHA256); err != nil {
			return err
		}
	}
	if a.opts.OnServing != nil {
		a.opts.OnServing(ep)
	}

	provs := map[string]providers.Provider{}
	for i := range a.opts.Pools {
		p := &a.opts.Pools[i]
		if _, ok := provs[p.Provider]; ok || p.Provider == ProviderExternal {
			continue
		}
		prov, err := providers.Lookup(p.Provider)
		if err != nil {
			return fmt.Errorf("pool %s: %w", p.Runtime.Name, err)
		}
		provs[p.Provider] = prov
	}
	defer func() { // a provider's watches end with the apply
		for _, prov := range provs {
			if c, ok := prov.(io.Closer); ok {
				c.Close() //nolint:errcheck // nothing left to do about it
			}
		}
	}()

	var workers []*launched
	var failure error // what stops the apply early: the state or the disk failed
	diskFull := func(err error) bool { return errors.Is(err, syscall.ENOSPC) || errors.Is(err, state.ErrDiskFull) }
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	exits := make(chan workerExit, 16)
	failedInRow := map[string]int{}
	lastLaunchErr := map[string]error{} // pool → its last launch that failed to start, cleared by a launch that started
	lastExit := map[string]string{}     // pool → how its last worker that never registered ended
	poolFailed := map[string]bool{}
	seqs := map[string]int{}
	launch := func(p *ApplyPool, why string) {
		seqs[p.Runtime.Name]++
		seq := seqs[p.Runtime.Name]
		name := p.Runtime.Name
		a.res.Workers++
		logPath := filepath.Join(a.logDir, fmt.Sprintf("%s-%d.log", name, seq))
		cred, err := coord.IssueLaunch(ctx, name, seq, p.Provider, p.LaunchTimeout)
		if err != nil && diskFull(err) && failure == nil {
			failure = fmt.Errorf("launching worker %d of pool %s: %w", seq, name, err)
		}
		if err != nil {
			failedInRow[name]++
			lastLaunchErr[name] = err
			a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventExited, Pool: name, Message: fmt.Sprintf("worker %d could not be launched: %v", seq, err)})
			return
		}
		resp, err := provs[p.Provider].Launch(ctx, providers.LaunchRequest{
			Pool: name, Lineage: a.opts.Lineage, ApplyID: coord.ApplyID(), Seq: seq,
			ServerURL: ep.URL, CASHA256: ep.CASHA256, Credential: cred,
			WorkDir: a.opts.WorkDir, LogPath: logPath, Env: p.Env, Executable: a.opts.Executable, DrainTimeout: p.DrainTimeout,
			HeartbeatTTL: cmp.Or(p.Runtime.TTL, coordinator.DefaultTTL), Settings: p.Settings,
		})
		if err != nil && diskFull(err) && failure == nil {
			failure = fmt.Errorf("launching worker %d of pool %s: %w", seq, name, err)
		}
		if err != nil {
			failedInRow[name]++
			if _, cerr := coord.CloseLaunch(context.WithoutCancel(ctx), name, seq, true); cerr != nil {
				a.opts.logger().Warn("closing a failed launch", "pool", name, "seq", seq, "err", cerr)
			}
			lastLaunchErr[name] = err
			a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventExited, Pool: name, Message: fmt.Sprintf("worker %d failed to launch: %v", seq, err)})
			return
		}
		if err := a.opts.Store.SetLaunchProcess(context.WithoutCancel(ctx), coord.ApplyID(), name, seq, state.LaunchProcess{
			Handle: resp.ID, Host: resp.Host, PID: resp.PID, Start: resp.ProcessStart, Argv: resp.Argv, WorkDir: a.opts.WorkDir,
		}); err != nil {
			a.opts.logger().Warn("recording a launch", "pool", name, "seq", seq, "err", err)
		}
		w := &launched{pool: p, seq: seq, id: resp.ID, pid: resp.PID, log: logPath, at: time.Now()}
		workers = append(workers, w)
		delete(lastLaunchErr, name)
		go func() { // the provider's report of the worker's end
			r, err := provs[p.Provider].Wait(waitCtx, providers.WaitRequest{ID: w.id})
			if waitCtx.Err() == nil {
				select {
				case exits <- workerExit{w: w, resp: r, err: err}:
				case <-waitCtx.Done():
				}
			}
		}()
		a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventLaunched, Pool: name, Launch: seq,
			Message: fmt.Sprintf("%s, log %s: %s", w.describe(), logPath, why)})
	}

	external := map[string]time.Time{} // external pool → since when it has had work and no live worker
	for i := range a.opts.Pools {
		p := &a.opts.Pools[i]
		if p.Provider == ProviderExternal {
			if p.Workers > 0 {
				external[p.Runtime.Name] = time.Now()
				a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventAwaitingWorkers, Pool: p.Runtime.Name, Message: joinHint(p, ep)})
			}
			continue
		}
	}

	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var supervised time.Time
	holds := map[string]string{} // pool → the reason of its last hold, logged when it changes
	supervise := func(p *ApplyPool) {
		obs, idle := a.observe(p, workers)
		d := supervise.Decide(obs)
		name := p.Runtime.Name
		switch d.Action {
		case supervise.Launch:
			delete(holds, name)
			for range d.Count {
				launch(p, d.Reason)
			}
		case supervise.Drain:
			delete(holds, name)
			for _, wv := range idle { // the newest idle worker first
				ok, err := coord.DrainWorker(ctx, wv.ID)
				if err != nil {
					a.opts.logger().Warn("asking a worker to drain", "pool", name, "worker", wv.ID, "err", err)
					continue
				}
				if ok {
					a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventDrainRequested, Pool: name, WorkerID: wv.ID, Launch: wv.Seq,
						Message: fmt.Sprintf("%s asked to drain: %s", describeWorker(wv), d.Reason)})
					break
				}
			}
		default:
			if holds[name] != d.Reason {
				holds[name] = d.Reason
				a.opts.logger().Info("supervisor holds", "pool", name, "reason", d.Reason,
					"queued", obs.Queued, "busy", obs.Busy, "idle", obs.Idle, "pending", obs.Pending, "min", obs.Min, "ceiling", obs.Max, "max", obs.PoolMax)
			}
		}
		coord.SetSupervision(name, d, a.opts.Now())
		coord.RecordDecision(name, d)
	}
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
		case <-coord.Failed():
			failure = fmt.Errorf("the coordinator failed: %w", coord.Err())
			break loop
		case ex := <-exits:
			a.matchRegistrations(workers, failedInRow)
			if why := a.workerExited(ctx, provs[ex.w.pool.Provider], ex, failedInRow); why != "" {
				lastExit[ex.w.pool.Runtime.Name] = why // the pool's failure quotes it
			}
			supervised = time.Time{} // a replacement may be due: decide at the next tick
			continue
		case <-tick.C:
		}
		a.matchRegistrations(workers, failedInRow)
		a.mirrorLiveness(workers, provs)
		// Workers that never registered in time.
		for _, w := range workers {
			if w.exited {
				continue
			}
			prov := provs[w.pool.Provider]
			if w.workerID == "" && time.Since(w.at) > w.pool.LaunchTimeout {
				// Revoke the credential first: a worker that starts late
				// cannot join and push the pool past max.
				revoked, err := coord.CloseLaunch(ctx, w.pool.Runtime.Name, w.seq, false)
				if err != nil || !revoked {
					continue // it registered meanwhile; matched at the next tick
				}
				prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // counted below
				failedInRow[w.pool.Runtime.Name]++
				a.ended(ctx, prov, w, "it never registered")
				a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventExited, Pool: w.pool.Runtime.Name, Launch: w.seq,
					Message: fmt.Sprintf("%s did not register within its launch_timeout of %s: its credential is revoked and it was stopped; see %s",
						w.describe(), w.pool.LaunchTimeout, w.log)})
			}
		}
		a.growForAddedTasks()
		// Replace lost workers while the pool still has work; fail pools
		// whose workers never come.
		prog := coord.Progress()
		for i := range a.opts.Pools {
			p := &a.opts.Pools[i]
			name := p.Runtime.Name
			if poolFailed[name] || p.Workers == 0 {
				continue
			}
			fail := func(reason string) error {
				poolFailed[name] = true
				a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventPoolFailed, Pool: name, Message: reason})
				return coord.FailPool(name, reason)
			}
			if p.Provider == ProviderExternal {
				since, waiting := external[name]
				switch live := prog.Pools[i].Active + prog.Pools[i].Draining; {
				case prog.Pools[i].Unfinished == 0 || live > 0:
					delete(external, name)
				case !waiting:
					external[name] = time.Now()
				case time.Since(since) > p.LaunchTimeout:
					what := "no worker joined"
					if a.joinedCount(name) > 0 {
						what = "no worker was left"
					}
					if err := fail(fmt.Sprintf("%s within its launch_timeout of %s (join with: wdc join-token create %s, then wdc agent --join-file)",
						what, p.LaunchTimeout, name)); err != nil {
						return err
					}
				}
				continue
			}
			if failedInRow[name] >= neverRegisteredLimit {
				why := fmt.Sprintf("%d workers launched in a row never registered with the coordinator (see the worker logs under %s)",
					neverRegisteredLimit, a.logDir)
				if last := lastExit[name]; last != "" {
					why = fmt.Sprintf("%d workers launched in a row never registered with the coordinator; the last: %s", neverRegisteredLimit, last)
				}
				if err := lastLaunchErr[name]; err != nil {
					why = fmt.Sprintf("%d launches in a row failed; the last: %v", neverRegisteredLimit, err)
				}
				if err := fail(why); err != nil {
					return err
				}
				continue
			}
			if time.Since(supervised) >= a.opts.supervisorTick() {
				supervise(p)
			}
		}
		if time.Since(supervised) >= a.opts.supervisorTick() {
			supervised = time.Now()
		}
		if failure != nil {
			break loop
		}
	}

	// Stop: no new leases; drain (or kill, on abort) every worker. An
	// operator's interruption spends no retry budget.
	if a.res.Interrupted && !a.lockLost {
		coord.Interrupt()
	} else {
		coord.Drain()
	}
	abort := a.lockLost || failure != nil // a broken state records nothing: stop at once
	select {
	case <-a.opts.Abort:
		abort = true
	default:
	}
	// The write that finished the last task may still be emitting its
	// events: they come first.
	coord.FlushEvents()
	a.stopWorkers(workers, provs, abort)
	if !abort {
		a.waitExternal()
	}

	prog := coord.Progress()
	if a.lockLost {
		// Another apply owns the state now: write nothing more.
		a.res.Unfinished = prog.Total - prog.Finished
		a.res.Attempts = prog.AttemptsGranted
		return errors.New("the state lock was taken over or removed while applying; stopped without writing more to the state")
	}
	if failure != nil {
		// What can still be written: the leases of the workers just
		// killed (a full disk may have room for that; a damaged file not).
		if _, err := coord.RevokeLeases(context.Background(), "apply stopped: "+failure.Error()); err != nil {
			a.opts.logger().Warn("revoking leases after a failure", "err", err)
		}
		prog = coord.Progress()
		a.res.Unfinished = prog.Total - prog.Finished
		a.res.Attempts = prog.AttemptsGranted
		return fmt.Errorf("%w; apply stopped its workers", failure)
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
	a.mu.Lock()
	for _, n := range a.joined {
		a.res.Joined += n
	}
	a.mu.Unlock()
	a.res.Succeeded += prog.Tasks[state.TaskSucceeded]
	a.res.Failed += prog.Tasks[state.TaskFailed]
	a.res.Cancelled += prog.Tasks[state.TaskCancelled]
	a.res.Unfinished = prog.Total - prog.Finished
	a.res.Attempts = prog.AttemptsGranted
	return nil
}

// growForAddedTasks raises the worker count of pools that tasks joined
// while the apply ran (approved proposals) to what their planned and added
// tasks need, as a plan computes it (WorkersFor).
func (a *applier) growForAddedTasks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for pool, n := range a.added {
		for i := range a.opts.Pools {
			p := &a.opts.Pools[i]
			if p.Runtime.Name != pool || p.Provider == ProviderExternal {
				continue
			}
			planned := 0
			for _, pc := range a.opts.Plan.Pools {
				if pc.Name == pool {
					planned = pc.Tasks
				}
			}
			p.Workers = max(p.Workers, WorkersFor(planned+n, max(p.Runtime.Capacity, 1), p.Min, p.Max))
		}
	}
}

// joinHint is what apply prints for an external pool: how a worker joins.
func joinHint(p *ApplyPool, ep *Endpoint) string {
	cmd := "wdc agent --server " + ep.URL + " --pool " + p.Runtime.Name + " --join-file FILE"
	if ep.CASHA256 != "" {
		cmd += " --ca-sha256 " + ep.CASHA256
	}
	note := ""
	if u, err := url.Parse(ep.URL); err == nil && isLoopbackHost(u.Hostname()) {
		note = " (the coordinator listens on loopback: only this machine can join; set listen in the wdc block for others)"
	}
	return fmt.Sprintf("waiting up to %s for workers to join pool %s (up to %d): with a join file from `wdc join-token create %s -o FILE`, run `%s`%s",
		p.LaunchTimeout, p.Runtime.Name, p.Max, p.Runtime.Name, cmd, note)
}

// waitExternal gives workers that joined from elsewhere (which apply
// cannot stop) their drain timeout to learn that they should stop (an
// answer with drain=true) and to post the results of their running
// attempts, until each was told and they hold no lease.
func (a *applier) waitExternal() {
	var deadline time.Time
	for i := range a.opts.Pools {
		p := &a.opts.Pools[i]
		if p.Provider == ProviderExternal && a.joinedCount(p.Runtime.Name) > 0 {
			if d := time.Now().Add(p.DrainTimeout + 5*time.Second); d.After(deadline) {
				deadline = d
			}
		}
	}
	for time.Now().Before(deadline) {
		waiting := 0
		for i, pp := range a.coord.Progress().Pools {
			if a.opts.Pools[i].Provider == ProviderExternal {
				waiting += pp.Leases + pp.Untold
			}
		}
		if waiting == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ended records that a launched worker is gone: the launch is closed in
// the state (no later apply stops it), the provider cleans up what it left
// (so no attempt of it still runs), and its worker is marked gone: its
// session revoked and, while apply runs (why is not ""), its leases
// revoked at once as lost with why as the recorded cause, so their tasks
// run again without waiting out the ttl. When apply stops its workers (why
// is ""), their leases are left for apply's end, which hands them back
// without cost after an interruption.
func (a *applier) ended(ctx context.Context, prov providers.Provider, w *launched, why string) {
	w.exited = true
	ctx = context.WithoutCancel(ctx)
	if err := a.opts.Store.EndLaunches(ctx, a.coord.ApplyID(), w.pool.Runtime.Name, []int{w.seq}, a.opts.Now()); err != nil {
		a.opts.logger().Warn("recording a launch's end", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
	}
	a.cleanup(ctx, prov, w)
	if w.workerID == "" {
		return
	}
	err := a.coord.WorkerGone(ctx, w.workerID)
	if why != "" {
		err = a.coord.WorkerLost(ctx, w.workerID, why)
	}
	if err != nil {
		a.opts.logger().Warn("marking a worker gone", "worker", w.workerID, "err", err)
	}
}

func (o ApplyOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// writePrivateFile writes data to path atomically (renameio) with mode
// 0600, creating its folder when missing.
func writePrivateFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, 0o600, renameio.WithStaticPermissions(0o600))
}

// stopGrace is how long a worker stopped through its provider (the
// ladder's second rung) has before it is killed.
const stopGrace = 5 * time.Second

// drainExitGrace is how long past its pool's drain_timeout a draining
// worker has to post its results and exit before the ladder's second rung.
const drainExitGrace = 5 * time.Second

// stopWorkers takes apply's shutdown ladder (docs/design.md §9), each rung
// announced as it starts. The coordinator has already told every worker to
// drain (Drain or Interrupt: their next answer says drain), so first apply
// waits up to the longest drain_timeout of their pools (plus
// drainExitGrace to post results and exit) for them to end by themselves
// (a second interrupt, Abort, cuts this short: what is left is killed at
// once, and the line says so); then it stops the
// stragglers through their provider (SIGTERM for a process, a pod delete,
// a Ray stop) and gives them stopGrace; then it kills what is left. With
// abort it kills at once. Every worker that ends is recorded (ended); what
// their leases become is decided after (handed back without cost after an
// interruption, revoked otherwise).
func (a *applier) stopWorkers(workers []*launched, provs map[string]providers.Provider, abort bool) {
	ctx := context.Background()
	var live []*launched
	var drainTimeout time.Duration // the longest drain_timeout of their pools
	for _, w := range workers {
		if !w.exited {
			live = append(live, w)
			drainTimeout = max(drainTimeout, w.pool.DrainTimeout)
		}
	}
	drainFor := drainTimeout + drainExitGrace
	aborted := func() bool {
		select {
		case <-a.opts.Abort:
			return true
		default:
			return false
		}
	}
	running := func(w *launched) bool {
		st, err := provs[w.pool.Provider].Status(ctx, providers.StatusRequest{ID: w.id})
		return err == nil && st.Running
	}
	// waitFor polls until every worker of ws has ended or d has passed (a
	// second Ctrl-C cuts it short), and returns those still running.
	waitFor := func(ws []*launched, d time.Duration) []*launched {
		deadline := time.Now().Add(d)
		for {
			var left []*launched
			for _, w := range ws {
				if running(w) {
					left = append(left, w)
				} else if !w.exited {
					a.ended(ctx, provs[w.pool.Provider], w, "")
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				return left
			}
			select {
			case <-a.opts.Abort:
				return left
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	names := func(ws []*launched) string {
		var out []string
		for _, w := range ws {
			out = append(out, w.pool.Runtime.Name+" "+w.describe())
		}
		return strings.Join(out, ", ")
	}
	if !abort {
		msg := "draining workers"
		if len(live) > 0 {
			msg += fmt.Sprintf(": %s asked to drain, waiting up to %s for them to finish and exit (their drain_timeout of %s, plus %s to post results and exit)",
				count(len(live), "worker", "workers"), drainFor, drainTimeout, drainExitGrace)
		}
		a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventDraining, Message: msg})
		live = waitFor(live, drainFor)
		if len(live) > 0 && !aborted() {
			a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventStopping, Message: fmt.Sprintf("%s still running after waiting %s, stopped through the provider (%s); waiting up to %s more",
				count(len(live), "worker", "workers"), drainFor, names(live), stopGrace)})
			for _, w := range live {
				if err := provs[w.pool.Provider].Stop(ctx, providers.StopRequest{ID: w.id}); err != nil {
					a.opts.logger().Warn("stopping a worker", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
				}
			}
			live = waitFor(live, stopGrace)
		}
	} else {
		a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventDraining, Message: "killing workers"})
	}
	if len(live) > 0 {
		switch {
		case abort:
		case aborted(): // a second interrupt cut the wait short
			a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventKilling, Message: fmt.Sprintf("interrupted again: %s still running, killed at once (%s)",
				count(len(live), "worker", "workers"), names(live))})
		default:
			a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventKilling, Message: fmt.Sprintf("%s still running, killed (%s)", count(len(live), "worker", "workers"), names(live))})
		}
		for _, w := range live {
			prov := provs[w.pool.Provider]
			if err := prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}); err != nil {
				a.opts.logger().Warn("killing a worker", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
			}
			a.ended(ctx, prov, w, "")
		}
	}
}

// cleanup asks the provider to remove what an exited worker left running
// (for local workers: its attempts' process groups).
func (a *applier) cleanup(ctx context.Context, prov providers.Provider, w *launched) {
	if err := prov.Cleanup(ctx, providers.CleanupRequest{ID: w.id, WorkDir: a.opts.WorkDir}); err != nil {
		a.opts.logger().Warn("cleaning up after a worker", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
		a.emit(coordinator.Event{At: a.opts.Now(), Kind: EventLeftBehind, Pool: w.pool.Runtime.Name, Launch: w.seq,
			Message: fmt.Sprintf("%s could not be cleaned up after: %v", w.describe(), err)})
	}
}

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
	case coordinator.EventStale:
		a.mu.Lock()
		a.stale[e.WorkerID] = true
		a.mu.Unlock()
	case coordinator.EventTaskAdded:
		a.mu.Lock()
		a.added[e.Pool]++
		a.mu.Unlock()
	}
	a.deliver(e)
}

func (a *applier) isStale(workerID string) bool {
	if workerID == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stale[workerID]
}

// matchRegistrations ties registered workers to their launches, by the
// launch sequence their credential was issued for (never by what a worker
// reports), and resets the pool's count of launches that never registered.
func (a *applier) matchRegistrations(workers []*launched, failedInRow map[string]int) {
	a.mu.Lock()
	regs := a.registered
	a.registered = nil
	a.mu.Unlock()
	for _, e := range regs {
		for _, l := range workers {
			if l.workerID == "" && l.seq == e.Launch && l.pool.Runtime.Name == e.Pool {
				l.workerID = e.WorkerID
				failedInRow[e.Pool] = 0
				break
			}
		}
	}
}

// mirrorLiveness hands each registered worker's last sighting (its
// registration or last heartbeat) to its provider when the provider
// mirrors liveness on its target (providers.LivenessMirror: a Kubernetes
// Lease), at most once per heartbeat interval per worker and one call per
// worker at a time, in the background so a slow API server never holds
// up the loop. A failed call is logged and tried again at the next
// sighting.
func (a *applier) mirrorLiveness(workers []*launched, provs map[string]providers.Provider) {
	for _, w := range workers {
		if w.exited || w.workerID == "" || w.mirroring.Load() ||
			time.Since(w.mirroredAt) < cmp.Or(w.pool.Runtime.HeartbeatInterval, coordinator.DefaultHeartbeatInterval) {
			continue
		}
		m, ok := provs[w.pool.Provider].(providers.LivenessMirror)
		if !ok {
			continue
		}
		last, ok := a.coord.WorkerLastSeen(w.workerID)
		if !ok || !last.After(w.mirrored) {
			continue
		}
		w.mirroring.Store(true)
		w.mirrored, w.mirroredAt = last, time.Now()
		go func(w *launched, id, workerID string, last time.Time) {
			defer w.mirroring.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.MirrorLiveness(ctx, providers.LivenessRequest{ID: id, WorkerID: workerID, Renewed: last}); err != nil {
				a.opts.logger().Debug("mirroring a worker's liveness", "pool", w.pool.Runtime.Name, "seq", w.seq, "err", err)
			}
		}(w, w.id, w.workerID, last)
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

// observe counts what the supervisor sees of pool p: the coordinator's
// view of its tasks and registered workers, and the launches that have not
// registered yet. It also returns the pool's idle workers the supervisor
// may drain, the newest first: all idle ones when the pool has no work
// left, else those idle for supervise.DefaultIdleDelay.
func (a *applier) observe(p *ApplyPool, workers []*launched) (supervise.Observation, []coordinator.WorkerView) {
	view, _ := a.coord.PoolView(p.Runtime.Name)
	o := supervise.Observation{Queued: view.Queued, Unfinished: view.Unfinished, Capacity: max(p.Runtime.Capacity, 1),
		Min: min(p.Min, p.Workers), Max: p.Workers, PoolMax: p.Max}
	for _, w := range workers {
		if w.pool == p && !w.exited && w.workerID == "" {
			o.Pending++
		}
	}
	now := a.opts.Now()
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

// describeWorker names a registered worker in messages: "worker 2
// (w-…)", or "worker w-…" for one that joined by itself.
func describeWorker(w coordinator.WorkerView) string {
	if w.Seq > 0 {
		return fmt.Sprintf("worker %d (%s)", w.Seq, w.ID)
	}
	return "worker " + w.ID
}
