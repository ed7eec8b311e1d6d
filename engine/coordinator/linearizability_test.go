package coordinator_test

// TestLinearizability runs simulated workers against one coordinator over
// loopback HTTP, records every protocol call they make, and checks the
// history against linModel (linearizability_model_test.go) with porcupine.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// linConfig shapes one simulated run. Durations are of the fake clock,
// which moves one step after every recorded call.
type linConfig struct {
	Seed    uint64
	Workers int // worker goroutines; each registers again after it lost its session
	Tasks   int
	Calls   int // the run stops after about this many calls
	// Revoke and Restart: once during the run, at a random point,
	// RevokeLeases (a takeover), and a restart of the coordinator on the
	// same state file.
	Revoke, Restart bool
	// Vanish is the chance per loop that a worker holding leases stops
	// heartbeating; it posts their results after they expired.
	Vanish float64
	// Misbehave is the chance per loop of a result with a wrong worker,
	// token or attempt, or for an ended lease, and of forgetting a lease.
	Misbehave float64
	// AtomicHeartbeats checks heartbeats as one step (renewal and the
	// release of unreported leases together), as the coordinator makes
	// them (one write of the group commit); false allows two steps, as a
	// coordinator that committed them apart would.
	AtomicHeartbeats bool
	// Kills, when > 0, runs the coordinator in a child process on the
	// real clock and kills it (SIGKILL) that many times while calls are
	// in flight (linearizability_crash_test.go).
	Kills int
	// Prefetch is the chance that a result asks for a prefetched lease
	// (docs/design.md §3, prefetched leases); a worker then starts the
	// one it holds with its next result. Not with Kills: a result of
	// unknown outcome would have to grant any task, started or not.
	Prefetch float64
}

const (
	linClockStep = 10 * time.Millisecond // the fake clock's step
	linTTL       = 400 * time.Millisecond
	linInterval  = 100 * time.Millisecond
	linBackoff   = 30 * time.Millisecond
	linMaxBack   = 120 * time.Millisecond
	linCapacity  = 2
)

// linCall is one recorded protocol call (or revoke, restart).
type linCall struct {
	kind         linKind // linGrant: a claim
	client       int
	worker       string
	epoch        int
	call, ret    int64 // porcupine's clock: ns, monotonic (of the real clock with a child process)
	from, to     int64 // the coordinator's clock: ms since its start
	unauthorized bool
	unknown      bool // the coordinator was killed before it answered

	asg                 []protocol.Assignment // claim
	reported, cancelled []int64               // heartbeat
	token               int64                 // result
	req                 protocol.ResultRequest
	res                 protocol.ResultResponse
	task                string              // lookup
	lease               *protocol.LeaseInfo // lookup
	expired             []protocol.LeaseInfo
}

// linGate serves the current coordinator's handler. A restart takes it
// exclusively: calls in flight finish on the old coordinator, later ones
// reach the new one.
type linGate struct {
	mu sync.RWMutex
	h  http.Handler
}

func (g *linGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	g.h.ServeHTTP(w, r)
}

// linCluster is one run: a coordinator on a state file behind linGate,
// the fake clock, and the recorded calls.
type linCluster struct {
	t     testing.TB
	cfg   linConfig
	path  string
	pools []coordinator.PoolRuntime
	tasks []coordinator.TaskRuntime
	confs map[string]linTaskConf
	clock *fakeClock
	base  time.Time
	gate  linGate
	srv   *httptest.Server
	http  *http.Client

	// regMu: registrations take it shared, revokes and restarts
	// exclusively, so every worker knows its epoch.
	regMu sync.RWMutex
	epoch int

	n atomic.Int64 // calls made

	mu      sync.Mutex // guards the fields below
	calls   []linCall
	c       *coordinator.Coordinator
	store   *state.Store
	op      *protocol.Client
	stopRun context.CancelFunc
	runDone chan struct{}
	granted []linGranted
	errs    []string

	// crash is set when the coordinator runs in a child process
	// (cfg.Kills > 0; linearizability_crash_test.go).
	crash *linCrash
}

type linGranted struct {
	a      protocol.Assignment
	worker string
}

func newLinCluster(t testing.TB, cfg linConfig, dir string) *linCluster {
	lc := &linCluster{t: t, cfg: cfg, path: filepath.Join(dir, "state.db"), clock: &fakeClock{t: ct0}, base: time.Now(),
		confs: map[string]linTaskConf{}}
	lc.pools = []coordinator.PoolRuntime{{Name: "p", Capacity: linCapacity, HeartbeatInterval: linInterval, TTL: linTTL, Labels: map[string]string{}}}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	for i := range cfg.Tasks {
		rt := rtTask(fmt.Sprintf("t%02d", i))
		rt.Retry = coordinator.RetryPolicy{MaxAttempts: 2 + i%3, MaxLost: 3, Backoff: linBackoff, MaxBackoff: linMaxBack}
		if i%4 == 3 {
			rt.Retry.MaxLost = 1 // fails on its first lost attempt
		}
		rt.Timeout, rt.LeaseGrace = time.Hour, time.Minute
		if i%5 == 4 {
			// Heartbeats cannot renew past timeout + grace.
			rt.Timeout, rt.LeaseGrace = 900*time.Millisecond, 100*time.Millisecond
		}
		lc.tasks = append(lc.tasks, rt)
		lc.confs[rt.Address] = linTaskConf{MaxAttempts: rt.Retry.MaxAttempts, MaxLost: rt.Retry.MaxLost,
			TTL: ms(linTTL), Limit: ms(rt.Timeout + rt.LeaseGrace), Interval: ms(linInterval),
			Backoff: ms(linBackoff), MaxBackoff: ms(linMaxBack), Step: ms(linClockStep)}
	}
	if cfg.Kills > 0 {
		startLinCrash(lc)
		return lc
	}
	lc.open(true)
	lc.gate.h = httpapi.New(lc.c)
	lc.srv = httptest.NewServer(&lc.gate)
	lc.http = lc.srv.Client()
	lc.op = protocol.NewClient(lc.srv.URL, lc.c.OperatorCredential(), lc.http)
	return lc
}

// open opens the state file and starts a coordinator on it (Run sweeping
// every 2ms), recording the pools and tasks first when fresh.
func (lc *linCluster) open(fresh bool) {
	ctx := context.Background()
	s, err := state.Open(ctx, lc.path)
	if err != nil {
		lc.t.Fatal(err)
	}
	if fresh {
		upsertAll(lc.t, s, lc.pools, lc.tasks, lc.clock.Now())
	}
	c, err := newLinCoordinator(s, lc.pools, lc.tasks, lc.clock.Now)
	if err != nil {
		lc.t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(runCtx)
	}()
	lc.mu.Lock()
	lc.c, lc.store, lc.stopRun, lc.runDone = c, s, cancel, done
	if lc.srv != nil {
		lc.op = protocol.NewClient(lc.srv.URL, c.OperatorCredential(), lc.http)
	}
	lc.mu.Unlock()
}

