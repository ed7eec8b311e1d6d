package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/placement"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Coordinator defaults (docs/design.md §5). A zero field of PoolRuntime,
// TaskRuntime or Options takes these.
const (
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultTTL               = 10 * time.Second
	DefaultTaskTimeout       = time.Hour
	DefaultLeaseGrace        = 2 * time.Minute
	DefaultBackoff           = 5 * time.Second
	DefaultMaxBackoff        = 5 * time.Minute
	DefaultSweepInterval     = 500 * time.Millisecond
	DefaultMaxClaimWait      = 30 * time.Second
)

// PoolRuntime is a pool as the coordinator serves it: workers that register
// with one of the pool's launch or join credentials get its name, labels
// and capacity (docs/design.md §7).
type PoolRuntime struct {
	Name   string
	Labels map[string]string
	// Joinable pools (provider "external") take workers that register with
	// a join token; Max, when > 0, caps their live (active or draining)
	// workers. Launched workers are sized by apply, and a pool that is not
	// joinable refuses join tokens.
	Joinable bool
	Max      int
	// RecordedLabels, when not nil, is what the state records as the
	// workers' labels instead of Labels (apply hides labels computed from a
	// sensitive variable). Placement always matches Labels.
	RecordedLabels map[string]string
	// Capacity is the number of attempts one worker runs at once (0 → 1).
	Capacity int
	// SharesNoDisk is true for pools whose workers do not see apply's
	// folders (pods of the kubernetes provider): a task that sets no dir
	// (TaskRuntime.DefaultDir) runs in its attempt's own directory there.
	SharesNoDisk bool
	// HeartbeatInterval (0 → 2s) and TTL (0 → 10s) are handed to each
	// worker at registration; TTL also bounds how long a heartbeat renews a
	// lease for, and how long a silent worker stays active.
	HeartbeatInterval, TTL time.Duration
}

// RetryPolicy is a task's retry block. The budgets themselves are those
// recorded in the state by the caller's UpsertTask (max_attempts,
// max_lost); a non-zero MaxAttempts or MaxLost here must agree with them.
type RetryPolicy struct {
	MaxAttempts, MaxLost int
	// Backoff (0 → 5s) is the delay before the first retry of a kind,
	// doubling each retry of that kind, capped at MaxBackoff (0 → 5m).
	Backoff, MaxBackoff time.Duration
	// Immediate retries at once (the configuration's backoff = "0s"):
	// Backoff is then 0, not the default.
	Immediate bool
}

// TaskRuntime is one task instance the apply runs.
type TaskRuntime struct {
	Address string // "task.NAME" or "task.NAME[INDEX]"; must exist in the state
	DefHash string // must equal the state's def_hash
	// Definition is sent to the worker in each assignment.
	Definition protocol.Definition
	// WorkDir is the absolute directory the command runs in; "" runs it
	// in the attempt's own directory.
	WorkDir string
	// DefaultDir is true when WorkDir is the configuration directory only
	// because the task sets no dir: a worker of a pool that shares no disk
	// with apply (PoolRuntime.SharesNoDisk) runs it in the attempt's own
	// directory instead.
	DefaultDir bool
	// InputRoot is the configuration directory the definition's input
	// paths are relative to (apply stores them from there).
	InputRoot string
	// DepHashes are the definition hashes of the task's dependencies, by
	// address, sent with each assignment so the agent can check DefHash.
	DepHashes map[string]string
	// Placement: a worker may claim the task only if its pool's labels
	// satisfy it (Satisfies).
	Placement map[string]string
	// Timeout (0 → 1h) and LeaseGrace (0 → 2m) bound a lease:
	// expires_at = min(last renewal + ttl, start + Timeout + LeaseGrace).
	Timeout, LeaseGrace time.Duration
	Retry               RetryPolicy
	// DependsOn lists the addresses this task waits for; they may be tasks
	// of this apply or tasks of the state outside it.
	DependsOn []string
}

// Options configure New. Store, Pools and Tasks are required.
type Options struct {
	Store *state.Store
	// ApplyID is the id of the apply (its lock's ID): launches and workers
	// are recorded under it. Empty means a random one (tests).
	ApplyID string
	// Pools whose workers may connect. Their rows must exist in the state
	// (state.UpsertPool) before workers register.
	Pools []PoolRuntime
	// Tasks this apply runs, already upserted by the caller with status
	// queued or pending (pending: waiting on dependencies).
	Tasks []TaskRuntime
	// Now is the clock of every decision (default time.Now); tests control
	// time with it. Long-poll waits use real time.
	Now func() time.Time
	// SweepInterval is Run's ticker period (default 500ms).
	SweepInterval time.Duration
	// MaxClaimWait caps a claim's long poll, and a log follow's (default
	// 30s).
	MaxClaimWait time.Duration
	// OnEvent receives progress events, in order, one call at a time, from
	// the goroutine that delivers the coordinator's queue of events
	// (events.go). It must not call the coordinator's methods other than
	// Progress, Finished, Done, StopGranting and Drain; while it is slow,
	// the queue fills and writes wait for it.
	OnEvent func(Event)
	// EventQueue is how many events may wait for OnEvent before writes
	// wait for it (default DefaultEventQueue).
	EventQueue int
	// Logger receives structured logs (default: discarded).
	Logger *slog.Logger
	// Redact, when set, rewrites the error text of posted results before
	// the state stores it or an event shows it (apply hides the values of
	// sensitive variables, which a refused command or dir may quote).
	Redact func(string) string
	// Faults, when set, injects faults into the protocol (`wdc test`'s
	// fault blocks): nil injects none.
	Faults FaultInjector
	// Artifacts is the work folder's blob store, which holds the logs and
	// outputs results bind. Without it, a result that names artifacts
	// waits for them forever (answered missing_artifacts).
	Artifacts *artifact.Store
	// MetricsOpen: the coordinator's metrics are served without a
	// credential (package httpapi, GET /metrics): apply sets it when the
	// coordinator listens on a loopback address. Otherwise a scrape needs
	// the operator credential, as the operator routes do.
	MetricsOpen bool
	// Config is the configuration of the apply: its edge blocks judge the
	// recommendations of accepted results (JudgeRecommendations), and
	// proposals approved while the apply runs join it. Nil leaves
	// recommendations to a later apply's coordinator.
	Config *wdchcl.Config
	// FixedPlan: the apply carries out a saved plan, exactly what it
	// recorded: proposals approved while it runs (by an operator or by
	// their edge) join no task to it; a later apply runs them.
	FixedPlan bool
	// HideFolders are sent to every worker that registers
	// (protocol.RegisterResponse.HideFolders): apply gives its work
	// folder.
	HideFolders []string
}

