package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/agent/confine"
	"github.com/wdc-dev/wdc/agent/procgroup"
	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/internal/folder"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// Defaults for zero Options fields and for zero settings from the
// coordinator.
const (
	DefaultDrainTimeout      = 60 * time.Second
	DefaultClaimWait         = 10 * time.Second
	DefaultKillGrace         = 5 * time.Second
	DefaultRegisterTimeout   = time.Minute
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultTTL               = 10 * time.Second
)

// Options configure an agent. ServerURL and WorkDir are required, and a
// launch or join credential must be given in Credential or in the
// environment.
type Options struct {
	// ServerURL is the coordinator's base URL, e.g. "http://127.0.0.1:7420".
	ServerURL string
	// Pool, when set, is the pool the worker expects to join; registration
	// fails if the credential belongs to another pool.
	Pool string
	// Credential is the launch credential (from apply's provider) or join
	// credential (from a join file) that registration exchanges for a
	// session. Empty means the value of protocol.LaunchCredentialEnv
	// (WDC_LAUNCH_CREDENTIAL) in Environ.
	Credential string
	// WorkDir is the work folder: attempt logs go to
	// logs/<task>/<attempt>/{stdout,stderr} and scratch folders to
	// scratch/<task>/<attempt>/ under it. A relative path is made absolute.
	WorkDir string
	// DrainTimeout bounds how long a drain lets running attempts finish
	// before it kills them (default DefaultDrainTimeout, 60 s).
	DrainTimeout time.Duration
	// Logger receives structured logs; nil means a text handler on stderr.
	Logger *slog.Logger
	// Version is reported at registration.
	Version string
	// Environ is the environment attempts inherit (minus the token
	// variable); nil means os.Environ().
	Environ []string
	// HTTPClient makes the protocol calls; nil means a client with its own
	// transport and no overall timeout (each call has a deadline).
	HTTPClient *http.Client
	// ClaimWait is the long-poll wait asked for in each claim (default 10 s).
	ClaimWait time.Duration
	// Unconfined runs attempts without confinement (package confine):
	// their commands can then read the work folder and signal the agent.
	// By default every attempt is confined where this machine allows it,
	// and run unconfined, with a warning at start, where it does not.
	Unconfined bool
	// HideFiles are files of this agent no confined attempt may read (its
	// join file, whose credential registers workers): covered by an empty
	// file where the attempt has a mount namespace of its own. Absolute
	// paths.
	HideFiles []string
	// KillGrace is the time between SIGTERM and SIGKILL when the agent
	// stops an attempt's process group (default 5 s).
	KillGrace time.Duration
	// RegisterTimeout bounds how long the agent keeps retrying its
	// registration while the coordinator is unreachable (default 1 min).
	RegisterTimeout time.Duration
	// RetryBase and RetryMax shape the capped exponential backoff between
	// retries of a failed call (defaults 200 ms and 5 s).
	RetryBase, RetryMax time.Duration
	// Hostname is reported at registration; empty means os.Hostname().
	Hostname string
	// Spool is the folder of the durable result buffer ("" = the folder
	// "spool" of WorkDir); see spool.go.
	Spool string
	// NoPrefetch keeps the worker from holding a prefetched lease (by
	// default it holds one beyond its capacity and starts it the moment
	// an attempt ends, while that attempt's result is posted;
	// docs/protocol.md, "Prefetched leases").
	NoPrefetch bool
}

// Agent is one worker: it registers, heartbeats on its own timer, claims
// assignments by long poll and runs up to its pool's capacity of attempts
// at once. Create it with New and run it with Run; a zero Agent is not
// usable.
type Agent struct {
	opts   Options
	log    *slog.Logger
	client *protocol.Client // the credential's until registration, then the session's
	// requestID is sent with every try of the registration, so a retry
	// whose first answer was lost gets the same worker back.
	requestID string
	spool     *spool // nil when it could not be opened
	// folders is the work folder's lock (folders.go), nil when the folder
	// could not be opened: task folders are then made and removed.
	folders *folderLock
	environ []string
	retry   backoff
	health  health

	drainOnce sync.Once
	drainCh   chan struct{} // closed by Drain

	fatalOnce sync.Once
	fatalCh   chan struct{} // closed when fatalErr is set
	fatalErr  error
	stopCalls context.CancelFunc // cancels every protocol call in flight
	// stopping is closed when Run's ctx is done: the worker itself is
	// being stopped (a signal to the agent, a pod or job stop).
	stopping <-chan struct{}

	// Set by Run after registration.
	reg      protocol.RegisterResponse
	interval time.Duration
	ttl      time.Duration

	mu       sync.Mutex
	attempts map[int64]*attempt // leases held: from claim until the result is posted (or abandoned)
	running  int                // attempts whose process has not ended
	// reserved counts slots freed by ended attempts whose results are
	// being posted with next = 1 (eager dispatch): the claim loop leaves
	// them to the answer, which may carry the slot's next assignment.
	reserved int
	// parked are the prefetched assignments held, not started yet, oldest
	// first: the next attempt to end starts the first.
	parked    []*attempt
	slotFreed chan struct{} // signalled (buffer 1) when running or reserved decreases
	// attemptWG counts the attempts' goroutines (Run waits for it);
	// eager-dispatched assignments join it from the attempt that got them.
	attemptWG sync.WaitGroup
	// unconfinedDirs holds the dirs the agent said it cannot confine
	// attempts in (starter).
	unconfinedDirs sync.Map
	abandoned      []int64 // tokens whose result could not be delivered
	// commands remembers where the attempts' commands were found.
	commands commandPaths
}

