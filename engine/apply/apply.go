package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/engine/testclock"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/folder"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// The apply's own event kinds, next to the coordinator's (coordinator.Event*).
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

// neverRegisteredLimit is how many launches in a row of one pool may fail
// to register before apply fails the pool's remaining tasks.
const neverRegisteredLimit = 3

// Pool is one pool as apply launches it.
type Pool struct {
	Runtime      coordinator.PoolRuntime
	Provider     string
	Min, Max     int
	DrainTimeout time.Duration
	// Unconfined: the pool said confine = false (hcl.Pool.Unconfined).
	Unconfined bool
	// LaunchTimeout is how long a launched worker has to register before
	// its credential is revoked and it counts as never registered; for an
	// external pool, how long apply waits for a worker to join while the
	// pool has work and no live worker (default the provider's,
	// providers.LaunchTimeout).
	LaunchTimeout time.Duration
	// Workers is the number the plan launches (PoolChange.Workers).
	Workers int
	// Settings are the pool's settings as its provider decoded them
	// (hcl.Pool.Settings), handed back to the provider with every launch;
	// nil for a pool without any.
	Settings wdchcl.ProviderSettings
}

// Options configure Run.
type Options struct {
	// Store is the state, opened for writing, with the apply lock held.
	Store *state.Store
	// Plan is what to carry out; apply never re-decides from the
	// configuration.
	Plan *plan.Plan
	// Pools and Tasks give the runtime settings of every pool and every
	// task of the plan (see Inputs).
	Pools []Pool
	Tasks map[string]coordinator.TaskRuntime
	// Serve says where and how the coordinator listens (default 127.0.0.1
	// on a free port, plain HTTP; see Listen). CADir defaults to
	// CAFolder(WorkDir).
	Serve httpapi.ListenSettings
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
	// SkipWaits, when set, is the clock Now reads (`wdc test`'s, package
	// testclock): the apply jumps it over the waits that only wait
	// whenever the run is quiescent (see skipWaits). Nil: the wall clock,
	// nothing skipped.
	SkipWaits *testclock.Clock
	// Faults, when set, injects faults into the run (`wdc test`'s fault
	// blocks): into the coordinator's protocol, and into launches.
	Faults Faults
	// OnEvent receives progress: the coordinator's events and apply's own
	// (EventLaunched, EventExited, EventPoolFailed, EventDraining), one
	// call at a time, in the order they happened (once the coordinator
	// runs, from the goroutine that delivers its queue of events); every
	// event has been delivered when Run returns.
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
	OnServing func(*httpapi.Endpoint)
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

func (o Options) supervisorTick() time.Duration {
	if o.SupervisorTick > 0 {
		return o.SupervisorTick
	}
	return supervise.DefaultTick
}

// ArtifactFolder is where the work folder keeps its content-addressed
// blobs (logs, outputs, inputs): the folder "artifacts" of it.
func ArtifactFolder(workDir string) string { return filepath.Join(workDir, "artifacts") }

// OperatorCredentialFile is the file, in the work folder, that holds the
// operator credential of the running apply's coordinator (mode 0600):
// commands that change the state while an apply runs present it.
func OperatorCredentialFile(workDir string) string {
	return filepath.Join(workDir, "operator-credential")
}

// Result summarizes an apply.
type Result struct {
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
	// NoChanges is true when the plan had nothing to do (Operation.Run):
	// nothing was launched.
	NoChanges bool
	// Wall is the apply's wall time.
	Wall time.Duration
}

// OK reports whether every task of the plan succeeded (or there was
// nothing to do; removed tasks cancelled as planned do not count against
// it) and the apply was not interrupted.
func (r *Result) OK() bool {
	return r.Failed == 0 && r.Cancelled == r.Removed && r.Unfinished == 0 && !r.Interrupted
}

// Inputs derives the runtime settings apply needs from the
// configuration a plan was computed from.
func Inputs(cfg *wdchcl.Config, p *plan.Plan) ([]Pool, map[string]coordinator.TaskRuntime) {
	workers := map[string]int{}
	for _, pc := range p.Pools {
		workers[pc.Name] = pc.Workers
	}
	var pools []Pool
	for _, pool := range cfg.Pools {
		ap := Pool{
			Runtime: coordinator.PoolRuntime{Name: pool.Name, Labels: pool.Labels, Capacity: pool.Capacity,
				HeartbeatInterval: pool.Heartbeat.Interval, TTL: pool.Heartbeat.TTL},
			Provider: pool.Provider, Min: pool.Min, Max: pool.Max, DrainTimeout: pool.DrainTimeout, Unconfined: pool.Unconfined,
			LaunchTimeout: pool.LaunchTimeout, Workers: workers[pool.Name], Settings: pool.Settings,
		}
		if pool.Provider == providers.External {
			ap.Runtime.Joinable, ap.Runtime.Max = true, pool.Max
		}
		if info, ok := providers.Describe(pool.Provider); ok && info.Capabilities.ClusterWrites {
			// A pod or a Ray job may run on any node of the cluster.
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
			DepHashes: plan.DependencyHashes(p.Definitions, d.Definition),
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
		if rt, err := coordinator.ProposalRuntime(*tc.Proposal, cfg, p.Key); err == nil {
			tasks[tc.Address] = rt
		}
	}
	return pools, tasks
}

// RecoverState ends what a dead or stopped apply left behind, under the
// apply lock: every active lease is revoked (its attempt lost, its task
// retried as lost or failed when the lost budget is spent) and every worker
// marked gone; a prefetched lease whose start no worker reported goes
// back at no cost instead. It returns how many leases were revoked with
// their attempts lost, and how many went back unstarted.
func RecoverState(ctx context.Context, store *state.Store, reason string, now time.Time) (lost, unstarted int, err error) {
	res, err := store.RevokeAllLeases(ctx, reason, now)
	if err != nil {
		return 0, 0, err
	}
	for _, out := range res.Revoked {
		if out.Unstarted {
			unstarted++
		} else {
			lost++
		}
	}
	return lost, unstarted, nil
}

// Run carries out p under the apply lock (which the caller holds): it
// records the plan's tasks in the state, starts the coordinator on an HTTP
// listener, launches workers through providers, replaces workers it loses
// while their pool still has work, waits until every task is finished,
// drains the workers, and revokes any lease left behind. See Options
// for interruption.
func Run(ctx context.Context, opts Options) (*Result, error) {
	started := time.Now()
	if opts.SkipWaits != nil {
		opts.Now = opts.SkipWaits.Now
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for i := range opts.Pools {
		if opts.Pools[i].LaunchTimeout <= 0 {
			opts.Pools[i].LaunchTimeout = providers.LaunchTimeout(opts.Pools[i].Provider)
		}
	}
	if opts.Serve.CADir == "" {
		opts.Serve.CADir = httpapi.CAFolder(opts.WorkDir)
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the wdc executable for workers: %w", err)
		}
		opts.Executable = exe
	}
	a := &applier{opts: opts, res: &Result{},
		// One folder of worker logs per apply, so applies do not mix.
		logDir: filepath.Join(opts.WorkDir, "workers", started.UTC().Format("20060102T150405.000Z"))}
	a.emitMu = &sync.Mutex{}
	opts.Tasks = nil // the applier's until record, which lets it go
	defer func() { a.res.Wall = time.Since(started) }()
	tightenWorkFolder(opts.WorkDir)

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
	// The coordinator's address is taken before anything is recorded: a
	// listen address in use is refused with the state untouched.
	if a.ep, err = httpapi.Listen(opts.Serve, a.now()); err != nil {
		return a.res, err
	}
	served := false
	defer func() {
		if !served {
			a.ep.Listener.Close()
		}
	}()
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
	served = true // the server closes the listener when it shuts down
	if err := a.run(ctx, runtimes); err != nil {
		return a.res, err
	}
	return a.res, nil
}

// applier is one apply's run: what Run records, the coordinator it
// serves, its pools and its launches. Every decision reads one clock,
// opts.Now (now).
type applier struct {
	opts   Options
	res    *Result
	emitMu *sync.Mutex

	coord    *coordinator.Coordinator
	ep       *httpapi.Endpoint
	logDir   string
	blobs    *artifact.Store
	pools    []*poolRun // in declaration order, as opts.Pools
	launcher *launcher

	lockLost bool
	// failure is what stops the apply early: the state or the disk failed.
	failure error
	// supervised is when the supervisor last took a step.
	supervised time.Time
	// quiet counts the steps in a row that found the apply quiescent
	// (skipWaits); supervisedQuiet, that the supervisor took a step
	// among them.
	quiet           int
	supervisedQuiet bool

	mu         sync.Mutex
	registered []coordinator.Event // registrations of launched workers, not yet matched to their launch
	joined     map[string]int      // pool → workers that joined with a join token
	added      map[string]int      // pool → tasks that joined the apply while it ran (approved proposals)
}

// now is the apply's clock.
func (a *applier) now() time.Time { return a.opts.Now() }

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
		if tc.Action == plan.ActionCancel {
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
	// Every runtime the apply needs is in runtimes now (the coordinator
	// copies them in turn): the map of all of them is left to the garbage
	// collector before the writes, the apply's peak of memory.
	a.opts.Tasks = nil
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
// saved plan: when the plan was made). A file that changed is refused, and
// so is one of the work folder (the state, the CA key, the operator
// credential), whatever path led there: a task may have put a symbolic link
// to it where an input is read.
func (a *applier) storeInputs(ctx context.Context) error {
	work, err := filepath.EvalSymlinks(a.opts.WorkDir)
	if err != nil {
		work = a.opts.WorkDir
	}
	done := map[string]bool{}
	for _, tc := range a.opts.Plan.Tasks {
		rt, ok := a.opts.Tasks[tc.Address]
		if tc.Action == plan.ActionCancel || !ok {
			continue
		}
		for _, f := range rt.Definition.Inputs {
			if done[f.SHA256] {
				continue
			}
			path := filepath.Join(rt.InputRoot, filepath.FromSlash(f.Path))
			file, _, err := regularfile.Open(path) // a FIFO put in its place is refused, not waited on
			if err != nil {
				return fmt.Errorf("input %s of %s: %w", f.Path, tc.Address, err)
			}
			if real := openedPath(file, path); folder.Holds(work, real) {
				file.Close()
				return fmt.Errorf("input %s of %s is %s, a file of the work folder %s (the state's folder), which no task may read: "+
					"a symbolic link on the way leads there; remove it", f.Path, tc.Address, real, a.opts.WorkDir)
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

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// workSubfolders are the folders wdc keeps in the work folder: attempt
// logs and scratch folders, the blob store, worker logs, attempt process
// groups, the agents' spool and the coordinator's CA.
var workSubfolders = []string{"logs", "scratch", "artifacts", "workers", "groups", "spool", "ca"}

// tightenWorkFolder takes the group and other bits off the folders wdc
// keeps in the work folder that exist and are owned by this user: earlier
// versions made them 0755, and what is in them (logs, blobs, scratch
// folders) is the user's alone. New ones are made 0700. The work folder
// itself keeps its mode: it may be a folder the user chose.
func tightenWorkFolder(workDir string) {
	for _, name := range workSubfolders {
		p := filepath.Join(workDir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
			_ = os.Chmod(p, fi.Mode().Perm()&^0o077)
		}
	}
}

// writePrivateFile writes data to path atomically (renameio) with mode
// 0600, creating its folder when missing.
func writePrivateFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, 0o600, renameio.WithStaticPermissions(0o600))
}

// openedPath is the path of the file f, opened as path, as the kernel
// knows it (/proc/self/fd, Linux), else path with its links followed.
func openedPath(f *os.File, path string) string {
	if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil && filepath.IsAbs(real) {
		return real
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}