// Progress is a snapshot of the coordinator's view of the apply.
type Progress struct {
	// Tasks counts the apply's tasks by status.
	Tasks map[state.TaskStatus]int
	// Total is the number of tasks of the apply; Finished of them are final.
	Total, Finished int
	// AttemptsGranted counts the leases this coordinator granted, less
	// the prefetched ones that ended before their attempts started: the
	// attempts that ran or run.
	AttemptsGranted int
	// Pools, in the order of Options.Pools.
	Pools []PoolProgress
}

// PoolProgress is one pool's part of Progress.
type PoolProgress struct {
	Name string
	// Unfinished counts the apply's unfinished tasks this pool can run.
	Unfinished int
	// Workers by status, among the workers registered with this coordinator.
	Active, Draining, Stale, Gone int
	// Leases counts the active leases its workers hold.
	Leases int
	// Untold counts its live (active or draining) workers that have not
	// yet been answered drain=true since Drain: apply waits for them at
	// the end, so a worker that joined by itself learns to stop.
	Untold int
	// Failed is true after FailPool.
	Failed bool
}

// Coordinator is the only writer of lease state while an apply runs: it
// serves worker protocol v1, grants fenced leases, accepts results, sweeps
// expired leases and silent workers, and retries. Create it with New;
// its methods are safe for concurrent use. Package httpapi serves it.
type Coordinator struct {
	store         *state.Store
	now           func() time.Time
	log           *slog.Logger
	events        *eventQueue
	redact        func(string) string
	faults        FaultInjector
	artifacts     *artifact.Store
	sweepInterval time.Duration
	maxClaimWait  time.Duration
	metrics       *metrics
	metricsOpen   bool
	hideFolders   []string // Options.HideFolders

	applyID      string
	hashKey      []byte // the state's: sensitive values must give their keyed hashes under it
	pools        []*poolState
	poolByNam    map[string]*poolState
	operator     string   // the operator credential
	operatorHash [32]byte // its SHA-256

	// Memory follows the state's order of writes. The hot path (claims,
	// results, heartbeats, sweeps) writes through the state's group commit
	// and updates memory in its after functions, which run in commit
	// order; it holds wmu for reading. Every other write holds wmu for
	// writing, so its write and the memory update after it happen with no
	// hot-path write in between.
	wmu sync.RWMutex

	mu          sync.Mutex               // guards the fields below
	creds       map[[32]byte]*Credential // launch, join and session credentials by the SHA-256 of their secret
	launches    map[launchKey]*Credential
	tasks       map[string]*taskState
	order       []*taskState
	external    map[string]state.TaskStatus // dependencies outside the apply
	workers     map[string]*workerState
	leases      map[int64]*leaseState  // active leases known to the coordinator
	live        map[int64]*liveLog     // output of followed attempts, by lease token (logs.go)
	supervised  map[string]supervision // pool → apply's last supervisor step (SetSupervision)
	delayed     map[*taskState]struct{}
	wake        chan struct{} // closed and replaced to wake waiting claims
	stopped     bool          // StopGranting
	draining    bool          // Drain
	interrupted bool          // Interrupt
	unfinished  int
	granted     int
	// hookTakeOverWrite, when set (tests only), runs in takeOverUnstarted's
	// write before it reads the lease it takes over.
	hookTakeOverWrite func()
	// hookAnswer, when set (tests only), runs when the leases a write
	// granted are about to be answered (assignments), before it checks
	// that the request is still there.
	hookAnswer func()
	done       chan struct{}

	// Chaining (chaining.go): judging counts accepted results
	// whose recommendations are not judged yet; Done waits for them.
	cfg        *wdchcl.Config
	judgeWake  chan struct{}
	judging    int
	doneClosed bool
	fixedPlan  bool

	failOnce sync.Once
	failed   chan struct{} // closed by Fail
	failErr  error
}

type poolState struct {
	rt      PoolRuntime
	queue   []int // positions of queued tasks this pool can run, ascending
	failed  bool
	metrics *poolMetrics
}

type taskState struct {
	rt        TaskRuntime
	pos       int
	status    state.TaskStatus
	notBefore time.Time // of the open retry directive; zero when none
	pools     []*poolState
	claiming  bool // a grant is in flight
	policy    state.TaskPolicy
	// attempts is the state's count of the task's attempts as memory last
	// saw it (its load, its last grant, a refresh), which a claim expects
	// (state.GrantRequest.Expected); a stale one only costs the claim a
	// read. Atomic: the claim's write reads it without c.mu.
	attempts atomic.Int64
}