// newLinCoordinator is the coordinator of a history, in this process or
// in a child (TestHelperLinCoordinator): Run sweeps every 2 ms.
func newLinCoordinator(s *state.Store, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime, now func() time.Time) (*coordinator.Coordinator, error) {
	return coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, Now: now,
		SweepInterval: 2 * time.Millisecond, MaxClaimWait: 20 * time.Millisecond})
}

// issueLinLaunch issues the launch credential of worker seq of pool, as
// apply does for each worker it launches.
func issueLinLaunch(ctx context.Context, c *coordinator.Coordinator, pool string, seq int) (string, error) {
	return c.IssueLaunch(ctx, pool, seq, "local", 365*24*time.Hour)
}

// linRevokeReason is the reason of a history's revoke.
const linRevokeReason = "the apply lock was taken over"

// shut stops Run and closes the state, as a crash of the coordinator
// between two calls would leave it.
func (lc *linCluster) shut() {
	lc.mu.Lock()
	stop, done, s, c := lc.stopRun, lc.runDone, lc.store, lc.c
	lc.mu.Unlock()
	stop()
	<-done
	if err := c.Err(); err != nil {
		lc.errorf("coordinator failed: %v", err)
	}
	if err := s.Close(); err != nil {
		lc.errorf("closing the state: %v", err)
	}
}

func (lc *linCluster) close() {
	lc.srv.Close()
	if lc.crash != nil {
		lc.crash.close()
		return
	}
	lc.shut()
}

func (lc *linCluster) coordinator() *coordinator.Coordinator {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.c
}

// issueLaunch issues the launch credential of a worker of pool p, as
// apply does for each worker it launches.
func (lc *linCluster) issueLaunch(ctx context.Context) (string, error) {
	seq := int(launchSeq.Add(1))
	if lc.crash != nil {
		return lc.crash.issueLaunch(ctx, seq)
	}
	return issueLinLaunch(ctx, lc.coordinator(), "p", seq)
}

// finished reports whether every task has a final status.
func (lc *linCluster) finished() bool {
	if lc.crash != nil {
		return lc.crash.finished()
	}
	return lc.coordinator().Finished()
}

func (lc *linCluster) operator() *protocol.Client {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.op
}

func (lc *linCluster) errorf(format string, args ...any) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.errs = append(lc.errs, fmt.Sprintf(format, args...))
}

// fakeMS is t on the fake clock, in ms since its start.
func fakeMS(t time.Time) int64 { return t.Sub(ct0).Milliseconds() }

// do makes one call: it reads the clocks just before and just after it
// (stamp), records the call (a 401 as unauthorized, one cut by a kill of
// the coordinator as unknown; any other error is a failure of the run and
// is not recorded), and moves the fake clock one step (with a child
// process, waits one step: linCrash.pace).
func (lc *linCluster) do(rec linCall, fn func(rec *linCall) error) error {
	rec.from, rec.call = lc.stamp()
	err := fn(&rec)
	rec.to, rec.ret = lc.stamp()
	lc.n.Add(1)
	switch {
	case err == nil, errors.Is(err, errSkipCall):
	case protocol.StatusOf(err) == http.StatusUnauthorized:
		rec.unauthorized = true
	case lc.crash != nil && lc.crash.cut(&rec, err):
	default:
		lc.errorf("%s by %q: %v", rec.kind, rec.worker, err)
	}
	if err == nil || rec.unauthorized || rec.unknown {
		lc.mu.Lock()
		lc.calls = append(lc.calls, rec)
		lc.mu.Unlock()
	}
	if lc.crash != nil {
		lc.crash.pace()
	} else {
		lc.clock.Advance(linClockStep)
	}
	return err
}

