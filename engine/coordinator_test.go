package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []PoolRuntime{rtPool("a", 1), rtPool("b", 1)}, []TaskRuntime{rtTask("x")}, harnessOpts{})
	wa, wb := h.register("a"), h.register("b")
	tokA, tokB := wa.session, wb.session
	launch := issueLaunch(t, h.c, "a")
	used := issueLaunch(t, h.c, "a")
	if _, err := protocol.NewClient(h.srv.URL, used, nil).Register(context.Background(), protocol.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	ops := h.c.OperatorCredential()
	big := `{"host":"` + strings.Repeat("x", MaxRequestBytes) + `"}`
	result := `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1,"idempotency_key":"k"}`
	cases := []struct {
		name, method, path, auth, body string
		status                         int
		code, reason                   string
	}{
		{"no credential", "POST", "/v1/workers", "", `{}`, 401, "unauthorized", protocol.ReasonMissingCredential},
		{"unknown credential", "POST", "/v1/workers", "Bearer nope", `{}`, 401, "unauthorized", protocol.ReasonUnknownCredential},
		{"basic auth", "POST", "/v1/workers", "Basic " + launch, `{}`, 401, "unauthorized", protocol.ReasonMissingCredential},
		{"used launch credential", "POST", "/v1/workers", "Bearer " + used, `{}`, 401, "unauthorized", protocol.ReasonCredentialUsed},
		{"session registers", "POST", "/v1/workers", "Bearer " + tokA, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"operator registers", "POST", "/v1/workers", "Bearer " + ops, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"launch credential claims", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + launch, `{"max":1}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"wrong session on claim", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer x" + tokA, `{"max":1}`, 401, "unauthorized", protocol.ReasonUnknownCredential},
		{"session sweeps", "POST", "/v1/operator/sweep", "Bearer " + tokA, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"GET", "GET", "/v1/workers", "Bearer " + launch, ``, 405, "bad_request", ""},
		{"bad json", "POST", "/v1/workers", "Bearer " + launch, `{"host":`, 400, "bad_request", ""},
		{"empty body", "POST", "/v1/workers", "Bearer " + launch, ``, 400, "bad_request", ""},
		{"null body", "POST", "/v1/workers", "Bearer " + launch, `null`, 400, "bad_request", ""},
		{"array body", "POST", "/v1/workers", "Bearer " + launch, `[]`, 400, "bad_request", ""},
		{"dot-dot path", "POST", "/v1/workers/../workers", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"doubled slash", "POST", "/v1//workers", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"trailing slash", "POST", "/v1/workers/", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"trailing data", "POST", "/v1/workers", "Bearer " + launch, `{} {}`, 400, "bad_request", ""},
		{"negative pid", "POST", "/v1/workers", "Bearer " + launch, `{"pid":-1}`, 400, "bad_request", ""},
		{"long request id", "POST", "/v1/workers", "Bearer " + launch, `{"request_id":"` + strings.Repeat("r", 129) + `"}`, 400, "bad_request", ""},
		{"control characters in host", "POST", "/v1/workers", "Bearer " + launch, `{"host":"a\u001b[31mred\nw-fake"}`, 400, "bad_request", ""},
		{"token with a leading zero", "POST", "/v1/leases/01/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"huge error text", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","idempotency_key":"k","error":"` + strings.Repeat("e", MaxErrorBytes+1) + `"}`, 400, "bad_request", ""},
		{"oversize", "POST", "/v1/workers", "Bearer " + launch, big, 400, "bad_request", ""},
		{"unknown route", "POST", "/v1/nothing", "Bearer " + launch, `{}`, 404, "not_found", ""},
		{"another worker's heartbeat", "POST", "/v1/workers/w-nope/heartbeat", "Bearer " + tokA, `{}`, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"worker of another pool", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokB, `{"max":1}`, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"claim max 0", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokA, `{"max":0}`, 400, "bad_request", ""},
		{"claim negative wait", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokA, `{"max":1,"wait_ms":-5}`, 400, "bad_request", ""},
		{"heartbeat bad token", "POST", "/v1/workers/" + wa.id + "/heartbeat", "Bearer " + tokA, `{"leases":[0]}`, 400, "bad_request", ""},
		{"result token not a number", "POST", "/v1/leases/abc/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"result token 0", "POST", "/v1/leases/0/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"result without key", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1}`, 400, "bad_request", ""},
		{"result bad class", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1,"idempotency_key":"k","failure_class":"meh"}`, 400, "bad_request", ""},
		{"result naming another worker", "POST", "/v1/leases/1/result", "Bearer " + tokB, result, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"join token without ttl", "POST", "/v1/operator/join-tokens", "Bearer " + ops, `{"pool":"a"}`, 400, "bad_request", ""},
		{"revoke unknown join token", "POST", "/v1/operator/join-tokens/jt-nope/revoke", "Bearer " + ops, `{}`, 404, "not_found", ""},
		{"lease of unknown task", "POST", "/v1/operator/lease", "Bearer " + ops, `{"task":"task.nope"}`, 404, "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, h.srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			req.Header.Set(protocol.VersionHeader, "1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e protocol.Error
			if resp.StatusCode != c.status || json.Unmarshal(b, &e) != nil || e.Code != c.code || e.Reason != c.reason || e.Message == "" {
				t.Errorf("%s %s: %d %s; want %d with code %s, reason %q", c.method, c.path, resp.StatusCode, b, c.status, c.code, c.reason)
			}
		})
	}
	// Nothing above changed any task, and no result was recorded.
	if rs, _ := h.store.Results(context.Background(), ""); len(rs) != 0 {
		t.Errorf("results recorded: %+v", rs)
	}
}