type workerState struct {
	id     string
	pool   *poolState
	status state.WorkerStatus
	held   int
	// labels are the worker's own: the pool's, or fewer for a worker that
	// joined with a narrowing join token (narrowed); placement is checked
	// against them for a narrowed worker.
	labels   map[string]string
	narrowed bool
	joinID   string // the join token it joined with, or ""
	// drainRequested: the worker was asked to drain on its own (its join
	// token was revoked, or its slot was taken while it was stale); it
	// stays draining even after it comes back from stale.
	drainRequested bool
	toldDrain      bool // an answer with drain=true reached it
	// picking counts claims of this worker between picking tasks and
	// granting them; pending counts the tasks they picked (each takes a
	// slot until its write is settled); idleSince is when it last held
	// no lease.
	picking int
	pending int
	// unstarted counts its prefetched leases whose start it has not
	// reported (among held); pendingPrefetch counts the picks of pending
	// that are granted unstarted. At most one of its leases is unstarted
	// or pending so (maxUnstarted).
	unstarted       int
	pendingPrefetch int
	idleSince       time.Time
	lastSeen        time.Time // its registration or its last heartbeat
	seq             int       // its launch sequence, or 0
	pid             int       // the process id it registered with
	session         [32]byte  // SHA-256 of its session token
	// expected are the blobs this worker may upload, by the lease token
	// of its result that was answered missing them (several of its results
	// upload at once when its capacity is above 1; one decided clears only
	// its own). readable are those it may download: the inputs of
	// assignments it was granted.
	expected map[int64]map[string]bool
	readable map[string]bool
	// lateKept maps the tokens of its leases whose late result's rejection
	// the state recorded to that result's key; foreign thins out the
	// records of its results for leases not its own (keepRejection).
	lateKept map[int64]string
	foreign  refusalLog
}

type leaseState struct {
	task    string
	worker  string
	attempt int
	// ending: a result of it that asked for next leases is being
	// written; that result counted this lease's slot as free, and no
	// other may (pickNext).
	ending bool
	// unstarted: a prefetched lease whose start its worker has not
	// reported (docs/design.md §3, prefetched leases).
	unstarted bool
	// grantedAt is when it was granted (takeOverAfter counts from it).
	grantedAt time.Time
}

// maxUnstarted is how many prefetched leases a worker may hold unstarted.
const maxUnstarted = 1

// startedFree is the number of w's slots free for started leases: its
// capacity less its started leases and its picks being granted started.
func (w *workerState) startedFree() int {
	return w.pool.rt.Capacity - (w.held - w.unstarted) - (w.pending - w.pendingPrefetch)
}

// prefetchFree is the number of leases w may still be granted unstarted.
func (w *workerState) prefetchFree() int {
	return maxUnstarted - w.unstarted - w.pendingPrefetch
}