// stamp reads the coordinator's clock in ms since its start (the fake
// one, or the real one of a child process) and, after it, porcupine's
// clock in ns.
func (lc *linCluster) stamp() (ms, ns int64) {
	if lc.crash != nil {
		return lc.crash.stamp()
	}
	return fakeMS(lc.clock.Now()), time.Since(lc.base).Nanoseconds()
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// revoke calls RevokeLeases, as a takeover of the apply lock does.
func (lc *linCluster) revoke() {
	lc.regMu.Lock()
	defer lc.regMu.Unlock()
	c := lc.coordinator()
	_ = lc.do(linCall{kind: linRevoke, client: lc.cfg.Workers + 1}, func(*linCall) error {
		if lc.crash != nil {
			return lc.crash.control(http.MethodPost, "revoke", nil)
		}
		_, err := c.RevokeLeases(context.Background(), linRevokeReason)
		return err
	})
	lc.epoch++
}

// restart stops the coordinator between two calls and opens a new one on
// the same state file.
func (lc *linCluster) restart() {
	lc.regMu.Lock()
	defer lc.regMu.Unlock()
	_ = lc.do(linCall{kind: linRestart, client: lc.cfg.Workers + 1}, func(*linCall) error {
		lc.gate.mu.Lock()
		defer lc.gate.mu.Unlock()
		if lc.crash != nil {
			return lc.crash.replace()
		}
		lc.shut()
		lc.open(false)
		lc.gate.h = httpapi.New(lc.coordinator())
		return nil
	})
	lc.epoch++
}

// linWorker is a simulated agent.
type linWorker struct {
	lc       *linCluster
	client   int
	rng      *rand.Rand
	api      *protocol.Client
	id       string
	epoch    int
	held     map[int64]*linHeld
	ended    []protocol.Assignment // own leases it no longer holds
	lastHB   int64                 // fake ms of its last heartbeat (or registration)
	renewed  int64                 // fake ms by which its leases were last granted or renewed: each expires by renewed + ttl
	vanished bool
	edge     bool // posts its late results around their expiry, not well after
	idle     bool // its last claim was answered with no assignments
	n        int
}

type linHeld struct {
	a      protocol.Assignment
	doneAt int64 // fake ms at which the attempt ends
	cancel bool  // a heartbeat (or a result, of its start) answered it in cancel_leases
	// unstarted: a prefetched lease whose start the worker has not
	// reported; its own result reports it too.
	unstarted bool
}

func (w *linWorker) now() int64 {
	ms, _ := w.lc.stamp()
	return ms
}

func (w *linWorker) register() {
	lc := w.lc
	lc.regMu.RLock()
	defer lc.regMu.RUnlock()
	ctx, cancel := callCtx()
	defer cancel()
	cred, err := lc.issueLaunch(ctx)
	if err != nil {
		lc.errorf("issue launch: %v", err)
		return
	}
	api := protocol.NewClient(lc.srv.URL, cred, lc.http)
	reg, err := api.Register(ctx, protocol.RegisterRequest{Host: "lin", PID: w.client, Version: "test"})
	if err != nil {
		lc.errorf("register: %v", err)
		return
	}
	w.api, w.id, w.epoch = api.WithToken(reg.SessionToken), reg.WorkerID, lc.epoch
	w.held, w.ended, w.vanished = map[int64]*linHeld{}, nil, false
	w.lastHB, w.renewed = w.now(), 0
}

// lost drops the worker's identity after a 401: its leases are gone.
func (w *linWorker) lost(err error) bool {
	if protocol.StatusOf(err) != http.StatusUnauthorized {
		return false
	}
	w.api = nil
	return true
}

func (w *linWorker) run(stop *atomic.Bool) {
	ttl := linTTL.Milliseconds()
	for !stop.Load() {
		if w.api == nil {
			w.register()
			if w.api == nil {
				return
			}
			continue
		}
		now := w.now()
		if w.vanished {
			// Silent until every lease it holds is past its expiry (or,
			// edge, about to be), then it posts their results late and
			// comes back, or goes.
			wait := w.renewed + ttl + 2*linClockStep.Milliseconds()
			if w.edge {
				wait = w.renewed + ttl - 2*linClockStep.Milliseconds()
			}
			if now <= wait {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			for _, h := range w.sortedHeld() {
				w.finish(h, "")
				if w.api == nil {
					break
				}
			}
			if w.api != nil && w.rng.IntN(2) == 0 {
				w.vanished = false // its next heartbeat makes it active again
			} else {
				w.api = nil
			}
			continue
		}
		hbEvery := linInterval.Milliseconds() * int64(5+w.rng.IntN(6)) / 10
		var due *linHeld
		for _, h := range w.sortedHeld() {
			if h.cancel || h.doneAt <= now {
				due = h
				break
			}
		}
		switch r := w.rng.Float64(); {
		case now-w.lastHB >= hbEvery:
			w.heartbeat()
		case due != nil:
			w.finish(due, w.class())
		case len(w.held) < linCapacity && (r < 0.2 || !w.idle && r < 0.6):
			w.claim()
		case r < 0.6+w.lc.cfg.Misbehave:
			w.misbehave()
		default:
			time.Sleep(200 * time.Microsecond)
		}
		if w.api != nil && len(w.held) > 0 && w.rng.Float64() < w.lc.cfg.Vanish {
			w.vanished, w.edge = true, w.rng.IntN(2) == 0
		}
	}
}

func (w *linWorker) sortedHeld() []*linHeld {
	hs := make([]*linHeld, 0, len(w.held))
	for _, h := range w.held {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].a.FencingToken < hs[j].a.FencingToken })
	return hs
}

// class picks a result's failure class: mostly success, some failures,
// a few lost and refused attempts.
func (w *linWorker) class() string {
	switch r := w.rng.Float64(); {
	case r < 0.5:
		return ""
	case r < 0.8:
		return string(state.FailureClassFailure)
	case r < 0.95:
		return string(state.FailureClassLost)
	}
	return string(state.FailureClassRefused)
}

func (w *linWorker) heartbeat() {
	var tokens []int64
	for _, h := range w.sortedHeld() {
		tokens = append(tokens, h.a.FencingToken)
	}
	ctx, cancel := callCtx()
	defer cancel()
	var resp protocol.HeartbeatResponse
	err := w.lc.do(linCall{kind: linHeartbeat, client: w.client, worker: w.id, epoch: w.epoch, reported: tokens}, func(rec *linCall) error {
		var err error
		resp, err = w.api.Heartbeat(ctx, w.id, protocol.HeartbeatRequest{Leases: tokens})
		rec.cancelled = resp.CancelLeases
		return err
	})
	if w.lost(err) || err != nil {
		return
	}
	w.lastHB = w.now()
	w.renewed = max(w.renewed, w.lastHB)
	for _, tok := range resp.CancelLeases {
		if h := w.held[tok]; h != nil {
			h.cancel = true
		} else {
			w.lc.errorf("heartbeat of %s: cancel_leases names %d, which it did not report", w.id, tok)
		}
	}
}

func (w *linWorker) claim() {
	ctx, cancel := callCtx()
	defer cancel()
	var wait int64
	if w.rng.IntN(4) == 0 {
		wait = 5
	}
	var resp protocol.ClaimResponse
	err := w.lc.do(linCall{kind: linGrant, client: w.client, worker: w.id, epoch: w.epoch}, func(rec *linCall) error {
		var err error
		resp, err = w.api.Claim(ctx, w.id, protocol.ClaimRequest{Max: max(1, linCapacity-w.startedHeld()), WaitMS: wait})
		rec.asg = resp.Assignments
		return err
	})
	if w.lost(err) || err != nil {
		return
	}
	w.idle = len(resp.Assignments) == 0
	if len(resp.Assignments) > 0 {
		w.renewed = max(w.renewed, w.now())
	}
	w.hold(resp.Assignments)
}

// hold takes the assignments of a claim's or a result's answer.
func (w *linWorker) hold(asg []protocol.Assignment) {
	now, ttl := w.now(), linTTL.Milliseconds()
	for _, a := range asg {
		// Most attempts end within a ttl, some run for several (their
		// leases live on heartbeats, or reach timeout + grace).
		d := w.rng.Int64N(ttl)
		if w.rng.IntN(4) == 0 {
			d = ttl + w.rng.Int64N(3*ttl)
		}
		w.held[a.FencingToken] = &linHeld{a: a, doneAt: now + d, unstarted: a.Prefetched}
		w.lc.mu.Lock()
		w.lc.granted = append(w.lc.granted, linGranted{a: a, worker: w.id})
		w.lc.mu.Unlock()
	}
}

// startedHeld counts the held leases that are not unstarted.
func (w *linWorker) startedHeld() int {
	n := 0
	for _, h := range w.held {
		if !h.unstarted {
			n++
		}
	}
	return n
}

