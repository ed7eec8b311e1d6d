package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers/local"
	"github.com/wdc-dev/wdc/state"
)

// Config is the configuration WorkerLeases plans and records: pool "demo"
// of two workers (heartbeat every 2s, ttl 10s) and task "build"
// (retry.max_lost 3, backoff 1s). It is written to the story's folder as
// main.wdc.hcl.
//
//go:embed worker_leases.wdc.hcl
var Config string

// ConfigFile is the name Config gets in the story's folder, and StateFile
// the state file's path in it: the defaults of a project, so `wdc --chdir
// DIR tasks show build` reads a kept story.
const (
	ConfigFile = "main.wdc.hcl"
	StateFile  = ".wdc/state.db"
)

// DefaultStart is where the fake clock of WorkerLeases starts when
// Options.Start is zero: 2026-01-01T00:00:00Z.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options configure WorkerLeases.
type Options struct {
	// Dir is the folder the story runs in, kept afterwards: it gets
	// ConfigFile and StateFile (and the work folder beside the state), as
	// a project would. It must not exist yet or be empty. "" runs the
	// story in a new temporary folder, removed at the end.
	Dir string
	// Start is the fake clock's start, truncated to the millisecond the
	// state keeps (zero: DefaultStart).
	Start time.Time
	// Version is the wdc version the workers report when they register.
	Version string
}

// callTimeout bounds each protocol call of the story's workers (the
// coordinator answers at once: the workers never wait in a claim).
const callTimeout = 30 * time.Second

// WorkerLeases runs the story of `wdc demo worker-leases` (docs/cli.md):
// on a fresh state, with a fake clock and an in-process coordinator, two
// workers register; worker A is granted the task (attempt 1, fencing token
// 1) and renews it with a heartbeat; A goes silent; the sweep expires the
// lease and marks A stale; worker B is granted attempt 2 with a higher
// token; A's late result is rejected as stale_token; B's result is
// accepted and completes the lease; A heartbeats again and is active.
//
// The report holds every step with the state it produced, as the state
// store records it, and the checks made on it; Report.OK says whether
// every one held. A story that cannot go on (an answer it did not expect)
// stops with a failed check and Report.Stopped saying why; that is not an
// error. At the end the story stops as apply stops: its launches are
// closed and its workers marked gone. Errors are about the setting — a Dir
// that exists and is not empty or cannot be created, a state or listener
// that cannot be opened — or about that ending; the report is then nil.
func WorkerLeases(ctx context.Context, opts Options) (*Report, error) {
	start := opts.Start
	if start.IsZero() {
		start = DefaultStart
	}
	start = start.UTC().Truncate(time.Millisecond)
	dir, cleanup, err := storyFolder(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	clk := &clock{t: start}
	s, err := setUp(ctx, dir, clk, opts.Version)
	if err != nil {
		return nil, err
	}
	defer s.close()
	s.run(ctx)
	if err := s.finish(ctx); err != nil {
		return nil, err
	}
	return s.report, nil
}

// storyFolder returns the folder to run in and what removes it afterwards
// (nothing, for a folder the caller named).
func storyFolder(dir string) (string, func(), error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "wdc-demo-")
		if err != nil {
			return "", nil, fmt.Errorf("demo: making a temporary folder: %w", err)
		}
		return tmp, func() { os.RemoveAll(tmp) }, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("demo: folder %s: %w", dir, err)
	}
	f, err := os.Open(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", nil, fmt.Errorf("demo: making folder %s: %w", abs, err)
		}
	case err != nil:
		return "", nil, fmt.Errorf("demo: folder %s: %w", abs, err)
	default:
		_, rerr := f.Readdirnames(1)
		f.Close()
		if rerr == nil {
			return "", nil, fmt.Errorf("demo: folder %s is not empty: name a new or empty folder (the demo writes %s and %s there)", abs, ConfigFile, StateFile)
		}
		if !errors.Is(rerr, io.EOF) {
			return "", nil, fmt.Errorf("demo: folder %s: %w", abs, rerr)
		}
	}
	return abs, func() {}, nil
}