// New checks opts, makes the operator credential (crypto/rand,
// 256 bits), loads the join tokens of its pools and the apply's tasks from
// the state. At
// start it queues pending tasks whose dependencies have all succeeded and
// cancels pending or queued tasks whose dependencies can no longer succeed
// (failed or cancelled, or outside the apply and not succeeded).
//
// Errors: missing Store, no pools, duplicate pool names or task addresses,
// a task that is not in the state or has another def_hash or budgets, a
// task no pool can run, negative durations; state errors.
func New(opts Options) (*Coordinator, error) {
	if opts.Store == nil {
		return nil, errors.New("coordinator: a state store is required")
	}
	if len(opts.Pools) == 0 {
		return nil, errors.New("coordinator: at least one pool is required")
	}
	c := &Coordinator{
		store:         opts.Store,
		now:           opts.Now,
		log:           opts.Logger,
		redact:        opts.Redact,
		faults:        opts.Faults,
		artifacts:     opts.Artifacts,
		sweepInterval: opts.SweepInterval,
		maxClaimWait:  opts.MaxClaimWait,
		metricsOpen:   opts.MetricsOpen,
		cfg:           opts.Config,
		fixedPlan:     opts.FixedPlan,
		hideFolders:   append([]string(nil), opts.HideFolders...),
		judgeWake:     make(chan struct{}, 1),
		applyID:       opts.ApplyID,
		poolByNam:     map[string]*poolState{},
		creds:         map[[32]byte]*Credential{},
		launches:      map[launchKey]*Credential{},
		tasks:         map[string]*taskState{},
		external:      map[string]state.TaskStatus{},
		workers:       map[string]*workerState{},
		leases:        map[int64]*leaseState{},
		live:          map[int64]*liveLog{},
		delayed:       map[*taskState]struct{}{},
		wake:          make(chan struct{}),
		done:          make(chan struct{}),
		failed:        make(chan struct{}),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.events = newEventQueue(opts.EventQueue, c.log, opts.OnEvent)
	if c.sweepInterval <= 0 {
		c.sweepInterval = DefaultSweepInterval
	}
	if c.maxClaimWait <= 0 {
		c.maxClaimWait = DefaultMaxClaimWait
	}
	if c.applyID == "" {
		c.applyID = "apply-" + newSecret("")[:16]
	}
	c.operator = newSecret(protocol.OperatorCredentialPrefix)
	c.operatorHash = secretHash(c.operator)
	metrics, err := newMetrics(c)
	if err != nil {
		return nil, fmt.Errorf("coordinator: metrics: %w", err)
	}
	c.metrics = metrics
	for _, p := range opts.Pools {
		switch {
		case p.Name == "":
			return nil, errors.New("coordinator: a pool has no name")
		case c.poolByNam[p.Name] != nil:
			return nil, fmt.Errorf("coordinator: pool %q is given twice", p.Name)
		case p.Capacity < 0 || p.HeartbeatInterval < 0 || p.TTL < 0:
			return nil, fmt.Errorf("coordinator: pool %q: capacity, heartbeat interval and ttl must not be negative", p.Name)
		}
		p.Labels = maps(p.Labels)
		if p.Capacity == 0 {
			p.Capacity = 1
		}
		if p.HeartbeatInterval == 0 {
			p.HeartbeatInterval = DefaultHeartbeatInterval
		}
		if p.TTL == 0 {
			p.TTL = DefaultTTL
		}
		ps := &poolState{rt: p, metrics: c.metrics.forPool(p.Name)}
		c.pools = append(c.pools, ps)
		c.poolByNam[p.Name] = ps
	}
	for i, rt := range opts.Tasks {
		switch {
		case rt.Address == "":
			return nil, fmt.Errorf("coordinator: task %d has no address", i)
		case c.tasks[rt.Address] != nil:
			return nil, fmt.Errorf("coordinator: task %s is given twice", rt.Address)
		case rt.Timeout < 0 || rt.LeaseGrace < 0 || rt.Retry.Backoff < 0 || rt.Retry.MaxBackoff < 0:
			return nil, fmt.Errorf("coordinator: task %s: durations must not be negative", rt.Address)
		}
		rt = normalizeRuntime(rt)
		ts := &taskState{rt: rt, pos: i, pools: c.poolsFor(rt.Placement)}
		if len(ts.pools) == 0 {
			return nil, fmt.Errorf("coordinator: task %s: no pool's labels satisfy its placement %v", rt.Address, rt.Placement)
		}
		c.tasks[rt.Address] = ts
		c.order = append(c.order, ts)
	}
	c.buildPolicies()
	if err := c.loadJoinTokens(context.Background()); err != nil {
		return nil, err
	}
	if err := c.load(context.Background()); err != nil {
		return nil, err
	}
	if c.artifacts != nil {
		// The empty blob is held from the start, so that an empty output
		// costs no upload (if it cannot be written, the first result that
		// names one uploads it). A result's empty logs need it in no case:
		// they are recorded as attempts.empty_logs bits, not as blobs, are
		// never asked of the store (state.Tx.AcceptResult), and are read
		// as empty without it (wdc logs, the stderr tail).
		if _, ok, err := c.artifacts.Stat(artifact.EmptyHash); err == nil && !ok {
			if _, err := c.artifacts.Put(context.Background(), artifact.EmptyHash, strings.NewReader("")); err != nil {
				c.log.Warn("storing the empty blob", "err", err)
			}
		}
	}
	return c, nil
}

// checkSensitive refuses a task whose definition does not carry the
// values of its sensitive parts — the state keeps only their keyed
// hashes, and the coordinator hands the values to workers from memory —
// or carries others than its definition hash covers.
func (c *Coordinator) checkSensitive(rt TaskRuntime) error {
	missing := rt.Definition.MissingSensitive(c.hashKey)
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("coordinator: task %s: this apply does not have the values of its sensitive %s, which the state keeps only as keyed hashes: "+
		"plan again, with the variables that give them", rt.Address, rt.Definition.DescribeParts(missing))
}

// normalizeRuntime gives a task's zero settings their defaults.
func normalizeRuntime(rt TaskRuntime) TaskRuntime {
	// Assignments carry [] and {} rather than null, as the canonical
	// form does.
	if rt.Definition.DependsOn == nil {
		rt.Definition.DependsOn = []string{}
	}
	if rt.Definition.Env == nil {
		rt.Definition.Env = map[string]string{}
	}
	if rt.Timeout == 0 {
		rt.Timeout = DefaultTaskTimeout
	}
	if rt.LeaseGrace == 0 {
		rt.LeaseGrace = DefaultLeaseGrace
	}
	if rt.Retry.Backoff == 0 && !rt.Retry.Immediate {
		rt.Retry.Backoff = DefaultBackoff
	}
	if rt.Retry.MaxBackoff == 0 {
		rt.Retry.MaxBackoff = max(DefaultMaxBackoff, rt.Retry.Backoff)
	}
	return rt
}

// poolsFor returns the pools, in order, whose labels satisfy the
// placement want (c.pools does not change once New made it).
func (c *Coordinator) poolsFor(want map[string]string) []*poolState {
	var out []*poolState
	for _, p := range c.pools {
		if placement.Satisfies(p.rt.Labels, want) {
			out = append(out, p)
		}
	}
	return out
}

func maps(m map[string]string) map[string]string {
	if len(m) == 0 {
		return map[string]string{}
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// buildPolicies computes each task's direct dependents and transitive
// downstream among the apply's tasks.
func (c *Coordinator) buildPolicies() {
	direct := map[string][]string{}
	for _, ts := range c.order {
		for _, d := range ts.rt.DependsOn {
			if c.tasks[d] != nil && !slices.Contains(direct[d], ts.rt.Address) {
				direct[d] = append(direct[d], ts.rt.Address)
			}
		}
	}
	for _, ts := range c.order {
		pol := state.TaskPolicy{Backoff: ts.rt.Retry.Backoff, MaxBackoff: ts.rt.Retry.MaxBackoff}
		for _, d := range direct[ts.rt.Address] {
			pol.Dependents = append(pol.Dependents, state.Dependent{Address: d, DependsOn: c.tasks[d].rt.DependsOn})
		}
		seen := map[string]bool{}
		var walk func(a string)
		walk = func(a string) {
			for _, d := range direct[a] {
				if !seen[d] {
					seen[d] = true
					pol.Downstream = append(pol.Downstream, d)
					walk(d)
				}
			}
		}
		walk(ts.rt.Address)
		sort.Slice(pol.Downstream, func(i, j int) bool { return c.tasks[pol.Downstream[i]].pos < c.tasks[pol.Downstream[j]].pos })
		ts.policy = pol
	}
}

// policy is the state.PolicyFunc of the apply: tasks outside it retry with
// the default backoff and have no dependents.
func (c *Coordinator) policy(task string) state.TaskPolicy {
	if ts := c.tasks[task]; ts != nil {
		return ts.policy
	}
	return state.TaskPolicy{Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff}
}

// load reads the apply's tasks, their open retry directives and the active
// leases, then queues or cancels tasks by their dependencies.
func (c *Coordinator) load(ctx context.Context) error {
	if err := c.loadTasks(ctx); err != nil {
		return err
	}
	open, err := c.store.OpenRetryDirectives(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	active, err := c.store.ActiveLeases(ctx, "")
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	for _, l := range active {
		c.leases[l.Token] = &leaseState{task: l.Task, worker: l.WorkerID, attempt: l.Attempt, unstarted: l.Unstarted, grantedAt: l.GrantedAt}
	}
	now := c.now()
	for _, ts := range c.order {
		if d, ok := open[ts.rt.Address]; ok && ts.status == state.TaskQueued && d.NotBefore.After(now) {
			ts.notBefore = d.NotBefore
			c.delayed[ts] = struct{}{}
		}
		if !ts.status.Finished() {
			c.unfinished++
		}
		if ts.status == state.TaskQueued {
			c.enqueue(ts)
		}
	}
	if err := c.settleDependencies(ctx, now); err != nil {
		return err
	}
	c.checkDoneLocked()
	return nil
}

// loadTasks reads the status of each task of the apply, checking its
// def_hash and budgets against the state's and that it carries its
// sensitive values (checkSensitive, with the state's hash key), and the
// status of every dependency outside the apply ("" for one the state does
// not have).
func (c *Coordinator) loadTasks(ctx context.Context) error {
	key, err := c.store.HashKey(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.hashKey = key
	for _, ts := range c.order {
		if err := c.checkSensitive(ts.rt); err != nil {
			return err
		}
		t, err := c.store.Task(ctx, ts.rt.Address)
		if err != nil {
			return fmt.Errorf("coordinator: task %s: %w", ts.rt.Address, err)
		}
		if ts.rt.DefHash != "" && t.DefHash != ts.rt.DefHash {
			return fmt.Errorf("coordinator: task %s has def_hash %s in the state, not %s: upsert it first", ts.rt.Address, t.DefHash, ts.rt.DefHash)
		}
		if ts.rt.DefHash == "" {
			ts.rt.DefHash = t.DefHash
		}
		if (ts.rt.Retry.MaxAttempts != 0 && ts.rt.Retry.MaxAttempts != t.MaxAttempts) ||
			(ts.rt.Retry.MaxLost != 0 && ts.rt.Retry.MaxLost != t.MaxLost) {
			return fmt.Errorf("coordinator: task %s: retry budgets %d/%d differ from the state's %d/%d: upsert it first",
				ts.rt.Address, ts.rt.Retry.MaxAttempts, ts.rt.Retry.MaxLost, t.MaxAttempts, t.MaxLost)
		}
		ts.status = t.Status
		ts.attempts.Store(int64(t.Attempts))
		for _, d := range ts.rt.DependsOn {
			if c.tasks[d] != nil {
				continue
			}
			if _, ok := c.external[d]; ok {
				continue
			}
			dt, err := c.store.Task(ctx, d)
			switch {
			case errors.Is(err, state.ErrNotFound):
				c.external[d] = ""
			case err != nil:
				return fmt.Errorf("coordinator: dependency %s of %s: %w", d, ts.rt.Address, err)
			default:
				c.external[d] = dt.Status
			}
		}
	}
	return nil
}

// settleDependencies cancels the pending or queued tasks whose
// dependencies can no longer succeed (failed or cancelled, or outside the
// apply and not succeeded), and queues the pending tasks whose
// dependencies all succeeded, in the state and then in memory.
func (c *Coordinator) settleDependencies(ctx context.Context, now time.Time) error {
	cancel, doomed := c.doomedTasks()
	var ready []state.Dependent
	for _, ts := range c.order {
		if ts.status == state.TaskPending && !doomed[ts.rt.Address] && c.depsSucceeded(ts) {
			ready = append(ready, state.Dependent{Address: ts.rt.Address, DependsOn: ts.rt.DependsOn})
		}
	}
	if len(cancel) > 0 {
		got, err := c.store.FinishTasks(ctx, cancel, now)
		if err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
		for _, f := range cancel {
			if slices.Contains(got, f.Address) {
				c.setStatus(c.tasks[f.Address], state.TaskCancelled)
				c.log.Info("task cancelled at start", "task", f.Address, "reason", f.Reason)
			}
		}
	}
	if len(ready) > 0 {
		got, err := c.store.PromoteReady(ctx, ready, now)
		if err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
		for _, a := range got {
			c.setStatus(c.tasks[a], state.TaskQueued)
		}
	}
	return nil
}

// doomedTasks returns the cancellations of the pending or queued tasks
// that can never run, each with why, and the set of their addresses.
func (c *Coordinator) doomedTasks() ([]state.TaskFinish, map[string]bool) {
	var cancel []state.TaskFinish
	doomed := map[string]bool{}
	// c.order is not necessarily topological: iterate to a fixpoint.
	for changed := true; changed; {
		changed = false
		for _, ts := range c.order {
			if doomed[ts.rt.Address] || (ts.status != state.TaskPending && ts.status != state.TaskQueued) {
				continue
			}
			if why := c.doomedBy(ts, doomed); why != "" {
				doomed[ts.rt.Address] = true
				cancel = append(cancel, state.TaskFinish{Address: ts.rt.Address, Status: state.TaskCancelled, Reason: why})
				changed = true
			}
		}
	}
	return cancel, doomed
}

// doomedBy says why a dependency of ts keeps it from ever running, or "".
func (c *Coordinator) doomedBy(ts *taskState, doomed map[string]bool) string {
	for _, d := range ts.rt.DependsOn {
		if dt := c.tasks[d]; dt != nil {
			switch {
			case doomed[d]:
				return "dependency " + d + " failed"
			case dt.status == state.TaskFailed || dt.status == state.TaskCancelled:
				return "dependency " + d + " is " + string(dt.status)
			}
		} else if st := c.external[d]; st != state.TaskSucceeded {
			if st == "" {
				st = "not in the state"
			}
			return fmt.Sprintf("dependency %s is %s and not part of this apply", d, st)
		}
	}
	return ""
}

// Run sweeps every SweepInterval until ctx is done, then returns nil. A
// failed sweep is an internal error: it fails the coordinator (Failed).
func (c *Coordinator) Run(ctx context.Context) error {
	t := time.NewTicker(c.sweepInterval)
	defer t.Stop()
	if c.cfg != nil {
		judged := make(chan struct{})
		go func() { defer close(judged); c.judgeLoop(ctx) }()
		defer func() { <-judged }()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.log.Error("sweep failed", "err", err)
				c.Fail(fmt.Errorf("sweeping expired leases: %w", err))
			}
		}
	}
}

// Fail records the coordinator's first internal error (the state could
// not be read or written, an answer of its HTTP face failed or panicked)
// and closes Failed; later calls change nothing.
func (c *Coordinator) Fail(err error) {
	c.failOnce.Do(func() {
		c.failErr = err
		c.log.Error("the coordinator failed: stopping the apply", "err", err)
		close(c.failed)
	})
}

// Logger returns the coordinator's logger (Options.Logger), which its
// HTTP face logs to as well.
func (c *Coordinator) Logger() *slog.Logger { return c.log }

// Failed is closed when the coordinator met an internal error — its state
// could not be read or written (a damaged file, a full disk), a handler
// panicked — after which apply stops instead of running on while nothing
// it decides is recorded. Err says what.
func (c *Coordinator) Failed() <-chan struct{} { return c.failed }

// Err returns the internal error that closed Failed, or nil.
func (c *Coordinator) Err() error {
	select {
	case <-c.failed:
		return c.failErr
	default:
		return nil
	}
}

// Sweep runs one pass at Now(): it expires active leases past expires_at
// (their attempts lost; each task spends max_lost and is retried with
// backoff or fails, "lost N times; its lost budget of M is spent"), marks workers silent past their ttl
// stale, and wakes waiting claims when a retry became due. It never marks
// a task succeeded. It answers what it expired and marked stale (the
// operator route behind `wdc workers sweep`). Errors: the state's.
func (c *Coordinator) Sweep(ctx context.Context) (protocol.SweepResponse, error) {
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	var now time.Time
	var res state.SweepResult
	due, err := c.store.SweepDue(ctx, c.now())
	if err != nil {
		return protocol.SweepResponse{}, err
	}
	if !due {
		c.wakeDueRetries()
		return protocol.SweepResponse{Expired: []protocol.LeaseInfo{}, Stale: []string{}}, nil
	}
	err = c.store.Write(ctx, func(tx *state.Tx) error {
		now = c.now()
		var err error
		res, err = tx.Sweep(now, c.policy)
		return err
	}, func(err error) {
		if err != nil {
			return
		}
		var evs []Event
		c.mu.Lock()
		wake := false
		for _, out := range res.Expired {
			pool := c.poolOfWorker(out.WorkerID)
			c.poolMetrics(pool).leasesExpired.Inc()
			evs = append(evs, Event{At: now, Kind: EventExpired, Task: out.Task, WorkerID: out.WorkerID, Pool: pool,
				Attempt: out.Attempt, Token: out.Token, Message: "attempt lost: lease expired"})
			evs = c.applyOutcomeLocked(out, now, evs)
			wake = true
		}
		for _, w := range res.Stale {
			if ws := c.workers[w.ID]; ws != nil {
				ws.status = state.WorkerStale
			}
			evs = append(evs, Event{At: now, Kind: EventStale, WorkerID: w.ID, Pool: w.Pool,
				Message: fmt.Sprintf("no heartbeat for %s (ttl)", w.TTL)})
		}
		if c.dueRetriesLocked(now) || wake {
			c.broadcastLocked()
		}
		c.mu.Unlock()
		c.emit(evs)
	})
	if err != nil {
		return protocol.SweepResponse{}, err
	}
	resp := protocol.SweepResponse{Expired: []protocol.LeaseInfo{}, Stale: []string{}}
	for _, out := range res.Expired {
		resp.Expired = append(resp.Expired, protocol.LeaseInfo{FencingToken: out.Token, Task: out.Task, Attempt: out.Attempt,
			WorkerID: out.WorkerID, Status: string(state.LeaseExpired)})
	}
	for _, w := range res.Stale {
		resp.Stale = append(resp.Stale, w.ID)
	}
	return resp, nil
}

// wakeDueRetries wakes waiting claims when a delayed retry became due.
func (c *Coordinator) wakeDueRetries() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dueRetriesLocked(c.now()) {
		c.broadcastLocked()
	}
}

// dueRetriesLocked forgets the delay of every retry due at now and
// reports whether there was one. mu must be held.
func (c *Coordinator) dueRetriesLocked(now time.Time) bool {
	due := false
	for ts := range c.delayed {
		if !ts.notBefore.After(now) {
			delete(c.delayed, ts)
			ts.notBefore = time.Time{}
			due = true
		}
	}
	return due
}

// StopGranting makes the coordinator grant no new lease from now on (for
// example on Ctrl-C). Claims then answer with no assignments; heartbeats
// and results are served as before.
func (c *Coordinator) StopGranting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
}

// Drain stops granting and tells every worker to drain: heartbeat and claim
// answers carry drain=true, and waiting claims return at once.
func (c *Coordinator) Drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.draining = true
	c.broadcastLocked()
}

