package coordinator_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// t0 is the start of the fake clock.
var ct0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is a controllable Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
	return f.t
}

func (f *fakeClock) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = t
}

// harness is a coordinator on a fresh state file, served by an httptest
// server, with a fake clock (unless realClock) and recorded events.
type harness struct {
	t     *testing.T
	path  string
	store *state.Store
	clock *fakeClock
	c     *coordinator.Coordinator
	srv   *httptest.Server
	blobs *artifact.Store // the coordinator's artifact store (1 MiB cap)

	mu     sync.Mutex
	events []coordinator.Event
}

type harnessOpts struct {
	realClock    bool
	path         string // state file; "" = a new one
	maxClaimWait time.Duration
	skipUpsert   bool
	metricsOpen  bool // serve /metrics without a credential, as on loopback
	redact       func(string) string
	// eventQueue sets Options.EventQueue; onEvent, when set, sees every
	// event before the harness records it.
	eventQueue int
	onEvent    func(coordinator.Event)
	// config judges recommendations; with it the harness runs the
	// coordinator's loop (Run) until the test ends.
	config *wdchcl.Config
	// fixedPlan: the apply carries out a saved plan.
	fixedPlan bool
	// faults injects faults (Options.Faults).
	faults coordinator.FaultInjector
}

// task is a shorthand TaskRuntime: name, placement "k=v,…", deps.
func rtTask(name string, deps ...string) coordinator.TaskRuntime {
	return coordinator.TaskRuntime{
		Address:    "task." + name,
		DefHash:    "h-" + name,
		Definition: protocol.Definition{Command: []string{"true"}, Dir: "."},
		WorkDir:    "/tmp",
		DependsOn:  deps,
		Timeout:    time.Hour,
		LeaseGrace: time.Minute,
		Retry:      coordinator.RetryPolicy{MaxAttempts: 1, MaxLost: 3, Backoff: time.Second, MaxBackoff: time.Minute},
	}
}

func withRetry(rt coordinator.TaskRuntime, maxAttempts, maxLost int, backoff time.Duration) coordinator.TaskRuntime {
	rt.Retry = coordinator.RetryPolicy{MaxAttempts: maxAttempts, MaxLost: maxLost, Backoff: backoff, MaxBackoff: time.Hour}
	return rt
}

func placed(rt coordinator.TaskRuntime, kv ...string) coordinator.TaskRuntime {
	rt.Placement = map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		rt.Placement[k] = v
	}
	return rt
}

func rtPool(name string, capacity int, kv ...string) coordinator.PoolRuntime {
	p := coordinator.PoolRuntime{Name: name, Capacity: capacity, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second, Labels: map[string]string{}}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		p.Labels[k] = v
	}
	return p
}

