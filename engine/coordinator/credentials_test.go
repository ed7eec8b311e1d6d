package coordinator_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// reasonOf returns the status and typed reason of a protocol error.
func reasonOf(err error) (int, string) {
	var ae *protocol.APIError
	if errors.As(err, &ae) {
		return ae.Status, ae.Reason
	}
	return 0, ""
}

// TestLaunchCredentialRegistersOnce: a launch credential is exchanged for a
// session once; a retry of that very registration (same request id, its
// answer lost) gets the same worker and session back; any other second use
// is refused with credential_used and recorded as an event (once per
// RefusalInterval); the session
// works only for its own worker.
func TestLaunchCredentialRegistersOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1, "zone=a")}, []coordinator.TaskRuntime{rtTask("x")}, harnessOpts{})
	ctx := context.Background()
	cred := issueLaunch(t, h.c, "p")
	if !strings.HasPrefix(cred, protocol.LaunchCredentialPrefix) {
		t.Fatalf("launch credential %q lacks its prefix", cred)
	}
	cl := protocol.NewClient(h.srv.URL, cred, nil)
	first, err := cl.Register(ctx, protocol.RegisterRequest{Host: "h", PID: 3, RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.SessionToken, protocol.SessionTokenPrefix) || first.Pool != "p" || first.Labels["zone"] != "a" {
		t.Fatalf("registration %+v", first)
	}
	retry, err := cl.Register(ctx, protocol.RegisterRequest{Host: "h", PID: 3, RequestID: "req-1"})
	if err != nil || retry.WorkerID != first.WorkerID || retry.SessionToken != first.SessionToken {
		t.Fatalf("retry with the same request id = %+v, %v; want the same worker and session", retry, err)
	}
	for _, req := range []protocol.RegisterRequest{{Host: "h", RequestID: "req-2"}, {Host: "thief"}} {
		_, err := cl.Register(ctx, req)
		if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonCredentialUsed {
			t.Errorf("second use %+v: %v; want 401 credential_used", req, err)
		}
	}
	// Recorded once per RefusalInterval of the credential
	// (TestRefusedRegistrationsStayBounded), counted every time.
	if n := len(h.stateEvents("", coordinator.EventRegistrationRefused)); n != 1 {
		t.Errorf("%d registration_refused events in the state; want 1", n)
	}
	if got := h.metrics()[`wdc_registrations_refused_total{pool="p",reason="credential_used"}`]; got != 2 {
		t.Errorf("wdc_registrations_refused_total = %v; want 2", got)
	}
	snap, _ := h.store.Snapshot(ctx)
	if len(snap.Workers) != 1 {
		t.Errorf("%d workers registered; want 1", len(snap.Workers))
	}
	launches, _ := h.store.Launches(ctx, h.c.ApplyID())
	if len(launches) != 1 || launches[0].Status != state.LaunchRegistered || launches[0].WorkerID != first.WorkerID {
		t.Errorf("launches %+v", launches)
	}
	// The session is this worker's only.
	session := cl.WithToken(first.SessionToken)
	if _, err := session.Heartbeat(ctx, first.WorkerID, protocol.HeartbeatRequest{}); err != nil {
		t.Errorf("heartbeat with the session: %v", err)
	}
	other := h.register("p")
	if _, err := session.Heartbeat(ctx, other.id, protocol.HeartbeatRequest{}); protocol.StatusOf(err) != 403 {
		t.Errorf("heartbeat for another worker: %v; want 403", err)
	}
	if _, err := session.PostResult(ctx, 1, protocol.ResultRequest{WorkerID: other.id, IdempotencyKey: "k"}); protocol.StatusOf(err) != 403 {
		t.Errorf("result naming another worker: %v; want 403", err)
	}
}