// Interrupt is Drain for an apply the operator stopped (Ctrl-C): attempts
// that workers give up while draining (failure class lost) are handed back
// without spending retry.max_lost, and ReleaseLeases ends the rest the same
// way, so an interruption never fails a task.
func (c *Coordinator) Interrupt() {
	c.mu.Lock()
	c.interrupted = true
	c.mu.Unlock()
	c.Drain()
}

func (c *Coordinator) isInterrupted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupted
}

// ReleaseLeases hands back every active lease this coordinator knows of
// without spending any budget (the tasks become queued again), for an
// interrupted apply whose workers are gone. It returns how many it released.
func (c *Coordinator) ReleaseLeases(ctx context.Context, reason string) int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	tokens := make([]int64, 0, len(c.leases))
	for t := range c.leases {
		tokens = append(tokens, t)
	}
	c.mu.Unlock()
	slices.Sort(tokens)
	n, err := c.release(ctx, tokens, reason)
	if err != nil {
		c.log.Warn("releasing leases", "err", err)
	}
	c.events.flush()
	return n
}

// Finished reports whether every task of the apply has a final status
// (succeeded, failed or cancelled).
func (c *Coordinator) Finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unfinished == 0
}

// Done returns a channel closed when Finished becomes true.
func (c *Coordinator) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// Progress returns counts of the apply's tasks by status, the attempts
// granted, and per pool its unfinished tasks, workers and leases.
func (c *Coordinator) Progress() Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.progressLocked()
}

