package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func TestLabelsComeFromToken(t *testing.T) {
	t.Parallel()
	pools := []coordinator.PoolRuntime{rtPool("cpu", 2, "arch=amd64"), rtPool("gpu", 1, "arch=amd64", "gpu=a100")}
	tasks := []coordinator.TaskRuntime{placed(rtTask("train"), "gpu=a100"), placed(rtTask("lint"), "arch=amd64")}
	h := newHarness(t, pools, tasks, harnessOpts{})
	cl := h.client("cpu")
	reg, err := cl.Register(context.Background(), protocol.RegisterRequest{Host: "h", PID: 7, Version: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Pool != "cpu" || reg.Capacity != 2 || reg.Labels["arch"] != "amd64" || reg.Labels["gpu"] != "" ||
		reg.HeartbeatIntervalMS != 2000 || reg.TTLMS != 10000 {
		t.Errorf("registration %+v", reg)
	}
	w, err := h.store.Worker(context.Background(), reg.WorkerID)
	if err != nil || w.Pool != "cpu" || w.Host != "h" || w.PID != 7 || w.Capacity != 2 {
		t.Errorf("worker in state %+v, %v", w, err)
	}
	cpu := &worker{h: h, cl: cl.WithToken(reg.SessionToken), id: reg.WorkerID, session: reg.SessionToken}
	got := cpu.claim(2)
	if len(got) != 1 || got[0].Task != "task.lint" {
		t.Fatalf("cpu worker got %+v; want only task.lint", got)
	}
	a := got[0]
	if a.Attempt != 1 || a.FencingToken < 1 || a.DefHash != "h-lint" || a.WorkDir != "/tmp" || a.TimeoutMS != time.Hour.Milliseconds() ||
		!a.ExpiresAt.Equal(ct0.Add(10*time.Second)) || !slices.Equal(a.Definition.Command, []string{"true"}) {
		t.Errorf("assignment %+v", a)
	}
	gpu := h.register("gpu")
	if a := gpu.claimOne(); a.Task != "task.train" {
		t.Errorf("gpu worker got %s", a.Task)
	}
}

func TestSuccessQueuesDependents(t *testing.T) {
	t.Parallel()
	tasks := []coordinator.TaskRuntime{rtTask("report", "task.build", "task.test"), rtTask("build"), rtTask("test", "task.build")}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 4)}, tasks, harnessOpts{})
	w := h.register("p")
	if got := w.claim(4); len(got) != 1 || got[0].Task != "task.build" {
		t.Fatalf("first claim %+v; want only task.build", got)
	}
	b := h.c.Progress()
	if b.Tasks[state.TaskPending] != 2 || b.Tasks[state.TaskRunning] != 1 || b.AttemptsGranted != 1 || b.Pools[0].Leases != 1 || b.Pools[0].Active != 1 {
		t.Errorf("progress %+v", b)
	}
	build := protocol.Assignment{Task: "task.build", Attempt: 1, FencingToken: 1}
	if r := w.post(build, "", ""); r.Decision != "accepted" {
		t.Fatalf("result %+v", r)
	}
	if st := h.task("task.test").Status; st != state.TaskQueued {
		t.Errorf("task.test is %s", st)
	}
	if st := h.task("task.report").Status; st != state.TaskPending {
		t.Errorf("task.report is %s", st)
	}
	w.post(w.claimOne(), "", "")
	if h.c.Finished() {
		t.Fatal("finished too early")
	}
	last := w.claimOne()
	if last.Task != "task.report" {
		t.Fatalf("claimed %s", last.Task)
	}
	w.post(last, "", "")
	select {
	case <-h.c.Done():
	default:
		t.Fatal("Done not closed")
	}
	p := h.c.Progress()
	if p.Tasks[state.TaskSucceeded] != 3 || p.Finished != 3 || p.Pools[0].Unfinished != 0 {
		t.Errorf("progress %+v", p)
	}
	if got := h.eventKinds("task.test"); !slices.Equal(got, []string{"queued", "leased", "succeeded"}) {
		t.Errorf("events of task.test: %v", got)
	}
}