// TestLaunchCredentialExpires: past launch_timeout a credential is worthless,
// whether or not apply closed the launch yet; CloseLaunch revokes an open
// one and leaves a registered one alone.
func TestLaunchCredentialExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("x")}, harnessOpts{})
	ctx := context.Background()
	late, err := h.c.IssueLaunch(ctx, "p", 901, "local", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := h.c.IssueLaunch(ctx, "p", 902, "local", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.c.CloseLaunch(ctx, "p", 902, false); !ok || err != nil {
		t.Fatalf("CloseLaunch = %v, %v", ok, err)
	}
	h.clock.Advance(time.Minute)
	for name, cred := range map[string]string{"past its timeout": late, "closed": closed} {
		_, err := protocol.NewClient(h.srv.URL, cred, nil).Register(ctx, protocol.RegisterRequest{})
		if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonCredentialExpired {
			t.Errorf("%s: %v; want 401 credential_expired", name, err)
		}
	}
	w := h.register("p")
	if ok, err := h.c.CloseLaunch(ctx, "p", h.workerSeq(w.id), false); ok || err != nil {
		t.Errorf("CloseLaunch of a registered launch = %v, %v; want false", ok, err)
	}
	if _, err := h.c.CloseLaunch(ctx, "p", 999, false); err == nil {
		t.Errorf("CloseLaunch of an unknown launch succeeded")
	}
}

// workerSeq returns the launch sequence a worker registered with.
func (h *harness) workerSeq(id string) int { return coordinator.WorkerSeq(h.c, id) }

// TestJoinTokens: a join token registers any number of workers of its pool
// up to max; a narrowing token gives the pool's labels restricted to its
// own, and its workers claim only what those satisfy; revoking it refuses
// new registrations and drains its workers; an expired one is refused.
func TestJoinTokens(t *testing.T) {
	t.Parallel()
	pool := rtPool("edge", 1, "arch=arm64", "zone=a")
	pool.Joinable, pool.Max = true, 3
	tasks := []coordinator.TaskRuntime{placed(rtTask("any"), "arch=arm64"), placed(rtTask("zoned"), "zone=a")}
	h := newHarness(t, []coordinator.PoolRuntime{pool}, tasks, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	// A join token only narrows: a label the pool lacks is refused.
	if _, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "edge", Labels: map[string]string{"gpu": "a100"}, TTLMS: 60_000}); protocol.StatusOf(err) != 400 {
		t.Errorf("a broadening join token: %v; want 400", err)
	}
	if _, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "nope", TTLMS: 60_000}); protocol.StatusOf(err) != 404 {
		t.Errorf("a join token of an unknown pool: %v; want 404", err)
	}
	narrow, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "edge", Labels: map[string]string{"arch": "arm64"}, TTLMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	wide, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "edge", TTLMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(narrow.Credential, protocol.JoinCredentialPrefix) || narrow.ID == wide.ID {
		t.Fatalf("join tokens %+v, %+v", narrow, wide)
	}
	join := func(cred string) (protocol.RegisterResponse, *protocol.Client, error) {
		cl := protocol.NewClient(h.srv.URL, cred, nil)
		reg, err := cl.Register(ctx, protocol.RegisterRequest{Host: "edge-node"})
		return reg, cl.WithToken(reg.SessionToken), err
	}
	n1, ncl, err := join(narrow.Credential)
	if err != nil {
		t.Fatal(err)
	}
	if len(n1.Labels) != 1 || n1.Labels["arch"] != "arm64" {
		t.Errorf("narrowed labels %v; want only arch=arm64", n1.Labels)
	}
	nw := &worker{h: h, cl: ncl, id: n1.WorkerID}
	if got := nw.claim(1); len(got) != 1 || got[0].Task != "task.any" {
		t.Fatalf("narrowed worker claimed %+v; want task.any", got)
	}
	nw.post(protocol.Assignment{Task: "task.any", Attempt: 1, FencingToken: 1}, "", "")
	if got := nw.claim(1); len(got) != 0 {
		t.Errorf("narrowed worker claimed %+v; task.zoned needs zone=a, which it was not given", got)
	}
	w2, _, err := join(wide.Credential)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Labels["zone"] != "a" {
		t.Errorf("wide labels %v", w2.Labels)
	}
	if _, _, err := join(wide.Credential); err != nil {
		t.Fatalf("third join: %v", err)
	}
	if _, _, err := join(wide.Credential); protocol.StatusOf(err) != 409 {
		t.Errorf("a fourth worker past max 3: %v; want 409 pool_full", err)
	}
	rev, err := ops.RevokeJoinToken(ctx, narrow.ID)
	if err != nil || len(rev.Draining) != 1 || rev.Draining[0] != n1.WorkerID {
		t.Fatalf("revoke = %+v, %v", rev, err)
	}
	if r, err := ncl.Heartbeat(ctx, n1.WorkerID, protocol.HeartbeatRequest{}); err != nil || !r.Drain {
		t.Errorf("heartbeat of a revoked token's worker = %+v, %v; want drain", r, err)
	}
	_, _, err = join(narrow.Credential)
	if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonCredentialRevoked {
		t.Errorf("registration with a revoked join token: %v; want 401 credential_revoked", err)
	}
	// Its worker stays draining even after it went stale and came back.
	h.clock.Advance(time.Minute)
	h.sweep()
	if r, err := ncl.Heartbeat(ctx, n1.WorkerID, protocol.HeartbeatRequest{}); err != nil || !r.Drain {
		t.Errorf("heartbeat after stale = %+v, %v; want drain", r, err)
	}
	if got, err := ncl.Claim(ctx, n1.WorkerID, protocol.ClaimRequest{Max: 1}); err != nil || len(got.Assignments) != 0 || !got.Drain {
		t.Errorf("claim of a revoked token's worker = %+v, %v; want drain and nothing", got, err)
	}
	// An expired token, from the state (made before the apply).
	secret := "wdcj_expired-secret"
	if _, err := h.store.CreateJoinToken(ctx, state.JoinToken{Pool: "edge", ExpiresAt: h.clock.Now().Add(time.Minute)}, coordinator.HashSecret(secret), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, []coordinator.PoolRuntime{pool}, tasks, harnessOpts{path: h.path, skipUpsert: true})
	h2.clock.Set(h.clock.Now().Add(2 * time.Minute))
	_, err = protocol.NewClient(h2.srv.URL, secret, nil).Register(ctx, protocol.RegisterRequest{})
	if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonCredentialExpired {
		t.Errorf("expired join token: %v; want 401 credential_expired", err)
	}
}