// progressLocked is Progress; c.mu must be held.
func (c *Coordinator) progressLocked() Progress {
	p := Progress{Tasks: map[state.TaskStatus]int{}, Total: len(c.order), AttemptsGranted: c.granted}
	idx := map[*poolState]int{}
	for i, ps := range c.pools {
		idx[ps] = i
		p.Pools = append(p.Pools, PoolProgress{Name: ps.rt.Name, Failed: ps.failed})
	}
	for _, ts := range c.order {
		p.Tasks[ts.status]++
		if ts.status.Finished() {
			p.Finished++
			continue
		}
		for _, ps := range ts.pools {
			p.Pools[idx[ps]].Unfinished++
		}
	}
	for _, w := range c.workers {
		pp := &p.Pools[idx[w.pool]]
		switch w.status {
		case state.WorkerActive:
			pp.Active++
		case state.WorkerDraining:
			pp.Draining++
		case state.WorkerStale:
			pp.Stale++
		case state.WorkerGone:
			pp.Gone++
		}
		pp.Leases += w.held
		if c.draining && !w.toldDrain && (w.status == state.WorkerActive || w.status == state.WorkerDraining) {
			pp.Untold++
		}
	}
	return p
}

// FailPool fails the apply's unfinished tasks (pending or queued) that no
// pool but the failed ones can run, with the reason "pool NAME: reason",
// and cancels their dependents. Apply calls it when a pool's launches keep
// failing to register. Tasks another pool can still run are left alone;
// running tasks keep their leases. Errors: an unknown pool; state errors.
func (c *Coordinator) FailPool(pool, reason string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ps := c.poolByNam[pool]
	if ps == nil {
		return fmt.Errorf("coordinator: unknown pool %q", pool)
	}
	c.mu.Lock()
	ps.failed = true
	var fin []state.TaskFinish
	listed := map[string]bool{}
	for _, ts := range c.order {
		if ts.status != state.TaskPending && ts.status != state.TaskQueued {
			continue
		}
		if slices.ContainsFunc(ts.pools, func(p *poolState) bool { return !p.failed }) {
			continue
		}
		if listed[ts.rt.Address] {
			continue
		}
		listed[ts.rt.Address] = true
		fin = append(fin, state.TaskFinish{Address: ts.rt.Address, Status: state.TaskFailed,
			Reason: fmt.Sprintf("pool %s: %s", pool, reason)})
	}
	n := len(fin)
	for _, f := range fin[:n] {
		for _, d := range c.tasks[f.Address].policy.Downstream {
			if !listed[d] {
				listed[d] = true
				fin = append(fin, state.TaskFinish{Address: d, Status: state.TaskCancelled, Reason: "dependency " + f.Address + " failed"})
			}
		}
	}
	c.mu.Unlock()
	if len(fin) == 0 {
		return nil
	}
	now := c.now()
	got, err := c.store.FinishTasks(context.Background(), fin, now)
	if err != nil {
		return fmt.Errorf("coordinator: fail pool %s: %w", pool, err)
	}
	var evs []Event
	c.mu.Lock()
	for _, f := range fin {
		if !slices.Contains(got, f.Address) {
			continue
		}
		c.setStatus(c.tasks[f.Address], f.Status)
		kind := EventFailed
		if f.Status == state.TaskCancelled {
			kind = EventCancelled
		}
		evs = append(evs, Event{At: now, Kind: kind, Task: f.Address, Pool: pool, Message: f.Reason})
	}
	c.mu.Unlock()
	c.emitAndFlush(evs)
	return nil
}