func TestStartQueuesAndCancelsByDependencies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := t.TempDir() + "/state.db"
	s, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	pools := []coordinator.PoolRuntime{rtPool("p", 1)}
	upsertAll(t, s, pools, []coordinator.TaskRuntime{rtTask("ok"), rtTask("bad")}, ct0)
	if _, err := s.FinishTasks(ctx, []state.TaskFinish{{Address: "task.bad", Status: state.TaskFailed, Reason: "boom"}}, ct0); err != nil {
		t.Fatal(err)
	}
	// task.ok succeeded in an earlier apply (raw path: grant + accept).
	if _, err := s.RegisterWorker(ctx, state.Worker{ID: "w0", Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: time.Minute}, ct0); err != nil {
		t.Fatal(err)
	}
	l, err := s.ClaimLease(ctx, state.GrantRequest{Task: "task.ok", WorkerID: "w0", Timeout: time.Hour}, ct0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptResult(ctx, state.ResultInput{Key: "k", Token: l.Token, Task: "task.ok", Attempt: 1, WorkerID: "w0"}, nil, ct0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tasks := []coordinator.TaskRuntime{rtTask("after-ok", "task.ok"), rtTask("after-bad", "task.bad"), rtTask("after-after-bad", "task.after-bad"), rtTask("after-missing", "task.missing")}
	h := newHarness(t, pools, tasks, harnessOpts{path: path})
	want := map[string]state.TaskStatus{
		"task.after-ok": state.TaskQueued, "task.after-bad": state.TaskCancelled,
		"task.after-after-bad": state.TaskCancelled, "task.after-missing": state.TaskCancelled,
	}
	for addr, st := range want {
		if got := h.task(addr); got.Status != st {
			t.Errorf("%s is %s (%s); want %s", addr, got.Status, got.LastError, st)
		}
	}
	if e := h.task("task.after-bad").LastError; !strings.Contains(e, "task.bad is failed and not part of this apply") {
		t.Errorf("last error %q", e)
	}
	if a := h.register("p").claimOne(); a.Task != "task.after-ok" {
		t.Errorf("claimed %s", a.Task)
	}
}

// TestConcurrentClaimsHTTP runs many workers claiming through the handler
// at once, some attempts failing and being retried; no task ever has two
// active leases, every lease of a task ended before the next was granted,
// and every task ends.
func TestConcurrentClaimsHTTP(t *testing.T) {
	t.Parallel()
	const nTasks, nWorkers = 60, 8
	var tasks []coordinator.TaskRuntime
	for i := range nTasks {
		tasks = append(tasks, withRetry(rtTask(fmt.Sprintf("t%02d", i)), 3, 3, time.Millisecond))
	}
	p := rtPool("p", 2)
	p.HeartbeatInterval, p.TTL = time.Minute, 10*time.Minute // the workers below never heartbeat
	h := newHarness(t, []coordinator.PoolRuntime{p}, tasks, harnessOpts{realClock: true, maxClaimWait: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go h.c.Run(ctx) //nolint:errcheck // returns nil on cancel

	var holdMu sync.Mutex
	holding := map[string]int64{} // task → token held by some goroutine
	var violations []string
	var wg sync.WaitGroup
	for g := range nWorkers {
		w := h.register("p")
		wg.Go(func() {
			n := 0
			for !h.c.Finished() && ctx.Err() == nil {
				resp, err := w.cl.Claim(ctx, w.id, protocol.ClaimRequest{Max: 2, WaitMS: 100})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("claim: %v", err)
					}
					return
				}
				for _, a := range resp.Assignments {
					holdMu.Lock()
					if other, ok := holding[a.Task]; ok {
						violations = append(violations, fmt.Sprintf("%s held with tokens %d and %d", a.Task, other, a.FencingToken))
					}
					holding[a.Task] = a.FencingToken
					holdMu.Unlock()
				}
				for _, a := range resp.Assignments {
					n++
					class := ""
					if (n+g)%3 == 0 && a.Attempt < 3 {
						class = "failure"
					}
					holdMu.Lock()
					delete(holding, a.Task) // released before the result is posted
					holdMu.Unlock()
					r, err := w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
						IdempotencyKey: fmt.Sprintf("%s-%d", w.id, a.FencingToken), FailureClass: class})
					if err != nil || r.Decision != "accepted" {
						t.Errorf("result %+v: %+v, %v", a, r, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if !h.c.Finished() {
		t.Fatalf("not finished: %+v", h.c.Progress())
	}
	for _, v := range violations {
		t.Error(v)
	}
	if prog := h.c.Progress(); prog.Tasks[state.TaskSucceeded] != nTasks {
		t.Errorf("progress %+v", prog)
	}
	checkLeaseHistory(t, h.store)
}

// checkLeaseHistory checks, from the state, that every task's leases are
// sequential: in token order, each ended no later than the next began, and
// at most one is active.
func checkLeaseHistory(t *testing.T, s *state.Store) {
	t.Helper()
	all, err := s.Leases(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	byTask := map[string][]state.Lease{}
	var last int64
	for _, l := range all {
		if l.Token <= last {
			t.Errorf("tokens not increasing: %d after %d", l.Token, last)
		}
		last = l.Token
		byTask[l.Task] = append(byTask[l.Task], l)
	}
	for task, ls := range byTask {
		active := 0
		for i, l := range ls {
			if l.Status == state.LeaseActive {
				active++
			}
			if l.Attempt != i+1 && !strings.HasPrefix(task, "task.raw") {
				t.Errorf("%s: lease %d has attempt %d, want %d", task, l.Token, l.Attempt, i+1)
			}
			if i > 0 {
				prev := ls[i-1]
				if prev.Status == state.LeaseActive || prev.EndedAt.After(l.GrantedAt) {
					t.Errorf("%s: lease %d (%s, ended %s) overlaps lease %d (granted %s)", task, prev.Token, prev.Status, prev.EndedAt, l.Token, l.GrantedAt)
				}
			}
		}
		if active > 1 {
			t.Errorf("%s: %d active leases", task, active)
		}
	}
}

func TestFencingTokensIncreaseAcrossRetriesAndRestart(t *testing.T) {
	t.Parallel()
	pools := []coordinator.PoolRuntime{rtPool("p", 1)}
	tasks := []coordinator.TaskRuntime{withRetry(rtTask("a"), 5, 3, time.Second)}
	h := newHarness(t, pools, tasks, harnessOpts{})
	w := h.register("p")
	var tokens []int64
	for range 2 {
		a := w.claimOne()
		tokens = append(tokens, a.FencingToken)
		w.post(a, "failure", "")
		h.clock.Advance(time.Hour)
		h.sweep()
		w.heartbeat()
	}
	h.c.StopGranting()
	if a := w.claim(1); len(a) != 0 {
		t.Fatalf("claim after StopGranting: %+v", a)
	}
	oldLaunch := issueLaunch(t, h.c, "p")
	h.store.Close()

	// A new coordinator on the reopened file.
	h2 := newHarness(t, pools, tasks, harnessOpts{path: h.path, skipUpsert: true})
	h2.clock.Set(h.clock.Now())
	w2 := h2.register("p")
	a := w2.claimOne()
	tokens = append(tokens, a.FencingToken)
	if a.Attempt != 3 {
		t.Errorf("attempt after restart %d; want 3", a.Attempt)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("tokens %v do not strictly increase", tokens)
		}
	}
	// The first coordinator's credentials are refused by the second:
	// sessions and launch credentials die with their apply.
	if _, err := w2.cl.WithToken(w.session).Heartbeat(context.Background(), w.id, protocol.HeartbeatRequest{}); protocol.StatusOf(err) != 401 {
		t.Errorf("old session: %v", err)
	}
	if _, err := protocol.NewClient(h2.srv.URL, oldLaunch, nil).Register(context.Background(), protocol.RegisterRequest{}); protocol.StatusOf(err) != 401 {
		t.Errorf("old launch credential: %v", err)
	}
	if h.c.OperatorCredential() == h2.c.OperatorCredential() {
		t.Errorf("operator credentials must be fresh per coordinator")
	}
}

func TestResultReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 3, 3, time.Second)}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	first := w.post(a, "failure", "key-1")
	if first.Decision != "accepted" || first.Duplicate {
		t.Fatalf("first %+v", first)
	}
	serial, before := h.serial(), h.task("task.a")
	for i := range 3 {
		again := w.post(a, "", "key-1") // even when it now says success
		if again.Decision != "accepted" || !again.Duplicate {
			t.Errorf("replay %d: %+v", i, again)
		}
	}
	if h.serial() != serial {
		t.Errorf("serial moved %d → %d", serial, h.serial())
	}
	if after := h.task("task.a"); after.Status != before.Status || after.FailuresUsed != before.FailuresUsed || after.Status != state.TaskQueued {
		t.Errorf("task changed: %+v → %+v", before, after)
	}
	// A rejected result replays as rejected.
	r1 := w.post(protocol.Assignment{Task: "task.a", Attempt: 1, FencingToken: 999}, "", "key-2")
	r2 := w.post(protocol.Assignment{Task: "task.a", Attempt: 1, FencingToken: 999}, "", "key-2")
	if r1.Reason != "unknown_lease" || r1.Duplicate || r2.Reason != "unknown_lease" || !r2.Duplicate {
		t.Errorf("rejected replay: %+v, %+v", r1, r2)
	}
	if n := len(h.stateEvents("task.a", state.EventRejected)); n != 1 {
		t.Errorf("%d rejected events; want 1", n)
	}
}

func TestResultRejections(t *testing.T) {
	t.Parallel()
	type setup struct {
		h      *harness
		w1, w2 *worker
		cur    protocol.Assignment
	}
	cases := []struct {
		name   string
		prep   func(s *setup) (poster *worker, a protocol.Assignment)
		reason string
	}{
		{"wrong worker", func(s *setup) (*worker, protocol.Assignment) { return s.w2, s.cur }, "wrong_worker"},
		{"unknown token", func(s *setup) (*worker, protocol.Assignment) {
			a := s.cur
			a.FencingToken += 100
			return s.w1, a
		}, "unknown_lease"},
		{"other attempt", func(s *setup) (*worker, protocol.Assignment) {
			a := s.cur
			a.Attempt = 7
			return s.w1, a
		}, "unknown_lease"},
		{"old token", func(s *setup) (*worker, protocol.Assignment) {
			// Expire the current lease, retry it: the old token is stale.
			old := s.cur
			s.h.clock.Advance(11 * time.Second)
			s.h.sweep()
			s.w1.heartbeat()
			s.h.clock.Advance(time.Hour)
			s.h.sweep()
			s.w1.heartbeat()
			s.cur = s.w1.claimOne()
			return s.w1, old
		}, "stale_token"},
		{"expired by sweep", func(s *setup) (*worker, protocol.Assignment) {
			s.h.clock.Advance(11 * time.Second)
			s.h.sweep()
			return s.w1, s.cur
		}, "lease_expired"},
		{"expired, not swept yet", func(s *setup) (*worker, protocol.Assignment) {
			s.h.clock.Advance(10 * time.Second)
			return s.w1, s.cur
		}, "lease_expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 3, 3, time.Second)}, harnessOpts{})
			s := &setup{h: h, w1: h.register("p"), w2: h.register("p")}
			s.cur = s.w1.claimOne()
			poster, a := c.prep(s)
			before := h.task("task.a")
			leasesBefore, _ := h.store.Leases(context.Background(), "task.a")
			r := poster.post(a, "", "")
			if r.Decision != "rejected" || r.Reason != c.reason || r.Duplicate {
				t.Fatalf("answer %+v; want rejected %s", r, c.reason)
			}
			after := h.task("task.a")
			leasesAfter, _ := h.store.Leases(context.Background(), "task.a")
			if after.Status != before.Status || after.FailuresUsed != before.FailuresUsed || after.LostUsed != before.LostUsed ||
				!slices.EqualFunc(leasesBefore, leasesAfter, func(x, y state.Lease) bool { return x.Status == y.Status }) {
				t.Errorf("task or leases changed:\n%+v\n%+v", before, after)
			}
			evs := h.stateEvents("task.a", state.EventRejected)
			if len(evs) != 1 || evs[0].Token != a.FencingToken || evs[0].WorkerID != poster.id || !strings.HasPrefix(evs[0].Message, c.reason) {
				t.Errorf("rejected events %+v", evs)
			}
			rs, _ := h.store.Results(context.Background(), "task.a")
			if len(rs) != 1 || rs[0].Decision != "rejected" || rs[0].Reason != c.reason || len(rs[0].Body) == 0 {
				t.Errorf("results %+v", rs)
			}
			if got := h.eventKinds(""); !slices.Contains(got, coordinator.EventRejected) {
				t.Errorf("OnEvent kinds %v lack rejected", got)
			}
		})
	}
}

func TestRetryAndBudgets(t *testing.T) {
	t.Parallel()
	t.Run("backoff", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 3, 3, 10*time.Second)}, harnessOpts{})
		w := h.register("p")
		w.post(w.claimOne(), "failure", "")
		if got := w.claim(1); len(got) != 0 {
			t.Fatalf("claimable before not_before: %+v", got)
		}
		h.clock.Advance(9 * time.Second)
		h.sweep()
		w.heartbeat()
		if got := w.claim(1); len(got) != 0 {
			t.Fatalf("claimable at 9s: %+v", got)
		}
		// A waiting claim is woken when the sweep finds the retry due.
		got := make(chan []protocol.Assignment, 1)
		go func() {
			resp, err := w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 1, WaitMS: 20000})
			if err != nil {
				t.Error(err)
			}
			got <- resp.Assignments
		}()
		time.Sleep(20 * time.Millisecond) // let the claim start waiting (correct either way)
		h.clock.Advance(time.Second)
		h.sweep()
		select {
		case a := <-got:
			if len(a) != 1 || a[0].Attempt != 2 {
				t.Fatalf("after backoff: %+v", a)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting claim was not woken")
		}
		w.post(protocol.Assignment{Task: "task.a", Attempt: 2, FencingToken: 2}, "failure", "")
		ds, _ := h.store.RetryDirectives(context.Background(), "task.a")
		if len(ds) != 2 || !ds[1].NotBefore.Equal(h.clock.Now().Add(20*time.Second)) || ds[1].NextAttempt != 3 || ds[1].Kind != "failure" {
			t.Errorf("second directive (backoff doubled): %+v", ds)
		}
	})

	type step struct {
		class string // result class, or "expire" for a silent worker
		want  state.TaskStatus
	}
	cases := []struct {
		name                 string
		maxAttempts, maxLost int
		steps                []step
		wantErr              string
	}{
		{"max_attempts spent", 2, 3, []step{{"failure", state.TaskQueued}, {"failure", state.TaskFailed}}, "failure budget spent"},
		{"refused fails at once", 5, 3, []step{{"refused", state.TaskFailed}}, "refused"},
		{"lost budget via expiry", 5, 2, []step{{"expire", state.TaskQueued}, {"expire", state.TaskFailed}}, "lost twice"},
		{"lost reported by agent", 5, 2, []step{{"lost", state.TaskQueued}, {"failure", state.TaskQueued}, {"lost", state.TaskFailed}}, "lost twice"},
		{"success after failures", 3, 3, []step{{"failure", state.TaskQueued}, {"expire", state.TaskQueued}, {"", state.TaskSucceeded}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tasks := []coordinator.TaskRuntime{withRetry(rtTask("a"), c.maxAttempts, c.maxLost, time.Second), rtTask("b", "task.a"), rtTask("c", "task.b"), rtTask("d")}
			h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, tasks, harnessOpts{})
			w := h.register("p")
			for i, st := range c.steps {
				a := w.claimOne()
				if a.Task != "task.a" {
					t.Fatalf("step %d claimed %s", i, a.Task)
				}
				if st.class == "expire" {
					h.clock.Advance(10 * time.Second)
					h.sweep()
				} else if r := w.post(a, st.class, ""); r.Decision != "accepted" {
					t.Fatalf("step %d: %+v", i, r)
				}
				if got := h.task("task.a"); got.Status != st.want {
					t.Fatalf("step %d: task.a is %s (%s); want %s", i, got.Status, got.LastError, st.want)
				}
				h.clock.Advance(time.Hour) // past any backoff
				h.sweep()
				w.heartbeat()
			}
			final := h.task("task.a")
			if !strings.Contains(final.LastError, c.wantErr) {
				t.Errorf("last_error %q; want %q", final.LastError, c.wantErr)
			}
			if final.Status == state.TaskFailed {
				for _, d := range []string{"task.b", "task.c"} {
					if got := h.task(d); got.Status != state.TaskCancelled || got.LastError != "dependency task.a failed" {
						t.Errorf("%s: %s %q", d, got.Status, got.LastError)
					}
				}
				if got := h.task("task.d"); got.Status != state.TaskQueued {
					t.Errorf("unrelated task.d is %s", got.Status)
				}
				kinds := h.eventKinds("task.b")
				if !slices.Contains(kinds, coordinator.EventCancelled) {
					t.Errorf("task.b events %v", kinds)
				}
				w.post(w.claimOne(), "", "") // task.d
				if !h.c.Finished() {
					t.Errorf("not finished: %+v", h.c.Progress())
				}
			}
			if strings.Contains(c.name, "expiry") {
				evs := h.stateEvents("task.a", "")
				var msgs []string
				for _, e := range evs {
					msgs = append(msgs, e.Kind+": "+e.Message)
				}
				joined := strings.Join(msgs, "\n")
				if !strings.Contains(joined, "expired: attempt 1") || !strings.Contains(joined, "(lost 1 of 2)") {
					t.Errorf("event log does not name the lost budget:\n%s", joined)
				}
			}
		})
	}
}