// finish posts the result of a held lease, as the agent does (key
// <worker>-<token>), sometimes twice in a row or twice at once.
func (w *linWorker) finish(h *linHeld, class string) {
	delete(w.held, h.a.FencingToken)
	w.ended = append(w.ended, h.a)
	req := w.result(h.a, h.a.Attempt, fmt.Sprintf("%s-%d", w.id, h.a.FencingToken), class)
	if w.lc.cfg.Prefetch > 0 {
		// As the agent does: the attempt that ends starts the prefetched
		// one held, reported with this result, which asks for the next.
		for _, o := range w.sortedHeld() {
			if o.unstarted {
				o.unstarted = false
				o.doneAt = w.now() + w.rng.Int64N(linTTL.Milliseconds())
				req.Started = []int64{o.a.FencingToken}
				break
			}
		}
		if w.rng.Float64() < w.lc.cfg.Prefetch {
			req.Prefetch = 1
		}
	}
	switch r := w.rng.Float64(); {
	case r < 0.1:
		api, rec := w.api, linCall{kind: linResult, client: w.client + 100, worker: w.id, epoch: w.epoch}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.lc.postAs(api, rec, h.a.FencingToken, req, nil) // what it grants, the worker does not hold
		}()
		w.post(h.a.FencingToken, req)
		wg.Wait()
	case r < 0.3:
		if w.post(h.a.FencingToken, req) {
			w.post(h.a.FencingToken, req)
		}
	default:
		w.post(h.a.FencingToken, req)
	}
}

func (w *linWorker) result(a protocol.Assignment, attempt int, key, class string) protocol.ResultRequest {
	var code *int
	if class == "" || class == string(state.FailureClassFailure) {
		c := 0
		if class != "" {
			c = 1
		}
		code = &c
	}
	return protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: attempt, IdempotencyKey: key,
		ExitCode: code, FailureClass: class, StartedAt: ct0, EndedAt: ct0}
}

// post posts req for token and reports whether it was answered; it takes
// the leases the answer granted and the starts it refused.
func (w *linWorker) post(token int64, req protocol.ResultRequest) bool {
	var resp protocol.ResultResponse
	err := w.lc.postAs(w.api, linCall{kind: linResult, client: w.client, worker: w.id, epoch: w.epoch}, token, req, &resp)
	w.lost(err)
	if err != nil {
		return false
	}
	w.hold(resp.Assignments)
	for _, tok := range resp.CancelLeases {
		if h := w.held[tok]; h != nil {
			h.cancel = true
		}
	}
	return true
}

// postAs posts req for token with api, recorded as rec, its answer in
// resp when not nil.
func (lc *linCluster) postAs(api *protocol.Client, rec linCall, token int64, req protocol.ResultRequest, resp *protocol.ResultResponse) error {
	ctx, cancel := callCtx()
	defer cancel()
	rec.token, rec.req = token, req
	return lc.do(rec, func(rec *linCall) error {
		var err error
		rec.res, err = api.PostResult(ctx, token, req)
		if resp != nil {
			*resp = rec.res
		}
		return err
	})
}

// misbehave posts a result the coordinator must reject — another
// worker's lease, a token that is not the task's, a wrong attempt, a
// lease it no longer holds — or forgets a lease (stops reporting it and
// never posts it).
func (w *linWorker) misbehave() {
	w.n++
	key := func(kind string) string { return fmt.Sprintf("%s-%s-%d", kind, w.id, w.n) }
	held := w.sortedHeld()
	switch w.rng.IntN(5) {
	case 0: // another worker's lease
		w.lc.mu.Lock()
		var others []linGranted
		for _, g := range w.lc.granted {
			if g.worker != w.id {
				others = append(others, g)
			}
		}
		w.lc.mu.Unlock()
		if len(others) > 0 {
			g := others[w.rng.IntN(len(others))]
			w.post(g.a.FencingToken, w.result(g.a, g.a.Attempt, key("ww"), ""))
		}
	case 1: // a token that is not the task's: another task's, or none
		if len(held) == 0 {
			return
		}
		h := held[w.rng.IntN(len(held))]
		token := int64(1)<<40 + int64(w.n)
		w.lc.mu.Lock()
		for _, g := range w.lc.granted {
			if g.a.Task != h.a.Task && w.rng.IntN(3) == 0 {
				token = g.a.FencingToken
				break
			}
		}
		w.lc.mu.Unlock()
		w.post(token, w.result(h.a, h.a.Attempt, key("wt"), ""))
	case 2: // the right token with another attempt
		if len(held) == 0 {
			return
		}
		h := held[w.rng.IntN(len(held))]
		w.post(h.a.FencingToken, w.result(h.a, h.a.Attempt+7, key("wa"), ""))
	case 3: // a lease it no longer holds, with a new key
		if len(w.ended) == 0 {
			return
		}
		a := w.ended[w.rng.IntN(len(w.ended))]
		w.post(a.FencingToken, w.result(a, a.Attempt, key("old"), ""))
	case 4: // forget a lease: the next heartbeats do not report it
		if len(held) == 0 {
			return
		}
		h := held[w.rng.IntN(len(held))]
		delete(w.held, h.a.FencingToken)
		w.ended = append(w.ended, h.a)
	}
}

// monitor looks up the latest lease of random tasks and now and then
// sweeps, through the operator routes.
func (lc *linCluster) monitor(stop *atomic.Bool, rng *rand.Rand) {
	client := lc.cfg.Workers
	for !stop.Load() {
		op := lc.operator()
		ctx, cancel := callCtx()
		if rng.IntN(10) == 0 {
			var resp protocol.SweepResponse
			_ = lc.do(linCall{kind: linSweep, client: client}, func(rec *linCall) error {
				var err error
				resp, err = op.Sweep(ctx)
				rec.expired = resp.Expired
				return lc.operatorErr(err)
			})
		} else {
			task := lc.tasks[rng.IntN(len(lc.tasks))].Address
			_ = lc.do(linCall{kind: linLookup, client: client, task: task}, func(rec *linCall) error {
				resp, err := op.Lease(ctx, task)
				rec.lease = resp.Lease
				return lc.operatorErr(err)
			})
		}
		cancel()
		time.Sleep(time.Duration(2000+rng.IntN(4000)) * time.Microsecond)
	}
}

// operatorErr turns the 401 of an operator call that reached a restarted
// coordinator with the old credential into a call that did not happen.
func (lc *linCluster) operatorErr(err error) error {
	if protocol.StatusOf(err) == http.StatusUnauthorized {
		return errSkipCall
	}
	return err
}

var errSkipCall = errors.New("not a call of the history")