// New checks opts, fills in defaults and returns an agent ready to Run.
func New(opts Options) (*Agent, error) {
	if opts.ServerURL == "" {
		return nil, errors.New("agent: the coordinator URL is required (--server)")
	}
	if opts.WorkDir == "" {
		return nil, errors.New("agent: the work folder is required (--work-dir)")
	}
	abs, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("agent: work folder: %w", err)
	}
	opts.WorkDir = abs
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	if opts.Credential == "" {
		opts.Credential = lookupEnv(environ, protocol.LaunchCredentialEnv)
	}
	if opts.Credential == "" {
		return nil, fmt.Errorf("agent: no credential: set %s, or give a join file (--join-file)", protocol.LaunchCredentialEnv)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Spool == "" {
		opts.Spool = filepath.Join(opts.WorkDir, "spool")
	} else if opts.Spool, err = filepath.Abs(opts.Spool); err != nil {
		return nil, fmt.Errorf("agent: spool folder: %w", err)
	}
	if opts.ClaimWait <= 0 {
		opts.ClaimWait = DefaultClaimWait
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.RegisterTimeout <= 0 {
		opts.RegisterTimeout = DefaultRegisterTimeout
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 200 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Agent{
		opts:      opts,
		log:       log,
		client:    protocol.NewClient(opts.ServerURL, opts.Credential, hc),
		requestID: newRequestID(),
		environ:   environ,
		retry:     backoff{base: opts.RetryBase, max: opts.RetryMax},
		drainCh:   make(chan struct{}),
		fatalCh:   make(chan struct{}),
		attempts:  map[int64]*attempt{},
		slotFreed: make(chan struct{}, 1),
	}, nil
}

// Run creates an agent from opts and runs it until it has drained (ctx
// cancelled, or the coordinator asked) or failed. See (*Agent).Run.
func Run(ctx context.Context, opts Options) error {
	a, err := New(opts)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Drain asks the agent to stop claiming, let its running attempts finish
// within the drain timeout, kill those still running then, post every
// result and return. It is safe to call at any time, more than once, from
// any goroutine. Cancelling Run's context does the same.
func (a *Agent) Drain() {
	a.drainOnce.Do(func() { close(a.drainCh) })
	a.dropParked("the worker is draining")
}

// Run registers the worker and works until it drains or fails.
//
// It returns nil after a drain: ctx was cancelled, Drain was called, or the
// coordinator asked for it. It returns an error when registration fails,
// when the coordinator answers 401 (the token is not valid) or 404 for the
// worker (it does not know the worker), or when every call has failed for
// longer than the worker's ttl; in those cases it kills its running
// attempts first. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	// Protocol calls must outlive ctx: a drain still posts results.
	callCtx, stopCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCalls()
	a.stopCalls = stopCalls
	a.stopping = ctx.Done()
	stopAfter := context.AfterFunc(ctx, a.Drain)
	defer stopAfter()

	// Nothing of the same user may read this process's memory,
	// environment (its credential) or descriptors through /proc.
	if err := confine.MakeUndumpable(); err != nil {
		a.log.Warn("could not make the agent non-dumpable", "err", err)
	}
	a.logConfinement()
	// What a killed agent of this work folder left running (its attempts'
	// process groups) must not outlive it, whoever started it.
	if n := procgroup.KillOrphans(a.opts.WorkDir, 0); n > 0 {
		a.log.Warn("killed attempt process groups that a dead agent left in this work folder", "groups", n)
	}
	// Results an earlier agent left go first, with their own sessions:
	// they need no registration, and a full pool must not keep them
	// from their decision.
	a.deliverOrphans(callCtx)
	if err := a.register(ctx); err != nil {
		if errors.Is(err, errStoppedBeforeRegistering) {
			return nil
		}
		return err
	}
	if sp, err := openSpool(a.opts.Spool, spoolSession{ServerURL: a.opts.ServerURL, WorkerID: a.reg.WorkerID, SessionToken: a.reg.SessionToken}); err != nil {
		a.log.Warn("no spool: results are posted from the attempts' files only", "err", err)
	} else {
		a.spool = sp
		defer sp.close()
		if sp.pool != nil {
			a.folders = openFolderLock(a.opts.WorkDir)
			defer a.folders.close()
		}
	}
	a.deliverOrphans(callCtx) // what could not be delivered before registering, if anything
	// Label names only: a label's value may come from a sensitive variable.
	labelNames := make([]string, 0, len(a.reg.Labels))
	for k := range a.reg.Labels {
		labelNames = append(labelNames, k)
	}
	sort.Strings(labelNames)
	a.log.Info("registered", "worker", a.reg.WorkerID, "pool", a.reg.Pool, "labels", labelNames,
		"capacity", a.reg.Capacity, "heartbeat_interval", a.interval, "ttl", a.ttl)

	hbCtx, stopHeartbeats := context.WithCancel(callCtx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.heartbeatLoop(hbCtx)
	}()

	a.claimLoop(callCtx, &a.attemptWG)

	// Drain (or fatal): no more claims. Let attempts finish, bounded.
	select {
	case <-a.fatalCh:
		a.stopAll("stopped: the agent is shutting down: " + a.fatalErr.Error())
	default:
		if n := a.runningCount(); n > 0 {
			a.log.Info("draining: waiting for running attempts", "running", n, "drain_timeout", a.opts.DrainTimeout)
		}
		if !a.waitIdle(a.opts.DrainTimeout) {
			select {
			case <-a.fatalCh:
				a.stopAll("stopped: the agent is shutting down: " + a.fatalErr.Error())
			default:
				a.log.Warn("drain timeout passed: stopping running attempts", "running", a.runningCount(), "drain_timeout", a.opts.DrainTimeout)
				a.stopAll("stopped by its worker: still running " + a.opts.DrainTimeout.String() + " after the worker began to drain (its drain timeout)")
			}
		}
	}
	a.attemptWG.Wait() // every attempt has ended and its result was posted or abandoned
	stopHeartbeats()
	<-hbDone
	select {
	case <-a.fatalCh:
	default:
		// A clean exit: deregister, so the apply need not wait out the
		// ttl to know this worker is gone.
		a.leave(callCtx)
	}

	a.mu.Lock()
	abandoned := slices.Clone(a.abandoned)
	a.mu.Unlock()
	if len(abandoned) > 0 {
		a.log.Warn("agent stopped: abandoned leases whose results were not delivered", "worker", a.reg.WorkerID, "leases", abandoned)
	} else {
		a.log.Info("agent stopped: no lease abandoned", "worker", a.reg.WorkerID)
	}
	select {
	case <-a.fatalCh:
		return a.fatalErr
	default:
		return nil
	}
}

// leave deregisters the worker (POST /v1/workers/{id}/leave) once it has
// drained: the coordinator marks it gone at once and hands back a lease it
// may still hold at no cost to the task's retries. It tries once: a
// coordinator that cannot be reached (its apply is ending) or does not know
// the route (an older one) has nothing to wait for, and the worker goes
// stale there after its ttl as before.
func (a *Agent) leave(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout())
	defer cancel()
	resp, err := a.client.Leave(cctx, a.reg.WorkerID, protocol.LeaveRequest{Reason: "the agent drained and exits"})
	switch {
	case err == nil:
		a.log.Info("left the pool", "worker", a.reg.WorkerID, "leases_handed_back", resp.Released)
	case reachFailure(err) || protocol.StatusOf(err) == http.StatusUnauthorized || protocol.StatusOf(err) == http.StatusNotFound:
		a.log.Info("could not leave the pool: the coordinator goes on without this worker after its ttl", "worker", a.reg.WorkerID, "err", err)
	default:
		a.log.Warn("could not leave the pool", "worker", a.reg.WorkerID, "err", err)
	}
}

// fatal records the first fatal error, stops claiming, and cancels every
// call in flight.
func (a *Agent) fatal(err error) {
	a.fatalOnce.Do(func() {
		a.fatalErr = err
		a.log.Error("fatal", "err", err)
		close(a.fatalCh)
		if a.stopCalls != nil {
			a.stopCalls()
		}
	})
	a.dropParked("the agent is shutting down")
}

// callTimeout is the deadline of one heartbeat or result call: half the
// ttl, at least 100 ms and at most 30 s.
func (a *Agent) callTimeout() time.Duration {
	if a.ttl <= 0 {
		return 10 * time.Second // before registration: the ttl is not known yet
	}
	return min(max(a.ttl/2, 100*time.Millisecond), 30*time.Second)
}

// register calls POST /v1/workers, retrying unreachable-coordinator errors
// for up to RegisterTimeout. Cancelling ctx gives up quietly.
func (a *Agent) register(ctx context.Context) error {
	req := protocol.RegisterRequest{Host: a.opts.Hostname, PID: os.Getpid(), Version: a.opts.Version, RequestID: a.requestID}
	deadline := time.Now().Add(a.opts.RegisterTimeout)
	for n := 0; ; n++ {
		cctx, cancel := context.WithTimeout(ctx, min(10*time.Second, a.opts.RegisterTimeout))
		reg, err := a.client.Register(cctx, req)
		cancel()
		if err == nil {
			if a.opts.Pool != "" && reg.Pool != a.opts.Pool {
				return fmt.Errorf("agent: the credential belongs to pool %q, not %q", reg.Pool, a.opts.Pool)
			}
			if reg.WorkerID == "" || reg.SessionToken == "" {
				return errors.New("agent: the coordinator registered the worker without an id or session token")
			}
			a.client = a.client.WithToken(reg.SessionToken)
			if reg.Capacity < 1 {
				reg.Capacity = 1
			}
			a.mu.Lock()
			a.reg = reg
			a.mu.Unlock()
			a.interval = time.Duration(reg.HeartbeatIntervalMS) * time.Millisecond
			if a.interval <= 0 {
				a.interval = DefaultHeartbeatInterval
			}
			a.ttl = time.Duration(reg.TTLMS) * time.Millisecond
			if a.ttl <= 0 {
				a.ttl = DefaultTTL
			}
			return nil
		}
		if ctx.Err() != nil {
			a.log.Info("stopped before registering")
			return errStoppedBeforeRegistering
		}
		if protocol.StatusOf(err) == http.StatusUnauthorized {
			return fmt.Errorf("agent: the coordinator refused the credential: %w", err)
		}
		if tlsRefused(err) {
			return fmt.Errorf("agent: the coordinator at %s failed TLS verification (check --ca-sha256, or the URL apply printed): %w", a.opts.ServerURL, err)
		}
		if !reachFailure(err) {
			return fmt.Errorf("agent: registering: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent: could not register with %s for %s (%w): %w", a.opts.ServerURL, a.opts.RegisterTimeout, ErrUnreachable, err)
		}
		d := a.retry.delay(n)
		a.log.Warn("registering failed; retrying", "err", err, "in", d)
		if !sleep(ctx, d) {
			a.log.Info("stopped before registering")
			return errStoppedBeforeRegistering
		}
	}
}

// ErrSessionRefused is wrapped by Run's error when the coordinator stopped
// accepting the worker's session (401 on it, or 404 for its worker id): the
// apply it joined ended or was replaced (a new apply does not know the
// session), or the worker was marked gone. A worker holding a reusable
// join credential may register again.
var ErrSessionRefused = errors.New("the coordinator refused the worker's session")

// ErrUnreachable is wrapped by Run's error when the coordinator could not
// be reached: for longer than the worker's ttl once registered, or for
// RegisterTimeout before (its apply ended, or has not started yet). A
// worker holding a reusable join credential may try to register again.
var ErrUnreachable = errors.New("could not reach the coordinator")

// fatalAnswer turns a 401, or a 404 on a worker route, into a fatal error
// and reports whether it did.
func (a *Agent) fatalAnswer(err error, workerRoute bool) bool {
	switch status := protocol.StatusOf(err); {
	case status == http.StatusUnauthorized:
		a.fatal(fmt.Errorf("agent: %w: %w", ErrSessionRefused, err))
		return true
	case status == http.StatusForbidden && workerRoute:
		a.fatal(fmt.Errorf("agent: the coordinator refused the worker's session: %w", err))
		return true
	case status == http.StatusNotFound && workerRoute:
		a.fatal(fmt.Errorf("agent: the coordinator does not know worker %s: %w: %w", a.reg.WorkerID, ErrSessionRefused, err))
		return true
	}
	return false
}

// note records a call's outcome in the health tracker.
func (a *Agent) note(err error) {
	switch {
	case err == nil:
		a.health.ok()
	case reachFailure(err):
		a.health.fail(time.Now(), err)
	case errors.Is(err, context.Canceled):
	default:
		a.health.ok() // the coordinator answered, if only with an error
	}
}

// heartbeatLoop sends a heartbeat every interval on its own timer until
// ctx is done, acts on the answers, and decides when the coordinator has
// been unreachable for longer than the ttl.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	timer := time.NewTimer(a.interval)
	defer timer.Stop()
	lastEnd := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		if gap := now.Sub(lastEnd); gap > 3*a.interval {
			// The process did not run for a while (SIGSTOP, suspend):
			// that time does not count as failing to reach the
			// coordinator. Try again before deciding anything.
			a.log.Warn("heartbeat timer fired late: the process was paused", "late_by", gap-a.interval)
			a.health.paused(now, gap-a.interval)
		}
		start := time.Now()
		a.heartbeat(ctx)
		if ctx.Err() != nil {
			return
		}
		if over := time.Since(start) - a.callTimeout(); over > a.interval {
			// A call never outlasts its timeout: the process was paused
			// while the call was in flight. That time does not count
			// either; try again at once before deciding anything.
			a.log.Warn("heartbeat returned late: the process was paused", "late_by", over)
			a.health.paused(time.Now(), over)
			lastEnd = time.Now()
			timer.Reset(0)
			continue
		}
		if d, err := a.health.failingFor(time.Now()); d > a.ttl {
			a.fatal(fmt.Errorf("agent: %w at %s for %s, longer than the worker's ttl of %s: %w",
				ErrUnreachable, a.opts.ServerURL, d.Round(time.Millisecond), a.ttl, err))
			return
		}
		lastEnd = time.Now()
		timer.Reset(a.interval)
	}
}