// TestProtocolVersions: every answer names the version the coordinator
// speaks and the range it accepts; a request without a version, or with one
// outside the range, gets a typed 400 naming both; a request with fields
// the coordinator does not know is served (docs/protocol.md, "Versions").
func TestProtocolVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []PoolRuntime{rtPool("a", 1)}, []TaskRuntime{rtTask("x")}, harnessOpts{})
	cases := []struct {
		name, version, body string
		status              int
		code, message       string
	}{
		{"no version", "", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, "has no Wdc-Protocol-Version header; this coordinator accepts protocol versions 1 to 1"},
		{"newer version", "2", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `speaks protocol version "2"; this coordinator accepts protocol versions 1 to 1`},
		{"not a number", "one", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `"one"`},
		{"not canonical", "01", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `"01"`},
		{"version 1 with an unknown field", "1", `{"host":"h","pid":3,"newer_field":{"x":1}}`, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+"/v1/workers", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+issueLaunch(t, h.c, "a"))
			if c.version != "" {
				req.Header.Set(protocol.VersionHeader, c.version)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.Header.Get(protocol.VersionHeader) != "1" || resp.Header.Get(protocol.AcceptedVersionsHeader) != "1-1" {
				t.Errorf("answer headers %v; want the version and the accepted range", resp.Header)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("%d %s; want %d", resp.StatusCode, b, c.status)
			}
			if c.code == "" {
				return
			}
			var e protocol.Error
			if json.Unmarshal(b, &e) != nil || e.Code != c.code || !strings.Contains(e.Message, c.message) {
				t.Errorf("answer %s; want code %s and a message containing %q", b, c.code, c.message)
			}
		})
	}
}

func TestLabelsComeFromToken(t *testing.T) {
	t.Parallel()
	pools := []PoolRuntime{rtPool("cpu", 2, "arch=amd64"), rtPool("gpu", 1, "arch=amd64", "gpu=a100")}
	tasks := []TaskRuntime{placed(rtTask("train"), "gpu=a100"), placed(rtTask("lint"), "arch=amd64")}
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
	tasks := []TaskRuntime{rtTask("report", "task.build", "task.test"), rtTask("build"), rtTask("test", "task.build")}
	h := newHarness(t, []PoolRuntime{rtPool("p", 4)}, tasks, harnessOpts{})
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
	pools := []PoolRuntime{rtPool("p", 1)}
	upsertAll(t, s, pools, []TaskRuntime{rtTask("ok"), rtTask("bad")}, ct0)
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
	tasks := []TaskRuntime{rtTask("after-ok", "task.ok"), rtTask("after-bad", "task.bad"), rtTask("after-after-bad", "task.after-bad"), rtTask("after-missing", "task.missing")}
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
	var tasks []TaskRuntime
	for i := range nTasks {
		tasks = append(tasks, withRetry(rtTask(fmt.Sprintf("t%02d", i)), 3, 3, time.Millisecond))
	}
	p := rtPool("p", 2)
	p.HeartbeatInterval, p.TTL = time.Minute, 10*time.Minute // the workers below never heartbeat
	h := newHarness(t, []PoolRuntime{p}, tasks, harnessOpts{realClock: true, maxClaimWait: 200 * time.Millisecond})
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
	pools := []PoolRuntime{rtPool("p", 1)}
	tasks := []TaskRuntime{withRetry(rtTask("a"), 5, 3, time.Second)}
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
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{withRetry(rtTask("a"), 3, 3, time.Second)}, harnessOpts{})
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
			h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{withRetry(rtTask("a"), 3, 3, time.Second)}, harnessOpts{})
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
			if got := h.eventKinds(""); !slices.Contains(got, EventRejected) {
				t.Errorf("OnEvent kinds %v lack rejected", got)
			}
		})
	}
}