// clock is the story's fake clock: a settable time. The coordinator reads
// it (coordinator.Options.Now) for every decision; only the story moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the clock's time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// set moves the clock to t.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// story is one run of WorkerLeases: the apply-like setting and the
// workers.
type story struct {
	clock  *clock
	store  *state.Store
	coord  *coordinator.Coordinator
	server *http.Server
	serve  chan struct{} // closed when the server stopped
	url    string
	client *http.Client
	judge  judge
	// pool and its runtime settings; task is the task's address.
	pool     apply.Pool
	task     string
	interval time.Duration
	workers  []*worker // A, B
	launches []int     // the launch sequences issued
	version  string
	report   *Report
	lastSeq  int64 // the last event seq already shown
	prev     View  // the state after the previous step
}

// worker is one of the story's workers: a protocol client with its
// session, and the lease it was granted.
type worker struct {
	name   string // "A" or "B"
	id     string
	client *protocol.Client
	lease  protocol.Assignment
}

// setUp loads and plans the configuration in dir, records it in a new
// state as apply does, and starts the coordinator on a loopback listener.
func setUp(ctx context.Context, dir string, clk *clock, version string) (*story, error) {
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(Config), 0o644); err != nil {
		return nil, fmt.Errorf("demo: writing the configuration: %w", err)
	}
	// Its pool names the local provider (the demo plays the workers
	// itself: nothing is launched).
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: map[string]wdchcl.ProviderSchema{local.Name: local.Schema}})
	if diags.HasErrors() {
		return nil, fmt.Errorf("demo: the demo's configuration does not load: %s", diags.Error())
	}
	if diags := plan.Validate(cfg); diags.HasErrors() {
		return nil, fmt.Errorf("demo: the demo's configuration is not valid: %s", diags.Error())
	}
	statePath := filepath.Join(dir, filepath.FromSlash(StateFile))
	store, err := state.Open(ctx, statePath)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &story{clock: clk, store: store, version: version}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	planned, diags := plan.New(cfg, snap, clk.Now(), plan.Options{})
	if diags.HasErrors() {
		return nil, fmt.Errorf("demo: planning the demo's configuration: %s", diags.Error())
	}
	pools, tasks := apply.Inputs(cfg, planned)
	if len(pools) != 1 || len(planned.Tasks) != 1 {
		return nil, fmt.Errorf("demo: the demo's configuration must plan one pool and one task, not %d and %d", len(pools), len(planned.Tasks))
	}
	runtimes, err := apply.RecordPlan(ctx, apply.Options{Store: store, Plan: planned, Pools: pools, Tasks: tasks, Now: clk.Now})
	if err != nil {
		return nil, fmt.Errorf("demo: recording the plan: %w", err)
	}
	workDir := filepath.Dir(statePath)
	blobs, err := artifact.Open(apply.ArtifactFolder(workDir), 1<<30)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s.coord, err = coordinator.New(coordinator.Options{
		Store: store, Pools: []coordinator.PoolRuntime{pools[0].Runtime}, Tasks: runtimes, Now: clk.Now, Artifacts: blobs,
	})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ep, err := httpapi.Listen(httpapi.ListenSettings{}, clk.Now())
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s.url = ep.URL
	s.server = &http.Server{Handler: httpapi.New(s.coord), ReadHeaderTimeout: 10 * time.Second}
	s.serve = make(chan struct{})
	go func() {
		defer close(s.serve)
		s.server.Serve(ep.Listener) //nolint:errcheck // returns on Shutdown
	}()
	s.client = &http.Client{Transport: &http.Transport{}}

	s.pool = pools[0]
	rt := runtimes[0]
	s.task = rt.Address
	s.interval = s.pool.Runtime.HeartbeatInterval
	ttl := s.pool.Runtime.TTL
	t, err := store.Task(ctx, rt.Address)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s.judge = judge{start: clk.Now(), task: rt.Address, ttl: ttl, backoff: rt.Retry.Backoff, maxLost: t.MaxLost}
	s.report = &Report{
		Start: clk.Now(), Config: Config, Plan: planned.Summary().String(),
		Pool: PoolInfo{Name: s.pool.Runtime.Name, HeartbeatInterval: s.interval, TTL: ttl},
		Task: TaskInfo{Address: rt.Address, DefHash: rt.DefHash, MaxLost: t.MaxLost, Backoff: rt.Retry.Backoff},
	}
	ok = true
	return s, nil
}