// heartbeat sends one heartbeat and acts on its answer.
func (a *Agent) heartbeat(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout())
	defer cancel()
	tokens := a.heldTokens()
	resp, err := a.client.Heartbeat(cctx, a.reg.WorkerID, protocol.HeartbeatRequest{Leases: tokens})
	a.note(err)
	if err != nil {
		if !a.fatalAnswer(err, true) && ctx.Err() == nil {
			a.log.Warn("heartbeat failed", "err", err)
		}
		return
	}
	a.cancelLeases(resp.CancelLeases, "coordinator cancelled a lease: stopping its attempt",
		"stopped: the coordinator cancelled the lease (it is no longer active)")
	for _, tok := range resp.FollowLogs {
		a.mu.Lock()
		at := a.attempts[tok]
		start := at != nil && !at.streaming
		if start {
			at.streaming = true
		}
		a.mu.Unlock()
		if start {
			go a.streamLogs(ctx, at)
		}
	}
	if resp.Drain {
		a.startDrain("the coordinator asked the worker to drain")
	}
}

// startDrain logs why and drains.
func (a *Agent) startDrain(why string) {
	select {
	case <-a.drainCh:
	default:
		a.log.Info("draining", "why", why)
		a.Drain()
	}
}

// claimLoop long-polls for assignments while the agent has free slots,
// until it drains or fails. Each assignment runs on its own goroutine,
// counted in wg.
func (a *Agent) claimLoop(callCtx context.Context, wg *sync.WaitGroup) {
	// A claim in flight is abandoned when the agent drains.
	ctx, cancel := context.WithCancel(callCtx)
	defer cancel()
	go func() {
		select {
		case <-a.drainCh:
			cancel()
		case <-ctx.Done():
		}
	}()

	failures := 0
	for {
		if a.done() {
			return
		}
		free := a.reg.Capacity - a.busySlots()
		if free <= 0 {
			select {
			case <-a.slotFreed:
			case <-a.drainCh:
			case <-a.fatalCh:
			}
			continue
		}
		cctx, ccancel := context.WithTimeout(ctx, a.opts.ClaimWait+a.callTimeout())
		resp, err := a.client.Claim(cctx, a.reg.WorkerID, protocol.ClaimRequest{Max: free, WaitMS: a.opts.ClaimWait.Milliseconds()})
		ccancel()
		a.note(err)
		if err != nil {
			if a.done() || a.fatalAnswer(err, true) {
				return
			}
			d := a.retry.delay(failures)
			failures++
			a.log.Warn("claim failed; retrying", "err", err, "in", d)
			sleep(ctx, d)
			continue
		}
		failures = 0
		for i, asg := range resp.Assignments {
			if asg.Prefetched || i < free {
				// Within what it asked for: it runs when a slot is free
				// (a prefetched attempt started meanwhile may have taken
				// the one it asked for).
				a.park(callCtx, asg)
				continue
			}
			// Count the attempt before its goroutine starts, so that a
			// drain or a fatal error that follows sees it.
			at := a.hold(asg, i < free)
			if at == nil {
				a.log.Warn("the coordinator granted a lease the worker already holds: ignoring the duplicate",
					"task", asg.Task, "attempt", asg.Attempt, "token", asg.FencingToken)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.runAssignment(callCtx, at, i < free)
			}()
		}
		if resp.Drain {
			a.startDrain("the coordinator asked the worker to drain")
		}
	}
}