// linRun is one checked history.
type linRun struct {
	Seed             uint64
	Calls, Ops       int
	Result           porcupine.CheckResult
	Check            time.Duration
	Accepted, Expiry int // accepted results; results and heartbeats whose call spanned an expiry
	Errors           []string
	// Counts of the calls by kind and answer, e.g. "result rejected
	// stale_token", "claim 1 assignments", "heartbeat 401".
	Counts  map[string]int
	History []porcupine.Operation
	Info    porcupine.LinearizationInfo
	// TwoStep is, for a history checked with atomic heartbeats that is
	// not linearizable, the result with the coordinator's two-step ones.
	TwoStep porcupine.CheckResult
	// Kills of the coordinator's child process, the calls they cut (of
	// unknown outcome), and the leases in the state whose grant no answer
	// showed.
	Kills, Unknown, Unseen int
}

// runLinHistory runs one simulated history with cfg and checks it.
func runLinHistory(t testing.TB, cfg linConfig, dir string, timeout time.Duration) linRun {
	lc := newLinCluster(t, cfg, dir)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		w := &linWorker{lc: lc, client: i, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(&stop)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		lc.monitor(&stop, rand.New(rand.NewPCG(cfg.Seed, 1000)))
	}()
	rng := rand.New(rand.NewPCG(cfg.Seed, 2000))
	revokeAt, restartAt := int64(-1), int64(-1)
	if cfg.Revoke {
		revokeAt = int64(cfg.Calls/5 + rng.IntN(cfg.Calls/2))
	}
	if cfg.Restart {
		restartAt = int64(cfg.Calls/5 + rng.IntN(cfg.Calls/2))
	}
	finishedAt := int64(-1)
	for {
		n := lc.n.Load()
		switch {
		case revokeAt >= 0 && n >= revokeAt:
			lc.revoke()
			revokeAt = -1
		case restartAt >= 0 && n >= restartAt:
			lc.restart()
			restartAt = -1
		}
		if finishedAt < 0 && lc.finished() {
			finishedAt = n
		}
		lc.mu.Lock()
		failed := len(lc.errs) > 0
		lc.mu.Unlock()
		// Stop at the budget, or a while after every task finished
		// (so that vanished workers post late), or at the first error.
		if n >= int64(cfg.Calls) || (finishedAt >= 0 && n >= finishedAt+int64(4*cfg.Workers)+40 && revokeAt < 0 && restartAt < 0) || failed {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	lc.close()

	run := linRun{Seed: cfg.Seed, Calls: len(lc.calls), Errors: lc.errs}
	if lc.crash != nil {
		run.Kills, run.Unknown, run.Unseen = lc.crash.counts()
	}
	run.History = linOperations(lc.calls, lc.confs, cfg.AtomicHeartbeats)
	run.Ops = len(run.History)
	for _, c := range lc.calls {
		if c.kind == linResult && c.res.Decision == protocol.DecisionAccepted && !c.res.Duplicate {
			run.Accepted++
		}
	}
	run.Expiry = spannedExpiries(lc.calls)
	run.Counts = countCalls(lc.calls)
	start := time.Now()
	run.Result = porcupine.CheckOperationsTimeout(linModel, run.History, timeout)
	run.Check = time.Since(start)
	if run.Result == porcupine.Illegal {
		// Again, keeping what porcupine's visualization shows.
		_, run.Info = porcupine.CheckOperationsVerbose(linModel, run.History, timeout)
	}
	if cfg.AtomicHeartbeats && run.Result == porcupine.Illegal {
		run.TwoStep = porcupine.CheckOperationsTimeout(linModel, linOperations(lc.calls, lc.confs, false), timeout)
	}
	return run
}

// countCalls counts calls by kind and answer.
func countCalls(calls []linCall) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		k := c.kind.String()
		switch {
		case c.unauthorized:
			k += " 401"
		case c.unknown:
			k += " unknown"
		case c.kind == linGrant:
			k = fmt.Sprintf("claim %d assignments", len(c.asg))
		case c.kind == linResult:
			k += " " + c.res.Decision + " " + c.res.Reason
			if c.res.Duplicate {
				k += " duplicate"
			}
			for _, a := range c.res.Assignments {
				if a.Prefetched {
					n["result granted prefetched"]++
				} else {
					n["result granted started"]++
				}
			}
			n["start reported"] += len(c.req.Started)
			n["start refused"] += len(c.res.CancelLeases)
		case c.kind == linHeartbeat && len(c.cancelled) > 0:
			k += " cancel"
		case c.kind == linSweep && len(c.expired) > 0:
			k += " expired"
		}
		n[k]++
	}
	return n
}

// spannedExpiries counts the results and heartbeats whose call spanned
// the last expiry of their lease seen before the call (by its grant or a
// lookup): calls the model had to judge both ways.
func spannedExpiries(calls []linCall) int {
	type seen struct {
		at, expires int64
	}
	obs := map[int64][]seen{}
	for _, c := range calls {
		for _, a := range c.asg {
			obs[a.FencingToken] = append(obs[a.FencingToken], seen{c.ret, fakeMS(a.ExpiresAt)})
		}
		if c.lease != nil {
			obs[c.lease.FencingToken] = append(obs[c.lease.FencingToken], seen{c.ret, fakeMS(c.lease.ExpiresAt)})
		}
	}
	n := 0
	for _, c := range calls {
		var toks []int64
		switch c.kind {
		case linResult:
			toks = []int64{c.token}
		case linHeartbeat:
			toks = c.reported
		}
		for _, tok := range toks {
			last := seen{at: -1}
			for _, o := range obs[tok] {
				if o.at < c.call && o.at > last.at {
					last = o
				}
			}
			if last.at >= 0 && c.from < last.expires && last.expires <= c.to {
				n++
			}
		}
	}
	return n
}