func TestHeartbeatKeepsLeaseWithinHardBound(t *testing.T) {
	t.Parallel()
	rt := rtTask("long")
	rt.Timeout, rt.LeaseGrace = 30*time.Second, 5*time.Second
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rt}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	// The worker heartbeats every 5s but never claims; ttl is 10s.
	for at := 5 * time.Second; at < 35*time.Second; at += 5 * time.Second {
		h.clock.Set(ct0.Add(at))
		h.sweep()
		if r := w.heartbeat(a.FencingToken); len(r.CancelLeases) != 0 || r.Drain {
			t.Fatalf("at %s: %+v", at, r)
		}
		l, _ := h.store.Lease(context.Background(), a.FencingToken)
		if l.Status != state.LeaseActive || l.ExpiresAt.After(ct0.Add(35*time.Second)) {
			t.Fatalf("at %s: lease %+v", at, l)
		}
	}
	h.clock.Set(ct0.Add(35 * time.Second))
	h.sweep()
	l, _ := h.store.Lease(context.Background(), a.FencingToken)
	if l.Status != state.LeaseExpired {
		t.Fatalf("past timeout+grace: %+v", l)
	}
	if r := w.heartbeat(a.FencingToken); !slices.Equal(r.CancelLeases, []int64{a.FencingToken}) {
		t.Errorf("heartbeat after expiry: %+v", r)
	}
	if evs := h.stateEvents("task.long", state.EventExpired); len(evs) != 1 || !strings.Contains(evs[0].Message, "hard expiry") {
		t.Errorf("expired events %+v", evs)
	}
}

func TestStaleWorkerComesBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	w := h.register("p")
	h.clock.Advance(10 * time.Second)
	h.sweep()
	if ws, _ := h.store.Worker(context.Background(), w.id); ws.Status != state.WorkerStale {
		t.Fatalf("worker %+v", ws)
	}
	if p := h.c.Progress(); p.Pools[0].Stale != 1 || p.Pools[0].Active != 0 {
		t.Errorf("progress %+v", p.Pools)
	}
	if a := w.claim(1); len(a) != 0 {
		t.Errorf("stale worker got %+v", a)
	}
	if got := h.eventKinds(""); !slices.Contains(got, coordinator.EventStale) {
		t.Errorf("events %v", got)
	}
	w.heartbeat()
	if ws, _ := h.store.Worker(context.Background(), w.id); ws.Status != state.WorkerActive {
		t.Fatalf("after heartbeat %+v", ws)
	}
	w.claimOne()
}

func TestUnreportedLeaseIsReleased(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	w.heartbeat() // granted just now: not released yet
	if l, _ := h.store.Lease(context.Background(), a.FencingToken); l.Status != state.LeaseActive {
		t.Fatalf("released too early: %+v", l)
	}
	h.clock.Advance(5 * time.Second) // > 2 heartbeat intervals
	w.heartbeat()
	if l, _ := h.store.Lease(context.Background(), a.FencingToken); l.Status != state.LeaseReleased {
		t.Fatalf("lease %+v", l)
	}
	tk := h.task("task.a")
	if tk.Status != state.TaskQueued || tk.LostUsed != 0 {
		t.Errorf("task %+v", tk)
	}
	if b := w.claimOne(); b.Attempt != 2 {
		t.Errorf("reclaim %+v", b)
	}
}