// done reports whether the agent is draining or failed.
func (a *Agent) done() bool {
	select {
	case <-a.drainCh:
		return true
	case <-a.fatalCh:
		return true
	default:
		return false
	}
}

// runAssignment runs one granted assignment and posts its result. An
// assignment beyond the worker's free slots (a coordinator that ignored
// max) is not run: its result says "lost" so the task is retried.
//
// Its steps: run the command (execute), free its slot (freeSlot, which
// starts a prefetched assignment in it or reserves it for the next
// assignment the result asks for), build the result (resultOf), deliver
// it with the start of the prefetched one and a request for the next
// prefetch (settle), start what its answer assigned (startNext), and
// remove what the attempt left in the work folder that holds nothing
// (tidyAttempt).
func (a *Agent) runAssignment(callCtx context.Context, at *attempt, fits bool) {
	asg := at.asg
	log := a.log.With("task", asg.Task, "attempt", asg.Attempt, "token", asg.FencingToken)
	defer func() {
		at.end()
		a.mu.Lock()
		delete(a.attempts, asg.FencingToken)
		a.mu.Unlock()
	}()

	var ex execution
	reserved := false
	var started *attempt // the prefetched attempt started in this one's slot
	defer func() {
		if reserved { // the answer never came: give the slot to a parked assignment or the claim loop
			a.releaseReserved()
			a.fillFreeSlots(callCtx)
		}
	}()
	if !fits {
		now := time.Now().UTC()
		ex = execution{started: now, ended: now, class: ClassLost,
			err: "not run: the coordinator granted more assignments than the worker's free slots (" + strconv.Itoa(a.reg.Capacity) + ")"}
		log.Warn("assignment beyond capacity: not running it")
	} else {
		log.Info("attempt started", "prefetched", asg.Prefetched) // not the command: it may hold a sensitive value; the plan shows it
		ex = a.execute(callCtx, at)
		started, reserved = a.freeSlot()
		if started != nil {
			a.run(callCtx, started, true)
		}
		exit := "none"
		if ex.exitCode != nil {
			exit = strconv.Itoa(*ex.exitCode)
		}
		// Not the error text: it may quote a dir or command built from a
		// sensitive value. The coordinator stores it redacted (wdc tasks show).
		log.Info("attempt ended", "class", ex.class, "exit_code", exit, "signal", ex.signal,
			"duration", ex.ended.Sub(ex.started).Round(time.Millisecond))
	}

	req, files := a.resultOf(at, ex, log)
	if reserved {
		req.Next = 1
	}
	if started != nil && started.asg.Prefetched {
		req.Started = []int64{started.asg.FencingToken}
	}
	if fits && a.wantsPrefetch() {
		req.Prefetch = 1
	}
	resp, accepted := a.settle(callCtx, log, asg.FencingToken, req, files)
	a.cancelLeases(resp.CancelLeases, "coordinator refused a prefetched attempt's start: stopping it",
		"stopped: the coordinator refused its start (the lease is no longer active)")
	if reserved || len(resp.Assignments) > 0 {
		a.startNext(callCtx, resp.Assignments, reserved)
		reserved = false
	}
	if fits {
		if err := tidyAttempt(at.paths, asg.Task, accepted, ex.ran && req.FailureClass == "", len(asg.Definition.Outputs) > 0); err != nil {
			log.Warn("removing what the attempt left in the work folder", "err", err)
		}
	}
}