// linOperations projects the recorded calls onto the model's partitions:
// a claim's assignments onto their tasks and the token counter (one of
// unknown outcome onto every task, and not the counter); a heartbeat onto
// each task of which its worker may hold a lease during the call (see
// linHolding), with the tokens of that task it reported and
// got cancelled, and, when it may release one it did not report, its
// second step (linRelease; with atomic, the heartbeat releases in its own
// step); a result onto the task it names; a lookup onto its task; sweeps,
// revokes and restarts onto every task.
func linOperations(calls []linCall, confs map[string]linTaskConf, atomic bool) []porcupine.Operation {
	tasks := make([]string, 0, len(confs))
	for a := range confs {
		tasks = append(tasks, a)
	}
	slices.Sort(tasks)
	taskOf := map[int64]string{}
	for _, c := range calls {
		for _, a := range c.granted() {
			taskOf[a.FencingToken] = a.Task
		}
	}
	holding := linHolding(calls)
	of := func(tokens []int64, task string) []int64 {
		var out []int64
		for _, tok := range tokens {
			if taskOf[tok] == task {
				out = append(out, tok)
			}
		}
		return out
	}
	var ops []porcupine.Operation
	add := func(c linCall, in linInput, out linOutput) {
		if in.Part != linTokens {
			in.Conf = confs[in.Part]
		}
		in.Worker, in.Epoch, in.From, in.To = c.worker, c.epoch, c.from, c.to
		out.Unauthorized, out.Unknown = c.unauthorized, c.unknown
		ops = append(ops, porcupine.Operation{ClientId: c.client, Input: in, Call: c.call, Output: out, Return: c.ret})
	}
	for _, c := range calls {
		switch c.kind {
		case linGrant:
			if c.unknown {
				// Its worker never learnt what it was granted: maybe a
				// lease of any task, with a token nobody saw.
				for _, task := range tasks {
					add(c, linInput{Part: task, Kind: linGrant}, linOutput{})
				}
			}
			for _, a := range c.asg {
				add(c, linInput{Part: a.Task, Kind: linGrant, Token: a.FencingToken, Attempt: a.Attempt, ExpiresAt: fakeMS(a.ExpiresAt)}, linOutput{})
				add(c, linInput{Part: linTokens, Kind: linGrant, Token: a.FencingToken}, linOutput{})
			}
		case linHeartbeat:
			for _, task := range tasks {
				var may, unreported bool
				for _, h := range holding[c.worker][task] {
					if h.from <= c.ret && c.call <= h.to {
						may = true
						unreported = unreported || !slices.Contains(c.reported, h.token)
					}
				}
				if !may {
					continue
				}
				in := linInput{Part: task, Kind: linHeartbeat, Reported: of(c.reported, task), Release: unreported && !c.unauthorized, Atomic: atomic}
				add(c, in, linOutput{Cancelled: of(c.cancelled, task)})
				if in.Release && !atomic {
					in.Kind = linRelease
					add(c, in, linOutput{})
				}
			}
		case linResult:
			// In the write's order: the starts it reports, the result,
			// the leases it grants.
			for _, tok := range c.req.Started {
				if task, ok := taskOf[tok]; ok {
					var cancelled []int64
					if slices.Contains(c.res.CancelLeases, tok) {
						cancelled = []int64{tok}
					}
					add(c, linInput{Part: task, Kind: linStart, Token: tok}, linOutput{Cancelled: cancelled})
				}
			}
			add(c, linInput{Part: c.req.Task, Kind: linResult, Token: c.token, Attempt: c.req.Attempt, Key: c.req.IdempotencyKey, Class: c.req.FailureClass},
				linOutput{Decision: c.res.Decision, Reason: c.res.Reason, Duplicate: c.res.Duplicate})
			for _, a := range c.res.Assignments {
				add(c, linInput{Part: a.Task, Kind: linGrant, Token: a.FencingToken, Attempt: a.Attempt, ExpiresAt: fakeMS(a.ExpiresAt), Prefetched: a.Prefetched}, linOutput{})
				add(c, linInput{Part: linTokens, Kind: linGrant, Token: a.FencingToken}, linOutput{})
			}
		case linLookup:
			var out linOutput
			if l := c.lease; l != nil {
				out.Lease = &linLeaseView{Token: l.FencingToken, Worker: l.WorkerID, Attempt: l.Attempt, Status: state.LeaseStatus(l.Status),
					Granted: fakeMS(l.GrantedAt), Expires: fakeMS(l.ExpiresAt), Unstarted: l.Unstarted}
			}
			add(c, linInput{Part: c.task, Kind: linLookup}, out)
		case linSweep, linRevoke, linRestart:
			for _, task := range tasks {
				var out linOutput
				for _, l := range c.expired {
					if l.Task == task {
						out.Expired = append(out.Expired, l.FencingToken)
					}
				}
				add(c, linInput{Part: task, Kind: c.kind}, out)
			}
		}
	}
	return ops
}

// granted lists the leases the call granted: a claim's assignments, or
// those a result's answer carried.
func (c linCall) granted() []protocol.Assignment {
	if c.kind == linResult {
		return c.res.Assignments
	}
	return c.asg
}

// linHold is a lease a worker may hold from the call of the claim that
// granted it (from) until the answer of the first call that shows it ended
// (to): an accepted result for it, the grant of a later lease of its task,
// or a lookup of a later lease or of it ended.
type linHold struct {
	token    int64
	from, to int64
}

// linHolding returns, by worker and task, the leases each worker may hold.
// A heartbeat outside all of them cannot renew or release a lease of the
// task, and is left out of its partition.
func linHolding(calls []linCall) map[string]map[string][]linHold {
	type grant struct {
		worker, task string
		hold         linHold
	}
	var grants []grant
	for _, c := range calls {
		for _, a := range c.granted() {
			grants = append(grants, grant{c.worker, a.Task, linHold{token: a.FencingToken, from: c.call, to: math.MaxInt64}})
		}
	}
	taskOf := map[int64]string{}
	for _, g := range grants {
		taskOf[g.hold.token] = g.task
	}
	for i := range grants {
		g := &grants[i]
		for _, c := range calls {
			if c.unauthorized || c.ret >= g.hold.to {
				continue
			}
			ended := false
			switch c.kind {
			case linResult:
				ended = c.token == g.hold.token && c.res.Decision == protocol.DecisionAccepted
			}
			for _, a := range c.granted() {
				ended = ended || a.Task == g.task && a.FencingToken > g.hold.token
			}
			switch c.kind {
			case linLookup:
				ended = c.lease != nil && c.task == g.task &&
					(c.lease.FencingToken > g.hold.token || c.lease.FencingToken == g.hold.token && c.lease.Status != string(state.LeaseActive))
			}
			if ended {
				g.hold.to = c.ret
			}
		}
	}
	out := map[string]map[string][]linHold{}
	for _, g := range grants {
		if out[g.worker] == nil {
			out[g.worker] = map[string][]linHold{}
		}
		out[g.worker][g.task] = append(out[g.worker][g.task], g.hold)
	}
	return out
}