// finish ends the story as apply ends: the coordinator drains, the
// launches are closed and every worker is marked gone (an active lease
// left by a story that stopped is revoked), so a kept state reads as one
// an apply left. It runs after the last step's state was read.
func (s *story) finish(ctx context.Context) error {
	s.coord.Drain()
	if err := s.store.EndLaunches(ctx, s.coord.ApplyID(), s.pool.Runtime.Name, s.launches, s.clock.Now()); err != nil {
		return fmt.Errorf("demo: ending the story as apply ends: %w", err)
	}
	if _, err := s.coord.RevokeLeases(ctx, "the demo ended before the attempt reported"); err != nil {
		return fmt.Errorf("demo: ending the story as apply ends: %w", err)
	}
	return nil
}

// close stops the server and closes the state.
func (s *story) close() {
	if s.server != nil {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.server.Shutdown(shut) //nolint:errcheck // best effort at the end
		cancel()
		<-s.serve
	}
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// at moves the fake clock to start + d and returns the new time.
func (s *story) at(d time.Duration) time.Time {
	t := s.report.Start.Add(d)
	s.clock.set(t)
	return t
}

// run plays the steps in order until one cannot go on.
func (s *story) run(ctx context.Context) {
	ttl := s.judge.ttl
	// The timeline follows from the pool's heartbeat interval and ttl and
	// the task's backoff: worker A renews after two intervals, then stays
	// silent until a second past its lease's expiry; worker B heartbeats
	// every two intervals meanwhile, so it stays alive.
	renewAt := 2 * s.interval
	sweepAt := renewAt + ttl + time.Second
	reassignAt := sweepAt + s.judge.backoff
	steps := []struct {
		id, title string
		run       func(ctx context.Context, st *Step) error
	}{
		{StepRegister, "Two workers register", func(ctx context.Context, st *Step) error { return s.register(ctx, st) }},
		{StepAssign, "Worker A claims the task", func(ctx context.Context, st *Step) error { return s.assign(ctx, st) }},
		{StepRenew, "Worker A's heartbeat renews its lease", func(ctx context.Context, st *Step) error { return s.renew(ctx, st, renewAt) }},
		{StepSilence, "Worker A goes silent", func(ctx context.Context, st *Step) error { return s.silence(ctx, st, renewAt, sweepAt) }},
		{StepSweep, "The sweep expires the lease and marks worker A stale", func(ctx context.Context, st *Step) error { return s.sweep(ctx, st, sweepAt) }},
		{StepReassign, "Worker B gets the task: attempt 2, a higher token", func(ctx context.Context, st *Step) error {
			return s.reassign(ctx, st, reassignAt)
		}},
		{StepStaleResult, "Worker A's late result is rejected", func(ctx context.Context, st *Step) error {
			return s.staleResult(ctx, st, reassignAt+time.Second)
		}},
		{StepResult, "Worker B's result is accepted", func(ctx context.Context, st *Step) error {
			return s.result(ctx, st, reassignAt+2*time.Second)
		}},
		{StepReturn, "Worker A heartbeats again and is active", func(ctx context.Context, st *Step) error {
			return s.comeBack(ctx, st, reassignAt+4*time.Second)
		}},
	}
	for _, step := range steps {
		st := Step{ID: step.id, Title: step.title}
		err := step.run(ctx, &st)
		st.At = s.clock.Now()
		if err != nil {
			// Show what the state holds all the same.
			if v, rerr := s.read(ctx); rerr == nil {
				st.State = &v
			}
			st.Checks = append(st.Checks, check("step_completed", false, "the step runs to its end", err.Error()))
			s.report.Steps = append(s.report.Steps, st)
			s.report.Stopped = fmt.Sprintf("step %d (%s) could not go on: %v", len(s.report.Steps), step.id, err)
			return
		}
		s.report.Steps = append(s.report.Steps, st)
	}
}

// observe reads the state after a step into st and returns the view
// before the step and after it.
func (s *story) observe(ctx context.Context, st *Step) (prev, cur View, err error) {
	cur, err = s.read(ctx)
	if err != nil {
		return View{}, View{}, err
	}
	prev = s.prev
	s.prev = cur
	st.State = &cur
	return prev, cur, nil
}

// read reads the story's task, its leases, retry directive and results,
// the story's workers and the events appended since the last read.
func (s *story) read(ctx context.Context) (View, error) {
	var v View
	var err error
	if _, v.Serial, err = s.store.Info(ctx); err != nil {
		return View{}, err
	}
	if v.FencingCounter, err = s.store.LastToken(ctx); err != nil {
		return View{}, err
	}
	t, err := s.store.Task(ctx, s.task)
	if err != nil {
		return View{}, err
	}
	v.Task = TaskView{Address: t.Address, Status: t.Status, Attempts: t.Attempts, LostUsed: t.LostUsed, LastError: t.LastError}
	leases, err := s.store.Leases(ctx, s.task)
	if err != nil {
		return View{}, err
	}
	v.Leases = []LeaseView{}
	for _, l := range leases {
		v.Leases = append(v.Leases, LeaseView{Token: l.Token, Attempt: l.Attempt, Worker: s.nameOf(l.WorkerID), WorkerID: l.WorkerID,
			Status: l.Status, GrantedAt: l.GrantedAt, RenewedAt: l.RenewedAt, ExpiresAt: l.ExpiresAt, HardExpiresAt: l.HardExpiresAt, EndedAt: l.EndedAt})
	}
	v.Workers = []WorkerView{}
	for _, w := range s.workers {
		rec, err := s.store.Worker(ctx, w.id)
		if err != nil {
			return View{}, err
		}
		v.Workers = append(v.Workers, WorkerView{Name: w.name, ID: rec.ID, Status: rec.Status, LastHeartbeatAt: rec.LastHeartbeatAt, LeasesHeld: rec.LeasesHeld})
	}
	dirs, err := s.store.RetryDirectives(ctx, s.task)
	if err != nil {
		return View{}, err
	}
	if n := len(dirs); n > 0 {
		d := dirs[n-1]
		v.Retry = &RetryView{NextAttempt: d.NextAttempt, Kind: d.Kind, NotBefore: d.NotBefore, Reason: d.Reason, ConsumedAt: d.ConsumedAt}
	}
	results, err := s.store.Results(ctx, s.task)
	if err != nil {
		return View{}, err
	}
	v.Results = []ResultView{}
	for _, r := range results {
		v.Results = append(v.Results, ResultView{Token: r.Token, Attempt: r.Attempt, Worker: s.nameOf(r.WorkerID), Decision: r.Decision,
			Reason: r.Reason, ReceivedAt: r.ReceivedAt})
	}
	events, err := s.store.Events(ctx, "")
	if err != nil {
		return View{}, err
	}
	v.Events = []EventView{}
	for _, e := range events {
		if e.Seq <= s.lastSeq {
			continue
		}
		v.Events = append(v.Events, EventView{Seq: e.Seq, At: e.At, Kind: e.Kind, Task: e.Task, Worker: s.nameOf(e.WorkerID),
			WorkerID: e.WorkerID, Token: e.Token, Message: e.Message})
		s.lastSeq = e.Seq
	}
	return v, nil
}

// nameOf returns the story name of the worker with id, or "".
func (s *story) nameOf(id string) string {
	for _, w := range s.workers {
		if w.id == id {
			return w.name
		}
	}
	return ""
}

// call gives one protocol call its deadline.
func call[T any](ctx context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return f(ctx)
}