// upsertAll records pools and tasks in the state as apply does: pending
// when the task has dependencies, else queued.
func upsertAll(t testing.TB, s *state.Store, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pools {
		if err := s.UpsertPool(ctx, state.Pool{Name: p.Name, Provider: "local", Max: 4, Capacity: max(p.Capacity, 1), Labels: p.Labels}, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, rt := range tasks {
		st := state.TaskQueued
		if len(rt.DependsOn) > 0 {
			st = state.TaskPending
		}
		name := strings.TrimPrefix(rt.Address, "task.")
		if err := s.UpsertTask(ctx, state.TaskDef{Address: rt.Address, Name: name, Index: -1, DefHash: rt.DefHash,
			Spec: rt.Definition.Canonical(), Status: st, MaxAttempts: max(rt.Retry.MaxAttempts, 1), MaxLost: rt.Retry.MaxLost}, now); err != nil {
			t.Fatal(err)
		}
	}
}

func newHarness(t *testing.T, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, clock: &fakeClock{t: ct0}}
	h.path = o.path
	if h.path == "" {
		h.path = filepath.Join(t.TempDir(), "state.db")
	}
	s, err := state.Open(context.Background(), h.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h.store = s
	now := h.clock.Now
	if o.realClock {
		now = time.Now
	}
	if !o.skipUpsert {
		upsertAll(t, s, pools, tasks, now())
	}
	blobs, err := artifact.Open(filepath.Join(filepath.Dir(h.path), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h.blobs = blobs
	h.c, err = coordinator.New(coordinator.Options{
		Store: s, Pools: pools, Tasks: tasks, Now: now, MaxClaimWait: o.maxClaimWait, Artifacts: blobs, MetricsOpen: o.metricsOpen, Redact: o.redact,
		Config: o.config, FixedPlan: o.fixedPlan, Faults: o.faults,
		EventQueue: o.eventQueue,
		OnEvent: func(e coordinator.Event) {
			if o.onEvent != nil {
				o.onEvent(e)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(httpapi.New(h.c))
	t.Cleanup(h.srv.Close)
	if o.config != nil {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); h.c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-ran })
	}
	return h
}

// launchSeq numbers the launches of all harnesses (launch sequences only
// need to be unique per pool).
var launchSeq atomic.Int64

// issueLaunch issues a launch credential of pool on c, as apply does before
// it launches a worker; it lives a year of fake time.
func issueLaunch(t testing.TB, c *coordinator.Coordinator, pool string) string {
	t.Helper()
	cred, err := c.IssueLaunch(context.Background(), pool, int(launchSeq.Add(1)), "local", 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// registerOn registers a worker of pool on c, served at url, with a fresh
// launch credential, and returns a client with its session token.
func registerOn(t testing.TB, c *coordinator.Coordinator, url, pool string, req protocol.RegisterRequest) (*protocol.Client, protocol.RegisterResponse) {
	t.Helper()
	cl := protocol.NewClient(url, issueLaunch(t, c, pool), nil)
	reg, err := cl.Register(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return cl.WithToken(reg.SessionToken), reg
}

// session returns the session of a worker registered with reg, for the
// coordinator's Go API.
func session(t testing.TB, c *coordinator.Coordinator, reg protocol.RegisterResponse) coordinator.Session {
	t.Helper()
	cred, err := c.Authenticate(reg.SessionToken, coordinator.KindSession)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(cred, reg.WorkerID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// client returns a protocol client with a fresh launch credential of pool.
func (h *harness) client(pool string) *protocol.Client {
	return protocol.NewClient(h.srv.URL, issueLaunch(h.t, h.c, pool), nil)
}

// worker is a registered worker and its session client.
type worker struct {
	h       *harness
	cl      *protocol.Client
	id      string
	session string
}

// api returns the worker's session for the coordinator's Go API.
func (w *worker) api() coordinator.Session {
	w.h.t.Helper()
	return session(w.h.t, w.h.c, protocol.RegisterResponse{WorkerID: w.id, SessionToken: w.session})
}

func (h *harness) register(pool string) *worker {
	h.t.Helper()
	cl, reg := registerOn(h.t, h.c, h.srv.URL, pool, protocol.RegisterRequest{Host: "test", PID: 1, Version: "test"})
	return &worker{h: h, cl: cl, id: reg.WorkerID, session: reg.SessionToken}
}

// claim claims without waiting.
func (w *worker) claim(max int) []protocol.Assignment {
	w.h.t.Helper()
	resp, err := w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: max})
	if err != nil {
		w.h.t.Fatal(err)
	}
	return resp.Assignments
}

func (w *worker) claimOne() protocol.Assignment {
	w.h.t.Helper()
	a := w.claim(1)
	if len(a) != 1 {
		w.h.t.Fatalf("claim by %s: %d assignments, want 1", w.id, len(a))
	}
	return a[0]
}

// post posts a result for a with class ("" = success) and key.
func (w *worker) post(a protocol.Assignment, class, key string) protocol.ResultResponse {
	w.h.t.Helper()
	if key == "" {
		key = fmt.Sprintf("%s-%d", w.id, a.FencingToken)
	}
	var code *int
	if class == "failure" {
		one := 1
		code = &one
	} else if class == "" {
		zero := 0
		code = &zero
	}
	resp, err := w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{
		WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: key,
		ExitCode: code, FailureClass: class, Error: map[string]string{"": "", "failure": "exit status 1", "refused": "bad spec", "lost": "gone"}[class],
		StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC(),
	})
	if err != nil {
		w.h.t.Fatal(err)
	}
	return resp
}

func (w *worker) heartbeat(tokens ...int64) protocol.HeartbeatResponse {
	w.h.t.Helper()
	resp, err := w.cl.Heartbeat(context.Background(), w.id, protocol.HeartbeatRequest{Leases: tokens})
	if err != nil {
		w.h.t.Fatal(err)
	}
	return resp
}

func (h *harness) task(addr string) state.Task {
	h.t.Helper()
	t, err := h.store.Task(context.Background(), addr)
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

func (h *harness) sweep() {
	h.t.Helper()
	if _, err := h.c.Sweep(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// recorded returns the events OnEvent got, once every event of the writes
// made so far has reached it (they reach it through the coordinator's
// queue, after the write's answer).
func (h *harness) recorded() []coordinator.Event {
	h.c.FlushEvents()
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]coordinator.Event(nil), h.events...)
}

// eventKinds returns the kinds of the recorded events for task ("" = all).
func (h *harness) eventKinds(task string) []string {
	var out []string
	for _, e := range h.recorded() {
		if task == "" || e.Task == task {
			out = append(out, e.Kind)
		}
	}
	return out
}

func (h *harness) stateEvents(task, kind string) []state.Event {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), task)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []state.Event
	for _, e := range evs {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) serial() int64 {
	h.t.Helper()
	_, n, err := h.store.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