// reportLinRun logs a run that is not linearizable: the operations of
// each partition porcupine found illegal, and a visualization under
// WDC_LINEARIZABILITY_OUT when it is set.
func reportLinRun(t testing.TB, run linRun) {
	t.Helper()
	model := linModel
	for _, part := range linModel.Partition(run.History) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		var b strings.Builder
		clock := "fake"
		if run.Kills > 0 {
			clock = "real"
		}
		fmt.Fprintf(&b, "seed %d: partition %s is not linearizable (%d operations; times: %s ms [from,to]):\n", run.Seed, part[0].Input.(linInput).Part, len(part), clock)
		for _, op := range part {
			fmt.Fprintf(&b, "  c%-3d %9.3fms..%9.3fms  %s\n", op.ClientId, float64(op.Call)/1e6, float64(op.Return)/1e6,
				describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
		}
		t.Log(b.String())
	}
	if dir := os.Getenv("WDC_LINEARIZABILITY_OUT"); dir != "" {
		path := filepath.Join(dir, fmt.Sprintf("linearizability-%d.html", run.Seed))
		if err := porcupine.VisualizePath(model, run.Info, path); err != nil {
			t.Errorf("visualization: %v", err)
		} else {
			t.Logf("visualization: %s", path)
		}
	}
}

// TestLinearizability checks short histories of simulated workers — with
// vanishing workers, replays, results for other workers' leases and wrong
// tokens, a revoke and a restart — against the model, then doctors the
// first history and checks that porcupine finds each doctored one Illegal.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	for i, cfg := range []linConfig{
		{Seed: 1, Workers: 4, Tasks: 30, Calls: 800, Revoke: true, Restart: true, Vanish: 0.01, Misbehave: 0.1, AtomicHeartbeats: true},
		{Seed: 2, Workers: 3, Tasks: 12, Calls: 500, Restart: true, Vanish: 0.03, Misbehave: 0.2, AtomicHeartbeats: true},
		{Seed: 3, Workers: 3, Tasks: 20, Calls: 600, Revoke: true, Vanish: 0.02, Misbehave: 0.1, AtomicHeartbeats: true, Prefetch: 0.7},
	} {
		run := runLinHistory(t, cfg, t.TempDir(), time.Minute)
		for _, e := range run.Errors {
			t.Errorf("seed %d: %s", cfg.Seed, e)
		}
		t.Logf("seed %d: %d calls, %d operations, %d accepted results, %d calls across an expiry: %s in %s",
			cfg.Seed, run.Calls, run.Ops, run.Accepted, run.Expiry, run.Result, run.Check)
		if testing.Verbose() {
			t.Logf("seed %d: %v", cfg.Seed, run.Counts)
		}
		if run.Result != porcupine.Ok {
			reportLinRun(t, run)
			t.Fatalf("seed %d: %s", cfg.Seed, run.Result)
		}
		if i == 0 {
			checkDoctored(t, run.History, time.Minute)
		}
	}
}

// checkDoctored adds, to a history porcupine found linearizable, calls
// that break one rule each, and checks that every such history is Illegal.
func checkDoctored(t *testing.T, history []porcupine.Operation, limit time.Duration) {
	t.Helper()
	var end, endFake, maxToken int64
	var grants []porcupine.Operation
	var first, success, revoke *porcupine.Operation // the first result answered, an accepted success, the revoke
	for i, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		end, endFake = max(end, op.Return), max(endFake, in.To)
		switch {
		case in.Part == linTokens:
			maxToken = max(maxToken, in.Token)
		case in.Kind == linGrant:
			grants = append(grants, op)
		case in.Kind == linResult && !out.Unauthorized:
			if first == nil || op.Call < first.Call {
				first = &history[i]
			}
			if success == nil && in.Class == "" && out.Decision == protocol.DecisionAccepted && !out.Duplicate {
				success = &history[i]
			}
		case in.Kind == linRevoke:
			revoke = &history[i]
		}
	}
	if len(grants) == 0 || first == nil || success == nil {
		t.Fatalf("the history has %d grants, results %v, an accepted success %v: too little to doctor", len(grants), first != nil, success != nil)
	}
	g0 := grants[0]
	gi := g0.Input.(linInput)
	// at is an operation at g0's call; after one after every other call,
	// well past every expiry the history saw.
	at := func(in linInput, out linOutput) porcupine.Operation {
		in.From, in.To = gi.From, gi.To
		return porcupine.Operation{ClientId: 99, Input: in, Call: g0.Call, Output: out, Return: g0.Return}
	}
	late := endFake + 10*linTTL.Milliseconds()
	after := func(in linInput, out linOutput) porcupine.Operation {
		in.From, in.To = late, late
		return porcupine.Operation{ClientId: 99, Input: in, Call: end + 1, Output: out, Return: end + 2}
	}
	accepted := linOutput{Decision: protocol.DecisionAccepted}
	// Of the first result answered, a replay answered the other way.
	replay, flipped := first.Input.(linInput), first.Output.(linOutput)
	flipped.Duplicate = true
	if flipped.Decision == protocol.DecisionAccepted {
		flipped.Decision, flipped.Reason = protocol.DecisionRejected, protocol.ReasonLeaseExpired
	} else {
		flipped.Decision, flipped.Reason = protocol.DecisionAccepted, ""
	}
	again := success.Input.(linInput)
	again.Key += "-again"
	type doctoring struct {
		name string
		op   porcupine.Operation
	}
	doctored := []doctoring{
		{"a second lease of a task while its first is active", at(linInput{Part: gi.Part, Kind: linGrant, Conf: gi.Conf,
			Worker: "w-intruder", Epoch: gi.Epoch, Token: maxToken + 1000, Attempt: gi.Attempt + 1, ExpiresAt: gi.ExpiresAt}, linOutput{})},
		{"an accepted result from a worker that does not hold the lease", at(linInput{Part: gi.Part, Kind: linResult, Conf: gi.Conf,
			Worker: "w-intruder", Epoch: gi.Epoch, Token: gi.Token, Attempt: gi.Attempt, Key: "intruder"}, accepted)},
		{"a fencing token that goes backwards", after(linInput{Part: linTokens, Kind: linGrant, Token: gi.Token - 1}, linOutput{})},
		{"an accepted result well after its lease's expiry", after(linInput{Part: gi.Part, Kind: linResult, Conf: gi.Conf,
			Worker: gi.Worker, Epoch: gi.Epoch, Token: gi.Token, Attempt: gi.Attempt, Key: "late"}, accepted)},
		{"a replay answered other than the first post", after(replay, flipped)},
		{"a second accepted result for a task that succeeded", after(again, accepted)},
	}
	if revoke != nil {
		// A result accepted after the revoke, for a lease granted before it.
		ri := revoke.Input.(linInput)
		for _, g := range grants {
			if in := g.Input.(linInput); g.Return < revoke.Call {
				doctored = append(doctored, doctoring{"an accepted result after a revoke for a lease granted before it",
					porcupine.Operation{ClientId: 99, Input: linInput{Part: in.Part, Kind: linResult, Conf: in.Conf, Worker: in.Worker, Epoch: in.Epoch,
						From: ri.To, To: ri.To, Token: in.Token, Attempt: in.Attempt, Key: "after-revoke"},
						Call: revoke.Return + 1, Output: accepted, Return: revoke.Return + 1}})
				break
			}
		}
	}
	for _, d := range doctored {
		h := append(slices.Clone(history), d.op)
		if res := porcupine.CheckOperationsTimeout(linModel, h, limit); res != porcupine.Illegal {
			t.Errorf("doctored history (%s): %s, want Illegal", d.name, res)
		}
	}
	t.Logf("%d doctored histories, each Illegal", len(doctored))
}