// RevokeLeases ends every active lease in the state through
// state.RevokeAllLeases (each attempt lost: its task is queued with a lost
// retry directive due at once, or failed when max_lost is spent) and marks
// every worker gone, keeping the coordinator's view (Progress, Finished) in
// step. Apply calls it after draining, for leases whose workers are gone.
// It returns the number of leases revoked. Dependents of a task failed
// this way are left for the next plan.
func (c *Coordinator) RevokeLeases(ctx context.Context, reason string) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	res, err := c.store.RevokeAllLeases(ctx, reason, now)
	if err != nil {
		return 0, err
	}
	var evs []Event
	c.mu.Lock()
	for _, out := range res.Revoked {
		pool := c.poolOfWorker(out.WorkerID)
		c.poolMetrics(pool).leasesRevoked.Inc()
		evs = append(evs, Event{At: now, Kind: EventRevoked, Task: out.Task, WorkerID: out.WorkerID, Pool: pool,
			Attempt: out.Attempt, Token: out.Token, Message: "attempt lost: lease revoked: " + reason})
		evs = c.applyOutcomeLocked(out, now, evs)
	}
	for _, w := range c.workers {
		w.status = state.WorkerGone
		c.revokeSessionLocked(w) // sessions die with the apply
	}
	c.broadcastLocked()
	c.mu.Unlock()
	c.emitAndFlush(evs)
	return len(res.Revoked), nil
}