// execute runs an attempt's command (runAttempt) with the inputs fetched
// through callCtx, and marks it ended. A command killed by a stop signal
// the agent did not send counts as lost when its worker is being stopped
// (classifyStopSignal).
func (a *Agent) execute(callCtx context.Context, at *attempt) execution {
	fetch := func(dir string, inputs []protocol.InputFile) (string, string) {
		return a.fetchInputs(callCtx, dir, inputs)
	}
	ex := runAttempt(at, at.paths, taskEnv(a.environ, at.asg, a.reg.WorkerID, at.paths.scratch), a.opts.KillGrace, fetch, a.starter(at.paths), &a.commands)
	if stopSignal(ex) {
		// A launch target that stops a worker signals its whole
		// process tree (Ray's job stop, a pod's SIGTERM to a shell
		// around the agent): the command may die before the agent
		// hears of its own stop. Give that news a moment to come.
		select {
		case <-a.stopping:
		case <-time.After(stopSignalWait):
		}
	}
	ex = classifyStopSignal(ex, isClosed(a.stopping))
	at.end()
	return ex
}

// freeSlot gives back the slot of an attempt whose command has ended.
// Unless the agent is done, the slot goes on at once: to the oldest
// prefetched assignment, which it returns counted as running (the caller
// starts it and reports the start with the result), or else it is
// reserved for the next assignment asked for with the result, and freeSlot
// reports so (the caller then releases it, if the answer never comes).
// Otherwise it wakes the claim loop.
func (a *Agent) freeSlot() (started *attempt, reserved bool) {
	a.mu.Lock()
	a.running--
	switch {
	case a.done():
	case len(a.parked) > 0:
		started = a.parked[0]
		a.parked = a.parked[1:]
		a.running++
	default:
		a.reserved++
		reserved = true
	}
	a.mu.Unlock()
	if started == nil {
		select {
		case a.slotFreed <- struct{}{}:
		default:
		}
	}
	return started, reserved
}

// wantsPrefetch reports whether a result should ask for a prefetched
// lease: the worker prefetches, is not done, and holds none.
func (a *Agent) wantsPrefetch() bool {
	if a.opts.NoPrefetch || a.done() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.parked) == 0
}

// park holds an assignment, prefetched or one a claim asked for, until a
// slot is free: at once if one is (fillFreeSlots), else when an attempt
// ends (freeSlot). The heartbeats report it, which renews its lease. A
// done agent drops it.
func (a *Agent) park(callCtx context.Context, asg protocol.Assignment) {
	at := a.hold(asg, false)
	if at == nil {
		a.log.Warn("the coordinator granted a lease the worker already holds: ignoring the duplicate",
			"task", asg.Task, "attempt", asg.Attempt, "token", asg.FencingToken)
		return
	}
	a.mu.Lock()
	a.parked = append(a.parked, at)
	a.mu.Unlock()
	if a.done() {
		a.dropParked("the worker is draining")
		return
	}
	a.fillFreeSlots(callCtx)
}

// fillFreeSlots starts parked assignments, oldest first, in the slots
// neither a running attempt nor a reservation takes. A prefetched one
// started so reports its start with its own result.
func (a *Agent) fillFreeSlots(callCtx context.Context) {
	var start []*attempt
	a.mu.Lock()
	for len(a.parked) > 0 && a.running+a.reserved < a.reg.Capacity && !a.done() {
		start = append(start, a.parked[0])
		a.parked = a.parked[1:]
		a.running++
	}
	a.mu.Unlock()
	for _, at := range start {
		a.run(callCtx, at, true)
	}
}

// run runs a held attempt on its own goroutine (runAssignment; fits: it
// is counted as running).
func (a *Agent) run(callCtx context.Context, at *attempt, fits bool) {
	a.attemptWG.Add(1)
	go func() {
		defer a.attemptWG.Done()
		a.runAssignment(callCtx, at, fits)
	}()
}

// dropParked lets go of the prefetched assignments not started: the
// heartbeats stop reporting them, so the coordinator hands their leases
// back at no cost (as it does when the worker leaves).
func (a *Agent) dropParked(why string) {
	a.mu.Lock()
	dropped := a.parked
	a.parked = nil
	for _, at := range dropped {
		delete(a.attempts, at.asg.FencingToken)
		at.end()
	}
	a.mu.Unlock()
	for _, at := range dropped {
		a.log.Info("prefetched assignment not started", "task", at.asg.Task, "attempt", at.asg.Attempt, "token", at.asg.FencingToken, "why", why)
	}
}

// dropParkedToken lets go of one prefetched assignment not started (its
// lease was cancelled), reporting whether it was one.
func (a *Agent) dropParkedToken(tok int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, at := range a.parked {
		if at.asg.FencingToken == tok {
			a.parked = append(a.parked[:i:i], a.parked[i+1:]...)
			delete(a.attempts, tok)
			at.end()
			return true
		}
	}
	return false
}

// cancelLeases acts on leases the coordinator answered as no longer
// active (a heartbeat's cancel_leases, or a result's for refused starts):
// a parked assignment is let go, a running attempt is stopped with why,
// logging msg.
func (a *Agent) cancelLeases(tokens []int64, msg, why string) {
	for _, tok := range tokens {
		if a.dropParkedToken(tok) {
			a.log.Info("coordinator cancelled a prefetched lease before its start", "token", tok)
			continue
		}
		a.mu.Lock()
		at := a.attempts[tok]
		a.mu.Unlock()
		if at == nil {
			continue
		}
		a.log.Warn(msg, "task", at.asg.Task, "attempt", at.asg.Attempt, "token", tok)
		at.stop(why)
	}
}