func TestDrainAndStopGranting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	h.c.StopGranting()
	if got := w.claim(1); len(got) != 0 {
		t.Fatalf("granted after StopGranting: %+v", got)
	}
	w.post(a, "", "") // results are still accepted
	got := make(chan protocol.ClaimResponse, 1)
	go func() {
		resp, err := w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 1, WaitMS: 20000})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	time.Sleep(20 * time.Millisecond)
	h.c.Drain()
	select {
	case r := <-got:
		if !r.Drain || len(r.Assignments) != 0 {
			t.Errorf("waiting claim after Drain: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not wake the waiting claim")
	}
	if r := w.heartbeat(); !r.Drain {
		t.Errorf("heartbeat after Drain: %+v", r)
	}
	if ws, _ := h.store.Worker(context.Background(), w.id); ws.Status != state.WorkerDraining {
		t.Errorf("worker %+v", ws)
	}
}

func TestFailPool(t *testing.T) {
	t.Parallel()
	pools := []coordinator.PoolRuntime{rtPool("gpu", 1, "gpu=yes"), rtPool("any", 1)}
	tasks := []coordinator.TaskRuntime{placed(rtTask("train"), "gpu=yes"), rtTask("eval", "task.train"), rtTask("lint")}
	h := newHarness(t, pools, tasks, harnessOpts{})
	if err := h.c.FailPool("nope", "x"); err == nil {
		t.Error("unknown pool accepted")
	}
	if err := h.c.FailPool("gpu", "3 launches in a row never registered"); err != nil {
		t.Fatal(err)
	}
	if tk := h.task("task.train"); tk.Status != state.TaskFailed || tk.LastError != "pool gpu: 3 launches in a row never registered" {
		t.Errorf("train %+v", tk)
	}
	if tk := h.task("task.eval"); tk.Status != state.TaskCancelled || tk.LastError != "dependency task.train failed" {
		t.Errorf("eval %+v", tk)
	}
	if tk := h.task("task.lint"); tk.Status != state.TaskQueued {
		t.Errorf("lint %+v (another pool can run it)", tk)
	}
	p := h.c.Progress()
	if !p.Pools[0].Failed || p.Pools[0].Unfinished != 1 || p.Pools[1].Unfinished != 1 { // lint: any pool
		t.Errorf("progress %+v", p.Pools)
	}
	if err := h.c.FailPool("any", "gone"); err != nil {
		t.Fatal(err)
	}
	if !h.c.Finished() {
		t.Errorf("not finished after every pool failed: %+v", h.c.Progress())
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	good := []coordinator.PoolRuntime{rtPool("p", 1)}
	cases := []struct {
		name string
		opts coordinator.Options
		want string
	}{
		{"no store", coordinator.Options{Pools: good}, "store"},
		{"no pools", coordinator.Options{Store: h.store}, "at least one pool"},
		{"duplicate pool", coordinator.Options{Store: h.store, Pools: []coordinator.PoolRuntime{rtPool("p", 1), rtPool("p", 1)}}, "twice"},
		{"duplicate task", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{rtTask("a"), rtTask("a")}}, "twice"},
		{"unknown task", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{rtTask("zz")}}, "not found"},
		{"other def hash", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{func() coordinator.TaskRuntime { r := rtTask("a"); r.DefHash = "x"; return r }()}}, "def_hash"},
		{"other budget", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{withRetry(rtTask("a"), 9, 3, 0)}}, "budgets"},
		{"unplaceable", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{placed(rtTask("a"), "gpu=yes")}}, "placement"},
		{"negative timeout", coordinator.Options{Store: h.store, Pools: good, Tasks: []coordinator.TaskRuntime{func() coordinator.TaskRuntime { r := rtTask("a"); r.Timeout = -1; return r }()}}, "negative"},
	}
	for _, c := range cases {
		if _, err := coordinator.New(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestRevokeLeases(t *testing.T) {
	t.Parallel()
	tasks := []coordinator.TaskRuntime{withRetry(rtTask("a"), 1, 2, time.Second), withRetry(rtTask("z"), 1, 0, time.Second)}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
	w := h.register("p")
	if got := w.claim(2); len(got) != 2 {
		t.Fatalf("claimed %+v", got)
	}
	n, err := h.c.RevokeLeases(context.Background(), "apply stopped")
	if err != nil || n != 2 {
		t.Fatalf("RevokeLeases = %d, %v", n, err)
	}
	p := h.c.Progress()
	if p.Tasks[state.TaskQueued] != 1 || p.Tasks[state.TaskFailed] != 1 || p.Pools[0].Gone != 1 || p.Pools[0].Leases != 0 {
		t.Errorf("progress %+v", p)
	}
	if a := h.task("task.a"); a.Status != state.TaskQueued || a.LostUsed != 1 {
		t.Errorf("task.a %+v", a)
	}
	// Sessions die with the apply: the gone worker is refused.
	_, err = w.cl.Heartbeat(context.Background(), w.id, protocol.HeartbeatRequest{Leases: []int64{1, 2}})
	var ae *protocol.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Reason != protocol.ReasonSessionRevoked {
		t.Errorf("heartbeat of a gone worker: %v; want 401 session_revoked", err)
	}
	if got := h.eventKinds("task.z"); !slices.Equal(got, []string{"leased", "revoked", "failed"}) {
		t.Errorf("events of task.z: %v", got)
	}
}

// TestAbandonedClaimIsReleased: when the claim's request context ends
// after the lease was granted but before the answer is sent, the lease is
// released (no budget spent) and the task can be claimed again. The grant
// is held between its commit and its answer by a full queue of events
// (one that OnEvent holds, one waiting; the queue takes one).
func TestAbandonedClaimIsReleased(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{eventQueue: 1,
		onEvent: func(e coordinator.Event) {
			if e.Kind == "hold" {
				<-gate
			}
		}})
	w := h.register("p")
	s := w.api()
	h.c.Publish(coordinator.Event{Kind: "hold"}) // OnEvent holds it until the gate opens
	h.c.Publish(coordinator.Event{Kind: "fill"}) // the queue is full
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		resp protocol.ClaimResponse
		err  error
	}
	claimed := make(chan answer, 1)
	go func() {
		resp, err := h.c.Claim(ctx, s, 1, 0)
		claimed <- answer{resp, err}
	}()
	waitFor(t, "the grant to commit", 10*time.Second, func() bool {
		ls, _ := h.store.Leases(context.Background(), "task.a")
		return len(ls) == 1
	})
	cancel() // the client goes away while the grant's answer waits
	close(gate)
	if a := <-claimed; !errors.Is(a.err, context.Canceled) || len(a.resp.Assignments) != 0 {
		t.Fatalf("claim = %+v, %v; want context.Canceled", a.resp, a.err)
	}
	ls, _ := h.store.Leases(context.Background(), "task.a")
	if len(ls) != 1 || ls[0].Status != state.LeaseReleased {
		t.Fatalf("leases %+v", ls)
	}
	if tk := h.task("task.a"); tk.Status != state.TaskQueued || tk.LostUsed != 0 {
		t.Errorf("task %+v", tk)
	}
	resp, err := h.c.Claim(context.Background(), s, 1, 0)
	if err != nil || len(resp.Assignments) != 1 || resp.Assignments[0].Attempt != 2 {
		t.Errorf("reclaim %+v, %v", resp, err)
	}
}