func TestRetryAndBudgets(t *testing.T) {
	t.Parallel()
	t.Run("backoff", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{withRetry(rtTask("a"), 3, 3, 10*time.Second)}, harnessOpts{})
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
			tasks := []TaskRuntime{withRetry(rtTask("a"), c.maxAttempts, c.maxLost, time.Second), rtTask("b", "task.a"), rtTask("c", "task.b"), rtTask("d")}
			h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, tasks, harnessOpts{})
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
				if !slices.Contains(kinds, EventCancelled) {
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
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rt}, harnessOpts{})
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
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
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
	if got := h.eventKinds(""); !slices.Contains(got, EventStale) {
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
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a")}, harnessOpts{})
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
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
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
	pools := []PoolRuntime{rtPool("gpu", 1, "gpu=yes"), rtPool("any", 1)}
	tasks := []TaskRuntime{placed(rtTask("train"), "gpu=yes"), rtTask("eval", "task.train"), rtTask("lint")}
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

func TestNewCoordinatorValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a")}, harnessOpts{})
	good := []PoolRuntime{rtPool("p", 1)}
	cases := []struct {
		name string
		opts CoordinatorOptions
		want string
	}{
		{"no store", CoordinatorOptions{Pools: good}, "store"},
		{"no pools", CoordinatorOptions{Store: h.store}, "at least one pool"},
		{"duplicate pool", CoordinatorOptions{Store: h.store, Pools: []PoolRuntime{rtPool("p", 1), rtPool("p", 1)}}, "twice"},
		{"duplicate task", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{rtTask("a"), rtTask("a")}}, "twice"},
		{"unknown task", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{rtTask("zz")}}, "not found"},
		{"other def hash", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{func() TaskRuntime { r := rtTask("a"); r.DefHash = "x"; return r }()}}, "def_hash"},
		{"other budget", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{withRetry(rtTask("a"), 9, 3, 0)}}, "budgets"},
		{"unplaceable", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{placed(rtTask("a"), "gpu=yes")}}, "placement"},
		{"negative timeout", CoordinatorOptions{Store: h.store, Pools: good, Tasks: []TaskRuntime{func() TaskRuntime { r := rtTask("a"); r.Timeout = -1; return r }()}}, "negative"},
	}
	for _, c := range cases {
		if _, err := NewCoordinator(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestHandlerNeverPanicsOnRawGarbage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a")}, harnessOpts{maxClaimWait: time.Millisecond})
	w := h.register("p")
	tok := w.session
	bodies := []string{"", "null", "[]", "{}", `{"max":1e400}`, `{"leases":["x"]}`, `{"started_at":"yesterday"}`, "\x00\xff", `{"max":1}{"max":2}`}
	paths := []string{"/v1/workers", "/v1/workers/" + w.id + "/heartbeat", "/v1/workers/" + w.id + "/claim", "/v1/leases/1/result", "/v1/leases/99999999999999999999/result", "/v1/leases/-1/result", "/v1/workers//claim"}
	for _, p := range paths {
		for _, b := range bodies {
			req, _ := http.NewRequest("POST", h.srv.URL+p, bytes.NewReader([]byte(b)))
			authed(req, tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("POST %s %q: %d", p, b, resp.StatusCode)
			}
		}
	}
}

func TestRevokeLeases(t *testing.T) {
	t.Parallel()
	tasks := []TaskRuntime{withRetry(rtTask("a"), 1, 2, time.Second), withRetry(rtTask("z"), 1, 0, time.Second)}
	h := newHarness(t, []PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
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
// released (no budget spent) and the task can be claimed again.
func TestAbandonedClaimIsReleased(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []PoolRuntime{rtPool("p", 1)}, []TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	ctx, cancel := context.WithCancel(context.Background())
	c, err := NewCoordinator(CoordinatorOptions{Store: h.store, Pools: []PoolRuntime{rtPool("p", 1)}, Tasks: []TaskRuntime{rtTask("a")},
		Now: h.clock.Now, OnEvent: func(e Event) {
			if e.Kind == EventLeased {
				cancel() // the client goes away while the grant commits
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ps := c.poolByNam["p"]
	c.mu.Lock()
	c.workers[w.id] = &workerState{id: w.id, pool: ps, status: state.WorkerActive}
	ws := c.workers[w.id]
	c.mu.Unlock()
	if resp, err := c.claim(ctx, ws, 1, 0); !errors.Is(err, context.Canceled) || len(resp.Assignments) != 0 {
		t.Fatalf("claim = %+v, %v; want context.Canceled", resp, err)
	}
	ls, _ := h.store.Leases(context.Background(), "task.a")
	if len(ls) != 1 || ls[0].Status != state.LeaseReleased {
		t.Fatalf("leases %+v", ls)
	}
	if tk := h.task("task.a"); tk.Status != state.TaskQueued || tk.LostUsed != 0 {
		t.Errorf("task %+v", tk)
	}
	resp, err := c.claim(context.Background(), ws, 1, 0)
	if err != nil || len(resp.Assignments) != 1 || resp.Assignments[0].Attempt != 2 {
		t.Errorf("reclaim %+v, %v", resp, err)
	}
}

// An operator's interruption spends no retry budget: an attempt given up
// while draining (lost) is handed back, and ReleaseLeases ends the rest
// the same way; with max_lost = 1 neither task fails.
func TestInterruptSpendsNoBudget(t *testing.T) {
	t.Parallel()
	tasks := []TaskRuntime{withRetry(rtTask("a"), 1, 1, time.Second), withRetry(rtTask("b"), 1, 1, time.Second)}
	h := newHarness(t, []PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
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
	h := newHarness(t, []PoolRuntime{pods, rtPool("here", 1, "where=here")}, []TaskRuntime{defaulted, set, local}, harnessOpts{})
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