// resultOf builds the result of an attempt that ended as ex: its exit,
// class and error; for a command that ran, its logs, its declared outputs
// (a success whose outputs are missing becomes a failure) and, for a
// success, its recommendations; artifacts past the coordinator's size limit
// are left out (fitArtifacts). It also returns the files to upload, by
// SHA-256.
func (a *Agent) resultOf(at *attempt, ex execution, log *slog.Logger) (protocol.ResultRequest, map[string]string) {
	asg, paths := at.asg, at.paths
	req := protocol.ResultRequest{
		WorkerID:       a.reg.WorkerID,
		Task:           asg.Task,
		Attempt:        asg.Attempt,
		IdempotencyKey: a.reg.WorkerID + "-" + strconv.FormatInt(asg.FencingToken, 10),
		DefHash:        asg.DefHash,
		ExitCode:       ex.exitCode,
		Signal:         ex.signal,
		FailureClass:   ex.class,
		Error:          ex.err,
		StartedAt:      ex.started,
		EndedAt:        ex.ended,
	}
	files := map[string]string{} // hash → file, for uploads the coordinator asks for
	if ex.ran {
		var problems map[string]error
		req.Artifacts, files, problems = logArtifacts(paths)
		for name, err := range problems {
			log.Warn("reading a log to send it", "log", name, "err", err)
		}
		if ex.class == "" && len(asg.Definition.Outputs) > 0 {
			outs, err := collectOutputs(paths.scratch, asg.Definition.Outputs, paths.stage, a.reg.MaxArtifactSize)
			if err != nil {
				// A command that did not produce what it declares failed.
				req.FailureClass, req.Error = ClassFailure, err.Error()
			}
			for _, o := range outs {
				req.Artifacts = append(req.Artifacts, o.ref)
				if o.path != "" {
					files[o.ref.SHA256] = o.path
				}
			}
		}
	}
	if ex.ran && req.FailureClass == "" {
		req.Recommendations, req.RecommendationsError = readRecommendations(paths.scratch)
	}
	fitArtifacts(&req, files, a.reg.MaxArtifactSize)
	return req, files
}

// settle spools a result with its artifacts, posts it, and then removes the
// entry (accepted) or moves it to quarantine (rejected). A result not
// delivered stays in the spool, where a later agent finds it.
func (a *Agent) settle(callCtx context.Context, log *slog.Logger, token int64, req protocol.ResultRequest, files map[string]string) (resp protocol.ResultResponse, accepted bool) {
	entry := ""
	if a.spool != nil {
		kept := req
		kept.Next, kept.Prefetch = 0, 0 // a later agent that delivers it has no slot to fill
		kept.Started = nil              // nor this worker's attempts to report
		e, spooled, err := a.spool.put(token, kept, files)
		if err != nil {
			log.Warn("spooling the result failed; posting it from the attempt's files", "err", err)
		} else {
			entry, files = e, spooled
		}
	}
	resp, ok := a.postResult(callCtx, log, token, req, files)
	accepted = ok && resp.Decision == protocol.DecisionAccepted
	switch {
	case !ok || entry == "":
	case accepted:
		a.spool.recycle(entry, len(files) > 0) // the spooled copies
	default:
		if q, err := quarantine(a.spool.root, entry, "rejected: "+resp.Reason); err == nil {
			log.Warn("the rejected result is kept in the spool's quarantine", "path", q)
		}
	}
	return resp, accepted
}

// startNext runs the assignments a result's answer carried (eager
// dispatch) in the slot the attempt reserved, if it reserved one, then
// gives the reservation back, and parks the prefetched ones. The first
// started one fits the reserved slot; any more (a coordinator that gave
// more than next) are not run, and their results say so. A reserved slot
// that no started assignment fills goes to a parked one (whose own result
// then reports its start).
func (a *Agent) startNext(callCtx context.Context, asgs []protocol.Assignment, reserved bool) {
	slot := reserved
	for _, asg := range asgs {
		if asg.Prefetched {
			a.park(callCtx, asg)
			continue
		}
		at := a.hold(asg, slot)
		if at == nil {
			a.log.Warn("the coordinator granted a lease the worker already holds: ignoring the duplicate",
				"task", asg.Task, "attempt", asg.Attempt, "token", asg.FencingToken)
			continue
		}
		a.run(callCtx, at, slot)
		slot = false
	}
	if reserved {
		a.releaseReserved()
		a.fillFreeSlots(callCtx) // a slot the answer left free goes to a parked assignment
	}
}

// releaseReserved gives back a slot reserved for eager dispatch.
func (a *Agent) releaseReserved() {
	a.mu.Lock()
	a.reserved--
	a.mu.Unlock()
	select {
	case a.slotFreed <- struct{}{}:
	default:
	}
}

// busySlots counts the slots taken: running attempts and slots reserved
// for eager dispatch.
func (a *Agent) busySlots() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running + a.reserved
}

// deliverOrphans posts the results that agents which are gone left in the
// spool, each with its own worker's session and idempotency key, so a
// result is delivered once across a crash. A result whose session no
// longer works, or that the coordinator rejects, goes to quarantine; one
// the coordinator cannot be reached for stays for a later agent.
func (a *Agent) deliverOrphans(callCtx context.Context) {
	for _, o := range orphans(a.opts.Spool) {
		if o.sessionErr != nil && len(o.entries) > 0 {
			// Without a session no result of the folder can be delivered.
			a.log.Warn("a stopped agent's spool folder has no usable session", "spool", o.dir, "err", o.sessionErr)
			for _, entry := range o.entries {
				a.quarantineOrphan(a.log.With("spool", entry), entry, "its worker's session cannot be read: "+o.sessionErr.Error())
			}
		}
		if o.sessionErr == nil {
			client := a.client.WithToken(o.session.SessionToken)
			for _, entry := range o.entries {
				log := a.log.With("spool", entry)
				e, err := readEntry(entry)
				if err != nil {
					a.quarantineOrphan(log, entry, "unreadable: "+err.Error())
					continue
				}
				files := map[string]string{}
				for _, ar := range e.Result.Artifacts {
					files[ar.SHA256] = filepath.Join(entry, "blobs", ar.SHA256)
				}
				log.Info("delivering a result a stopped agent left", "worker", o.session.WorkerID, "task", e.Result.Task, "token", e.Token)
				resp, err := a.deliver(callCtx, log, client, e.Token, e.Result, files, false)
				switch st := protocol.StatusOf(err); {
				case err == nil && resp.Decision == protocol.DecisionAccepted:
					done(entry)
				case err == nil:
					a.quarantineOrphan(log, entry, "rejected: "+resp.Reason)
				case st == http.StatusUnauthorized || st == http.StatusForbidden:
					a.quarantineOrphan(log, entry, "its worker's session no longer works: "+err.Error())
				default:
					log.Warn("a stopped agent's result stays in the spool", "err", err)
				}
			}
		}
		if rest, _ := os.ReadDir(o.dir); len(pendingEntries(rest)) == 0 {
			os.RemoveAll(o.dir)
		}
		o.lock.Close()
	}
}