// An operator's interruption spends no retry budget: an attempt given up
// while draining (lost) is handed back, and ReleaseLeases ends the rest
// the same way; with max_lost = 1 neither task fails.
func TestInterruptSpendsNoBudget(t *testing.T) {
	t.Parallel()
	tasks := []coordinator.TaskRuntime{withRetry(rtTask("a"), 1, 1, time.Second), withRetry(rtTask("b"), 1, 1, time.Second)}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
	w := h.register("p")
	got := w.claim(2)
	if len(got) != 2 {
		t.Fatalf("claimed %+v", got)
	}
	h.c.Interrupt()
	if r := w.post(got[0], "lost", ""); r.Decision != state.DecisionRejected {
		t.Errorf("lost result while interrupted = %+v, want the lease handed back (rejected)", r)
	}
	if n := h.c.ReleaseLeases(context.Background(), "apply interrupted"); n != 1 {
		t.Errorf("ReleaseLeases = %d, want 1 (the lease still active)", n)
	}
	for _, addr := range []string{"task.a", "task.b"} {
		if tk := h.task(addr); tk.Status != state.TaskQueued || tk.LostUsed != 0 {
			t.Errorf("%s after the interruption: %s, lost_used %d; want queued with its budget intact", addr, tk.Status, tk.LostUsed)
		}
	}
}