func (c *Coordinator) poolOfWorker(id string) string {
	if w := c.workers[id]; w != nil {
		return w.pool.rt.Name
	}
	return ""
}

// broadcastLocked wakes every waiting claim.
func (c *Coordinator) broadcastLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// setStatus changes a task's status in memory: queue membership, the
// finished count and Done.
func (c *Coordinator) setStatus(ts *taskState, st state.TaskStatus) {
	if ts == nil || ts.status == st {
		return
	}
	was := ts.status
	if was == state.TaskQueued {
		c.dequeue(ts)
	}
	ts.status = st
	if st == state.TaskQueued {
		c.enqueue(ts)
	} else {
		delete(c.delayed, ts)
		ts.notBefore = time.Time{}
	}
	if !was.Finished() && st.Finished() {
		c.unfinished--
		c.checkDoneLocked()
	} else if was.Finished() && !st.Finished() {
		// Only another process writing the same state could do this.
		if c.doneClosed {
			c.done = make(chan struct{})
			c.doneClosed = false
		}
		c.unfinished++
	}
}

func (c *Coordinator) enqueue(ts *taskState) {
	for _, p := range ts.pools {
		i, found := slices.BinarySearch(p.queue, ts.pos)
		if !found {
			p.queue = slices.Insert(p.queue, i, ts.pos)
		}
	}
}

func (c *Coordinator) dequeue(ts *taskState) {
	for _, p := range ts.pools {
		if i, found := slices.BinarySearch(p.queue, ts.pos); found {
			p.queue = slices.Delete(p.queue, i, i+1)
		}
	}
}

// depsSucceeded reports whether every dependency of ts has succeeded.
func (c *Coordinator) depsSucceeded(ts *taskState) bool {
	for _, d := range ts.rt.DependsOn {
		if dt := c.tasks[d]; dt != nil {
			if dt.status != state.TaskSucceeded {
				return false
			}
		} else if c.external[d] != state.TaskSucceeded {
			return false
		}
	}
	return true
}

// endLeaseLocked forgets an ended lease; unstarted is the state's word on
// whether it ended unstarted (no attempt ran, so none is counted). The
// state decides, not memory: a result reporting the lease's start marks
// it started in memory before its write commits (takeStarts), and a write
// queued before that one may still end the lease unstarted.
func (c *Coordinator) endLeaseLocked(token int64, unstarted bool) {
	if l := c.leases[token]; l != nil {
		if unstarted {
			c.granted--
		}
		if l.unstarted {
			if w := c.workers[l.worker]; w != nil && w.unstarted > 0 {
				w.unstarted--
			}
		}
		if w := c.workers[l.worker]; w != nil && w.held > 0 {
			if w.held--; w.held == 0 {
				w.idleSince = c.now()
			}
		}
		delete(c.leases, token)
	}
	delete(c.live, token)
}

// applyOutcomeLocked brings memory in line with a settled attempt and
// appends its events.
func (c *Coordinator) applyOutcomeLocked(out state.AttemptOutcome, now time.Time, evs []Event) []Event {
	c.endLeaseLocked(out.Token, out.Unstarted)
	pool := c.poolOfWorker(out.WorkerID)
	kind := EventFailed
	switch {
	case out.Unstarted:
		kind = EventReleased // a prefetched lease that never started: no attempt ran
	case out.Status == state.TaskSucceeded:
		kind = EventSucceeded
	case out.Status == state.TaskQueued:
		kind = EventRetried
	}
	evs = append(evs, Event{At: now, Kind: kind, Task: out.Task, WorkerID: out.WorkerID, Pool: pool,
		Attempt: out.Attempt, Token: out.Token, Message: out.Message})
	if ts := c.tasks[out.Task]; ts != nil {
		c.setStatus(ts, out.Status)
		if out.Retry != nil && out.Retry.NotBefore.After(now) {
			ts.notBefore = out.Retry.NotBefore
			c.delayed[ts] = struct{}{}
		}
	}
	for _, a := range out.Queued {
		c.setStatus(c.tasks[a], state.TaskQueued)
		evs = append(evs, Event{At: now, Kind: EventQueued, Task: a, Message: "dependencies succeeded"})
	}
	for _, a := range out.Cancelled {
		c.setStatus(c.tasks[a], state.TaskCancelled)
		evs = append(evs, Event{At: now, Kind: EventCancelled, Task: a, Message: "dependency " + out.Task + " failed"})
	}
	c.broadcastLocked()
	return evs
}