// quarantineOrphan moves a stopped agent's result to the quarantine and
// says so.
func (a *Agent) quarantineOrphan(log *slog.Logger, entry, why string) {
	q, err := quarantine(a.opts.Spool, entry, why)
	if err != nil {
		log.Error("moving a result to the quarantine failed", "why", why, "err", err)
		return
	}
	log.Warn("a stopped agent's result is kept in the spool's quarantine", "why", why, "path", q)
}

func pendingEntries(des []os.DirEntry) []os.DirEntry {
	var out []os.DirEntry
	for _, d := range des {
		if d.IsDir() && d.Name()[0] != '.' {
			out = append(out, d)
		}
	}
	return out
}

// upload sends the blobs a result is waiting for (a missing_artifacts
// answer) from their files. An upload the coordinator refuses for good
// (the file changed under it, it is too large, nobody waits for it) is
// returned as an error, and the result is then abandoned.
func (a *Agent) upload(callCtx context.Context, client *protocol.Client, missing []string, files map[string]string) (tooLarge []string, err error) {
	for _, h := range missing {
		path, ok := files[h]
		if h == artifact.EmptyHash {
			// An empty log has no file (logArtifacts), here or in a
			// spool entry: a coordinator that lacks the empty blob gets
			// it from memory.
			cctx, cancel := context.WithTimeout(callCtx, a.callTimeout())
			_, err := client.PutArtifact(cctx, h, strings.NewReader(""), 0)
			cancel()
			a.note(err)
			if err != nil {
				return tooLarge, err
			}
			continue
		}
		if !ok {
			return tooLarge, fmt.Errorf("the coordinator asks for blob %s, which this result does not name", h)
		}
		f, fi, err := regularfile.Open(path) // a blob of the spool may be what another process put there
		if err != nil {
			return tooLarge, err
		}
		// An upload may take long; bound it by the blob's size at
		// 1 MiB/s, and at least the usual call timeout.
		cctx, cancel := context.WithTimeout(callCtx, max(a.callTimeout(), time.Duration(fi.Size()>>20)*time.Second))
		_, err = client.PutArtifact(cctx, h, f, fi.Size())
		cancel()
		f.Close()
		a.note(err)
		if protocol.StatusOf(err) == http.StatusRequestEntityTooLarge {
			tooLarge = append(tooLarge, h)
			continue
		}
		if err != nil {
			return tooLarge, err
		}
	}
	return tooLarge, nil
}

// hold records a granted lease (and, when it fits, a running attempt)
// and returns its attempt, or nil when the worker already holds that
// token. If the agent has already failed, the attempt is stopped before it
// starts.
func (a *Agent) hold(asg protocol.Assignment, fits bool) *attempt {
	at := newAttempt(asg, a.opts.WorkDir)
	if a.spool != nil {
		at.paths.pool = a.spool.pool
		at.paths.folders = a.folders
	}
	a.mu.Lock()
	if _, dup := a.attempts[asg.FencingToken]; dup {
		a.mu.Unlock()
		return nil
	}
	a.attempts[asg.FencingToken] = at
	if fits {
		a.running++
	}
	a.mu.Unlock()
	select {
	case <-a.fatalCh:
		at.stop("stopped: the agent is shutting down: " + a.fatalErr.Error())
	default:
	}
	return at
}

// postResult posts a result, retrying while the coordinator is unreachable
// until it answers or the agent gives up (callCtx cancelled on a fatal
// error). A lease the agent was told is gone is posted all the same: the
// coordinator decides.
func (a *Agent) postResult(callCtx context.Context, log *slog.Logger, token int64, req protocol.ResultRequest, files map[string]string) (protocol.ResultResponse, bool) {
	resp, err := a.deliver(callCtx, log, a.client, token, req, files, true)
	if err == nil {
		return resp, true
	}
	switch {
	case a.fatalAnswer(err, false):
	case callCtx.Err() != nil:
		log.Error("result not delivered: abandoning the lease", "err", err)
	default:
		log.Error("the coordinator refused the result: abandoning the lease", "err", err)
	}
	a.mu.Lock()
	a.abandoned = append(a.abandoned, token)
	a.mu.Unlock()
	return protocol.ResultResponse{}, false
}

// deliver posts a result with client until the coordinator decides,
// uploading the blobs it asks for from files (hash → file), and retrying
// while it cannot be reached (without limit when persist, else a few
// times). It returns the decision, or the error that ended the tries.
func (a *Agent) deliver(callCtx context.Context, log *slog.Logger, client *protocol.Client, token int64, req protocol.ResultRequest,
	files map[string]string, persist bool) (protocol.ResultResponse, error) {
	uploads := 0 // rounds of missing_artifacts answered; a coordinator that keeps asking is refusing
	refused := false
	for n := 0; ; n++ {
		cctx, cancel := context.WithTimeout(callCtx, a.callTimeout())
		resp, err := client.PostResult(cctx, token, req)
		cancel()
		a.note(err)
		var ae *protocol.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusBadRequest && !refused {
			// The coordinator cannot take this result as it is (an
			// output it does not expect, say). Report the attempt failed
			// with why, without artifacts, rather than abandon the lease:
			// an abandoned lease is handed back at no cost and would run
			// the same way forever.
			refused = true
			log.Warn("the coordinator refused the result; reporting the attempt failed", "err", err)
			req.Artifacts = nil
			fail(&req, "the coordinator refused the result: "+ae.Message)
			continue
		}
		if errors.As(err, &ae) && ae.Code == protocol.CodeMissingArtifacts && uploads < 3 {
			uploads++
			// Not a decision yet: send what the coordinator lacks, then
			// post again. A blob it holds already is never sent.
			log.Info("uploading artifacts the coordinator asked for", "blobs", len(ae.Missing))
			tooLarge, uerr := a.upload(callCtx, client, ae.Missing, files)
			for _, h := range tooLarge {
				// The coordinator will never take it (its cap is smaller
				// than the worker knew): leave it out, and the attempt
				// fails saying why, rather than never being decided.
				kept := req.Artifacts[:0]
				for _, ref := range req.Artifacts {
					if ref.SHA256 != h {
						kept = append(kept, ref)
						continue
					}
					fail(&req, fmt.Sprintf("%s %s is %s, more than the coordinator accepts (its max_artifact_size)", ref.Kind, ref.Name, artifact.FormatSize(ref.Size)))
				}
				req.Artifacts = kept
			}
			if uerr != nil {
				if reachFailure(uerr) && callCtx.Err() == nil {
					d := a.retry.delay(n)
					log.Warn("uploading artifacts failed; retrying", "err", uerr, "in", d)
					sleep(callCtx, d)
					continue
				}
				err = uerr
			} else {
				continue
			}
		}
		if err == nil {
			if resp.Decision == protocol.DecisionAccepted {
				log.Info("result accepted", "duplicate", resp.Duplicate)
			} else {
				log.Warn("result rejected", "decision", resp.Decision, "reason", resp.Reason, "duplicate", resp.Duplicate)
			}
			return resp, nil
		}
		if !reachFailure(err) || callCtx.Err() != nil || (!persist && n >= 4) {
			return protocol.ResultResponse{}, err
		}
		d := a.retry.delay(n)
		log.Warn("posting the result failed; retrying", "err", err, "in", d)
		sleep(callCtx, d)
	}
}