// TestStolenIdempotencyKey: a worker that posts first with another worker's
// idempotency key is judged on its own (wrong_worker), and the real
// worker's result is then accepted, not answered as a duplicate.
func TestStolenIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	real, thief := h.register("p"), h.register("p")
	a := real.claimOne()
	thief.claimOne()
	key := real.id + "-" + strconvI(a.FencingToken)
	if r := thief.post(a, "failure", key); r.Decision != "rejected" || r.Reason != "wrong_worker" || r.Duplicate {
		t.Fatalf("the thief's post: %+v; want rejected wrong_worker", r)
	}
	if r := real.post(a, "", key); r.Decision != "accepted" || r.Duplicate {
		t.Fatalf("the real post: %+v; want accepted, not a duplicate", r)
	}
	if st := h.task("task.a").Status; st != state.TaskSucceeded {
		t.Errorf("task.a is %s; want succeeded", st)
	}
}

// TestOperatorRoutes: the lease lookup and a sweep pass, with the operator
// credential only.
func TestOperatorRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	if r, err := ops.Lease(ctx, "task.a"); err != nil || r.Lease != nil {
		t.Errorf("lease before any claim = %+v, %v; want none", r, err)
	}
	w := h.register("p")
	a := w.claimOne()
	r, err := ops.Lease(ctx, "task.a")
	if err != nil || r.Lease == nil || r.Lease.FencingToken != a.FencingToken || r.Lease.Status != "active" || r.Lease.WorkerID != w.id {
		t.Errorf("lease = %+v, %v", r, err)
	}
	h.clock.Advance(time.Hour)
	sw, err := ops.Sweep(ctx)
	if err != nil || len(sw.Expired) != 1 || sw.Expired[0].FencingToken != a.FencingToken || len(sw.Stale) != 1 || sw.Stale[0] != w.id {
		t.Errorf("sweep = %+v, %v", sw, err)
	}
	if _, err := w.cl.Sweep(ctx); protocol.StatusOf(err) != 401 {
		t.Errorf("sweep with a session: %v; want 401", err)
	}
}

// TestWorkerGoneRevokesSession: a worker marked gone loses its session.
func TestWorkerGoneRevokesSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	if err := h.c.WorkerGone(context.Background(), w.id); err != nil {
		t.Fatal(err)
	}
	_, err := w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 1})
	if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonSessionRevoked {
		t.Errorf("claim after gone: %v; want 401 session_revoked", err)
	}
	if got, _ := h.store.Worker(context.Background(), w.id); got.Status != state.WorkerGone {
		t.Errorf("worker is %s; want gone", got.Status)
	}
}

func strconvI(n int64) string { return strconv.FormatInt(n, 10) }

// TestJoinLimits: a retried join with the same request id gets the same
// worker back (no second slot); a pool its provider launches takes no join
// tokens; a worker whose slot was taken while it was stale drains instead
// of taking the pool past max.
func TestJoinLimits(t *testing.T) {
	t.Parallel()
	edge := rtPool("edge", 1)
	edge.Joinable, edge.Max = true, 1
	h := newHarness(t, []coordinator.PoolRuntime{edge, rtPool("local", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	jt, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "edge", TTLMS: 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "local", TTLMS: 60_000}); protocol.StatusOf(err) != 400 {
		t.Errorf("a join token of a launched pool: %v; want 400", err)
	}
	cl := protocol.NewClient(h.srv.URL, jt.Credential, nil)
	first, err := cl.Register(ctx, protocol.RegisterRequest{RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.Register(ctx, protocol.RegisterRequest{RequestID: "r1"})
	if err != nil || again.WorkerID != first.WorkerID || again.SessionToken != first.SessionToken {
		t.Errorf("retried join = %+v, %v; want the same worker", again, err)
	}
	if _, err := cl.Register(ctx, protocol.RegisterRequest{RequestID: "r2"}); protocol.StatusOf(err) != 409 {
		t.Errorf("a second worker past max 1: %v; want 409", err)
	}
	// The first goes stale; another takes its slot; the first comes back.
	h.clock.Advance(time.Minute)
	h.sweep()
	second, err := cl.Register(ctx, protocol.RegisterRequest{RequestID: "r3"})
	if err != nil {
		t.Fatalf("join after the first went stale: %v", err)
	}
	old := cl.WithToken(first.SessionToken)
	if r, err := old.Heartbeat(ctx, first.WorkerID, protocol.HeartbeatRequest{}); err != nil || !r.Drain {
		t.Errorf("the stale worker back = %+v, %v; want drain (its slot is taken)", r, err)
	}
	p := h.c.Progress()
	if p.Pools[0].Active != 1 {
		t.Errorf("pool edge has %d active workers; want 1 (max)", p.Pools[0].Active)
	}
	_ = second
}