// TestLinearizabilityLong checks many longer histories, each with its own
// seed and shape, with the faults of TestLinearizability (workers that
// vanish mid-attempt, a revoke, a coordinator restart on the same state
// file) more often. It runs only with WDC_LINEARIZABILITY_LONG=1;
// WDC_LINEARIZABILITY_HISTORIES (default 100) is how many histories,
// WDC_LINEARIZABILITY_DURATION (e.g. 10m), when set, runs until that much
// time has passed instead, WDC_LINEARIZABILITY_SEED (default 1) is the
// first seed, and WDC_LINEARIZABILITY_OUT a folder for the porcupine
// visualization of each violation; WDC_LINEARIZABILITY_TWO_STEP_HEARTBEATS=1
// allows heartbeats in two steps (see linConfig.AtomicHeartbeats).
// WDC_LINEARIZABILITY_KILLS=K (K > 0) runs each history's coordinator in a
// child process on the real clock and kills it 1 to K times while calls
// are in flight (linearizability_crash_test.go).
// bench/linearizability.sh runs it; it ends with the line "histories
// checked: N, violations: M".
func TestLinearizabilityLong(t *testing.T) {
	if os.Getenv("WDC_LINEARIZABILITY_LONG") != "1" {
		t.Skip("set WDC_LINEARIZABILITY_LONG=1 to run (bench/linearizability.sh)")
	}
	histories, err := envInt("WDC_LINEARIZABILITY_HISTORIES", 100)
	if err != nil {
		t.Fatal(err)
	}
	first, err := envInt("WDC_LINEARIZABILITY_SEED", 1)
	if err != nil {
		t.Fatal(err)
	}
	maxKills, err := envInt("WDC_LINEARIZABILITY_KILLS", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kills, cut, unseen int
	cutBy := map[string]int{} // calls of unknown outcome by kind
	var until time.Time
	if d := os.Getenv("WDC_LINEARIZABILITY_DURATION"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("WDC_LINEARIZABILITY_DURATION: %v", err)
		}
		until, histories = time.Now().Add(dur), math.MaxInt
	}
	var n, violations, twoStep, unknown, failed, calls, ops, maxOps, accepted, spanned int
	var check, maxCheck time.Duration
	for i := 0; i < histories && (until.IsZero() || n == 0 || time.Now().Before(until)); i++ {
		seed := uint64(first + i)
		rng := rand.New(rand.NewPCG(seed, 3000))
		cfg := linConfig{Seed: seed, Workers: 3 + rng.IntN(4), Tasks: 6 + rng.IntN(25), Calls: 500 + rng.IntN(1000),
			Revoke: rng.IntN(10) < 7, Restart: rng.IntN(10) < 7,
			Vanish: 0.005 + 0.025*rng.Float64(), Misbehave: 0.05 + 0.15*rng.Float64(),
			AtomicHeartbeats: os.Getenv("WDC_LINEARIZABILITY_TWO_STEP_HEARTBEATS") != "1"}
		if maxKills > 0 {
			cfg.Kills = 1 + rng.IntN(maxKills)
		} else if rng.IntN(2) == 0 {
			cfg.Prefetch = rng.Float64()
		}
		dir, err := os.MkdirTemp(t.TempDir(), "history")
		if err != nil {
			t.Fatal(err)
		}
		run := runLinHistory(t, cfg, dir, 2*time.Minute)
		_ = os.RemoveAll(dir)
		n++
		calls += run.Calls
		ops += run.Ops
		maxOps = max(maxOps, run.Ops)
		accepted += run.Accepted
		spanned += run.Expiry
		check += run.Check
		maxCheck = max(maxCheck, run.Check)
		kills += run.Kills
		cut += run.Unknown
		unseen += run.Unseen
		for k, v := range run.Counts {
			if kind, ok := strings.CutSuffix(k, " unknown"); ok {
				cutBy[kind] += v
			}
		}
		for _, e := range run.Errors {
			t.Errorf("seed %d: %s", seed, e)
		}
		if len(run.Errors) > 0 {
			failed++
		}
		switch run.Result {
		case porcupine.Illegal:
			violations++
			reportLinRun(t, run)
			t.Errorf("seed %d (%+v): not linearizable", seed, cfg)
			if run.TwoStep == porcupine.Ok {
				twoStep++
				t.Logf("seed %d: linearizable with two-step heartbeats", seed)
			}
		case porcupine.Unknown:
			unknown++
			t.Logf("seed %d: the check timed out", seed)
		}
		t.Logf("seed %d: %d workers, %d tasks, revoke %v, restart %v: %d calls, %d operations, %d accepted, %d across an expiry: %s in %s",
			seed, cfg.Workers, cfg.Tasks, cfg.Revoke, cfg.Restart, run.Calls, run.Ops, run.Accepted, run.Expiry, run.Result, run.Check.Round(time.Microsecond))
		if cfg.Kills > 0 {
			t.Logf("seed %d: %d kills, %d calls of unknown outcome, %d leases granted unseen", seed, run.Kills, run.Unknown, run.Unseen)
		}
	}
	t.Logf("calls: %d (%.0f per history); operations per history: mean %.0f, max %d; accepted results: %d; calls across an expiry: %d",
		calls, float64(calls)/float64(n), float64(ops)/float64(n), maxOps, accepted, spanned)
	t.Logf("check time per history: mean %s, max %s; timed out: %d; runs with errors: %d",
		(check / time.Duration(n)).Round(time.Microsecond), maxCheck.Round(time.Microsecond), unknown, failed)
	if os.Getenv("WDC_LINEARIZABILITY_TWO_STEP_HEARTBEATS") != "1" {
		t.Logf("violations linearizable with two-step heartbeats: %d of %d", twoStep, violations)
	}
	if maxKills > 0 {
		t.Logf("kills: %d; calls of unknown outcome: %d %v; leases granted unseen: %d", kills, cut, cutBy, unseen)
	}
	t.Logf("histories checked: %d, violations: %d", n, violations)
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a number >= 0", name, v)
	}
	return n, nil
}