// heldTokens returns the fencing tokens of the leases the worker holds,
// sorted.
func (a *Agent) heldTokens() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	tokens := make([]int64, 0, len(a.attempts))
	for tok := range a.attempts {
		tokens = append(tokens, tok)
	}
	slices.Sort(tokens)
	return tokens
}

func (a *Agent) runningCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// stopAll asks every attempt to stop.
func (a *Agent) stopAll(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.attempts {
		at.stop(why)
	}
}

// waitIdle waits until no attempt is running, or d passes, or the agent
// fails; it reports whether the agent became idle.
func (a *Agent) waitIdle(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for a.runningCount() > 0 {
		select {
		case <-a.slotFreed:
		case <-deadline.C:
			return false
		case <-a.fatalCh:
			return false
		}
	}
	return true
}

// errStoppedBeforeRegistering: the agent was told to stop before it
// registered; Run returns nil then.
var errStoppedBeforeRegistering = errors.New("agent: stopped before registering")

// newRequestID returns a random id for one agent's registration.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// logConfinement says at start whether attempts are confined, and what an
// unconfined attempt can do.
func (a *Agent) logConfinement() {
	st := confine.Probe()
	switch {
	case a.opts.Unconfined:
		a.log.Warn("attempts are not confined (--unconfined): a task can read the work folder (the state, this worker's session) and signal this agent")
	case st.Confined && st.Limits != "":
		a.log.Info("attempts are confined", "by", st.Mechanism, "limits", st.Limits)
		if len(a.opts.HideFiles) > 0 {
			a.log.Warn("attempts can read the join file: without a mount namespace it cannot be hidden from them, and its credential registers workers; keep it where no task runs, or remove it once this worker joined (it rejoins with it after its apply ended)",
				"join_file", a.opts.HideFiles)
		}
	case st.Confined:
		a.log.Info("attempts are confined", "by", st.Mechanism)
	default:
		a.log.Warn("attempts are not confined", "why", st.Missing)
	}
}

// hiddenFolders are the folders a confined attempt must not reach: own,
// the work folder and the spool when outside it; and named, each folder
// the coordinator named (protocol.RegisterResponse.HideFolders: the apply's
// work folder) that is a folder here, absolute, not / and not one of own (a
// path it names that this machine does not have hides nothing).
func (a *Agent) hiddenFolders() (own, named []string) {
	own = []string{a.opts.WorkDir}
	if rel, err := filepath.Rel(a.opts.WorkDir, a.opts.Spool); err != nil || strings.HasPrefix(rel, "..") {
		own = append(own, a.opts.Spool)
	}
	for _, f := range a.reg.HideFolders {
		f = filepath.Clean(f)
		if !filepath.IsAbs(f) || f == "/" || slices.Contains(own, f) || slices.Contains(named, f) {
			continue
		}
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			named = append(named, f)
		}
	}
	return own, named
}

// holdsAsWritten reports whether folder dir, as written (its symbolic
// links not followed), is or holds one of folders.
func holdsAsWritten(dir string, folders []string) bool {
	return slices.ContainsFunc(folders, func(f string) bool { return folder.Holds(dir, f) })
}

// starter returns how an attempt's command is started: confined to its own
// attempt folder of the work folder (and spool) where this machine can,
// else as it is. An attempt that this machine cannot confine (its dir
// holds the work folder, and there is no mount namespace to hide it by)
// runs as it is, and the agent says so once per dir.
func (a *Agent) starter(paths attemptPaths) startFunc {
	if a.opts.Unconfined || !confine.Probe().Confined {
		return startPlain
	}
	own, named := a.hiddenFolders()
	p := confine.Policy{Hide: append(slices.Clip(own), named...), Show: []string{paths.scratch}, ReadOnly: []string{"/sys", "/proc/sys"}, HideFiles: a.opts.HideFiles}
	return func(cmd *exec.Cmd, started func(pid int)) (func(), error) {
		p := p
		p.Started = started // a confined command has no parent-death signal
		release, err := confine.Start(cmd, p)
		switch {
		case !errors.Is(err, confine.ErrUnavailable):
			return release, err
		case holdsAsWritten(cmd.Dir, named):
			// The apply's work folder, on its machine: no plan warned
			// that a joined worker would run this task unconfined.
			return nil, &fs.PathError{Op: "confine", Path: cmd.Dir, Err: fmt.Errorf("holds the apply's work folder, and this worker cannot confine an attempt there (no CAP_SYS_ADMIN): "+
				"run the worker as root, keep the apply's state outside the tasks' dirs, or start the worker with --unconfined: %w", err)}
		case !holdsAsWritten(cmd.Dir, own):
			// Only through a symbolic link (one a task may have made since
			// the plan): no plan said this task runs unconfined.
			return nil, &fs.PathError{Op: "confine", Path: cmd.Dir, Err: fmt.Errorf("leads by a symbolic link to a folder that holds the work folder, so the attempt cannot be confined here: %w", err)}
		default:
			if _, warned := a.unconfinedDirs.LoadOrStore(cmd.Dir, true); !warned {
				a.log.Warn("attempts in this dir are not confined: a task can read the work folder (the state, this worker's session)", "dir", cmd.Dir, "why", err)
			}
			return startPlain(cmd, started)
		}
	}
}