// A pool whose workers share no disk with apply (pods) runs a task that
// sets no dir in the attempt's own directory; a dir the task sets is
// handed on as it is, and other pools get the configuration directory.
func TestWorkDirOfPoolsThatShareNoDisk(t *testing.T) {
	t.Parallel()
	pods := rtPool("pods", 2, "where=pod")
	pods.SharesNoDisk = true
	defaulted := placed(rtTask("defaulted"), "where=pod")
	defaulted.DefaultDir = true
	set := placed(rtTask("set"), "where=pod")
	local := placed(rtTask("local"), "where=here")
	local.DefaultDir = true
	h := newHarness(t, []coordinator.PoolRuntime{pods, rtPool("here", 1, "where=here")}, []coordinator.TaskRuntime{defaulted, set, local}, harnessOpts{})
	got := map[string]string{}
	for _, a := range h.register("pods").claim(2) {
		got[a.Task] = a.WorkDir
	}
	for _, a := range h.register("here").claim(1) {
		got[a.Task] = a.WorkDir
	}
	want := map[string]string{"task.defaulted": "", "task.set": "/tmp", "task.local": "/tmp"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("work dirs %v, want %v", got, want)
	}
}

// TestLeaveHandsBackLeases: a worker that leaves is gone at once, the
// lease it held is handed back without spending the task's retries (the
// next worker gets attempt 2), its session is refused from then on, and a
// result it posts late is rejected.
func TestLeaveHandsBackLeases(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	resp, err := w.cl.Leave(context.Background(), w.id, protocol.LeaveRequest{Reason: "the script ended"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Released, []int64{a.FencingToken}) {
		t.Errorf("leave released %v, want [%d]", resp.Released, a.FencingToken)
	}
	if l, _ := h.store.Lease(context.Background(), a.FencingToken); l.Status != state.LeaseReleased {
		t.Errorf("lease after leave %+v", l)
	}
	if ws, _ := h.store.Worker(context.Background(), w.id); ws.Status != state.WorkerGone {
		t.Errorf("worker after leave %+v", ws)
	}
	tk := h.task("task.a")
	if tk.Status != state.TaskQueued || tk.LostUsed != 0 || tk.FailuresUsed != 0 {
		t.Errorf("task after leave %+v", tk)
	}
	if evs := h.stateEvents("task.a", state.EventReleased); len(evs) != 1 || !strings.Contains(evs[0].Message, "its worker left: the script ended") {
		t.Errorf("released events %+v", evs)
	}
	if p := h.c.Progress(); p.Pools[0].Gone != 1 || p.Pools[0].Leases != 0 {
		t.Errorf("progress %+v", p.Pools)
	}
	// Its session is over.
	_, err = w.cl.Heartbeat(context.Background(), w.id, protocol.HeartbeatRequest{})
	if protocol.StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("heartbeat after leave: %v, want 401", err)
	}
	_, err = w.cl.Leave(context.Background(), w.id, protocol.LeaveRequest{})
	if protocol.StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("second leave: %v, want 401", err)
	}
	// The task runs again on another worker, as attempt 2.
	w2 := h.register("p")
	if b := w2.claimOne(); b.Attempt != 2 || b.Task != "task.a" {
		t.Errorf("reclaim %+v", b)
	}
}

// TestLeaveRefusesBadInput: a leave is a session call for the session's
// own worker, with a short printable reason.
func TestLeaveRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	other := h.register("p")
	for _, tc := range []struct {
		name   string
		id     string
		req    protocol.LeaveRequest
		status int
	}{
		{"another worker's id", other.id, protocol.LeaveRequest{}, http.StatusForbidden},
		{"an unknown worker id", "w-nope", protocol.LeaveRequest{}, http.StatusForbidden},
		{"a reason too long", w.id, protocol.LeaveRequest{Reason: strings.Repeat("x", protocol.MaxLeaveReasonBytes+1)}, http.StatusBadRequest},
		{"a control character", w.id, protocol.LeaveRequest{Reason: "a\x1b[2Jb"}, http.StatusBadRequest},
	} {
		_, err := w.cl.Leave(context.Background(), tc.id, tc.req)
		if protocol.StatusOf(err) != tc.status {
			t.Errorf("%s: %v, want status %d", tc.name, err, tc.status)
		}
	}
	if ws, _ := h.store.Worker(context.Background(), w.id); ws.Status != state.WorkerActive {
		t.Errorf("worker after refused leaves %+v", ws)
	}
}
