package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// stateBytes is the size of the state file and its WAL.
func (h *harness) stateBytes() int64 {
	h.t.Helper()
	var n int64
	for _, p := range []string{h.path, h.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// rows counts the results and the events of kind the state holds.
func (h *harness) rows(kind string) (results, events int) {
	h.t.Helper()
	rs, err := h.store.Results(context.Background(), "")
	if err != nil {
		h.t.Fatal(err)
	}
	return len(rs), len(h.stateEvents("", kind))
}

// TestRejectedResultsStayBounded: what one worker's rejected results make
// the state keep is bounded (docs/protocol.md, "Bounds"), however many it
// posts with fresh keys and long errors: of results for leases not its own
// (a token no lease has, another worker's lease, another attempt), one row
// and one event per coordinator.RefusalInterval, the next one saying how
// many were not recorded; of its own late results, one per lease. A
// recorded rejection replays as a duplicate; one not recorded is judged
// afresh, to the same decision.
func TestRejectedResultsStayBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 1, 3, time.Millisecond)}, harnessOpts{})
	ctx := context.Background()
	w1, w2 := h.register("p"), h.register("p")
	old := w1.claimOne()
	h.clock.Advance(11 * time.Second)
	h.sweep() // lost, retried at once
	w1.heartbeat()
	w2.heartbeat()
	cur := w2.claimOne()
	long := strings.Repeat("e", httpapi.MaxErrorBytes)
	post := func(w *worker, token int64, key string) protocol.ResultResponse {
		t.Helper()
		one := 1
		resp, err := w.cl.PostResult(ctx, token, protocol.ResultRequest{WorkerID: w.id, IdempotencyKey: key, ExitCode: &one,
			FailureClass: "failure", Error: long})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	results0, events0 := h.rows(state.EventRejected)
	size0 := h.stateBytes()
	const n = 300
	for i := range n {
		if r := post(w1, 999999, fmt.Sprintf("none-%d", i)); r.Reason != protocol.ReasonUnknownLease || r.Duplicate {
			t.Fatalf("post %d for no lease: %+v", i, r)
		}
		if r := post(w1, cur.FencingToken, fmt.Sprintf("thief-%d", i)); r.Reason != protocol.ReasonWrongWorker || r.Duplicate {
			t.Fatalf("post %d for another worker's lease: %+v", i, r)
		}
		if r := post(w1, old.FencingToken, fmt.Sprintf("late-%d", i)); r.Reason != protocol.ReasonStaleToken || r.Duplicate {
			t.Fatalf("post %d of its own stale lease: %+v", i, r)
		}
	}
	results, events := h.rows(state.EventRejected)
	// One for leases not its own (the interval's first), one for its stale lease.
	if results-results0 != 2 || events-events0 != 2 {
		t.Errorf("%d posts of each kind kept %d results and %d rejected events; want 2 and 2", n, results-results0, events-events0)
	}
	if grew := h.stateBytes() - size0; grew > 128<<10 {
		t.Errorf("%d rejected posts of 16 KiB errors grew the state by %d bytes; want at most 128 KiB", 3*n, grew)
	}
	size1 := h.stateBytes()
	for i := range n {
		post(w1, 999999, fmt.Sprintf("more-%d", i))
	}
	if grew := h.stateBytes() - size1; grew != 0 {
		t.Errorf("%d more posts, none recorded, grew the state by %d bytes; want 0", n, grew)
	}
	if got := h.task("task.a"); got.Status != state.TaskRunning {
		t.Errorf("task.a is %s; want running", got.Status)
	}
	// The recorded ones replay as duplicates; the others are judged again.
	if r := post(w1, 999999, "none-0"); r.Reason != protocol.ReasonUnknownLease || !r.Duplicate {
		t.Errorf("replay of the recorded rejection: %+v; want a duplicate", r)
	}
	if r := post(w1, old.FencingToken, "late-0"); r.Reason != protocol.ReasonStaleToken || !r.Duplicate {
		t.Errorf("replay of its recorded stale result: %+v; want a duplicate", r)
	}
	if r := post(w1, cur.FencingToken, "thief-7"); r.Reason != protocol.ReasonWrongWorker || r.Duplicate {
		t.Errorf("replay of a rejection not recorded: %+v; want wrong_worker again, not a duplicate", r)
	}
	// The holder's result is judged as ever.
	if r := w2.post(cur, "", ""); r.Decision != "accepted" {
		t.Errorf("the holder's result: %+v", r)
	}
	// After the interval, the next one is recorded, saying how many were not.
	h.clock.Advance(coordinator.RefusalInterval)
	post(w1, 999999, "after")
	evs := h.stateEvents("", state.EventRejected)
	last := evs[len(evs)-1]
	if want := fmt.Sprintf("%d more results of worker %s for leases not its own were rejected without being recorded", 3*n, w1.id); !strings.Contains(last.Message, want) {
		t.Errorf("the next recorded rejection says %q; want it to say %q", last.Message, want)
	}
}

// TestRefusedRegistrationsStayBounded: repeated registrations with a
// credential that is refused (a revoked join token) make the state keep
// one registration_refused event per coordinator.RefusalInterval, the
// next one saying how many were not recorded; every refusal is counted in
// wdc_registrations_refused_total.
func TestRefusedRegistrationsStayBounded(t *testing.T) {
	t.Parallel()
	pool := rtPool("edge", 1)
	pool.Joinable, pool.Max = true, 2
	h := newHarness(t, []coordinator.PoolRuntime{pool}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	jt, err := ops.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: "edge", TTLMS: 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.RevokeJoinToken(ctx, jt.ID); err != nil {
		t.Fatal(err)
	}
	cl := protocol.NewClient(h.srv.URL, jt.Credential, nil)
	_, events0 := h.rows(coordinator.EventRegistrationRefused)
	const n = 200
	for i := range n {
		_, err := cl.Register(ctx, protocol.RegisterRequest{Host: "h", RequestID: fmt.Sprintf("r-%d", i)})
		if st, reason := reasonOf(err); st != 401 || reason != protocol.ReasonCredentialRevoked {
			t.Fatalf("registration %d: %v; want 401 credential_revoked", i, err)
		}
	}
	if _, events := h.rows(coordinator.EventRegistrationRefused); events-events0 != 1 {
		t.Errorf("%d refused registrations kept %d events; want 1", n, events-events0)
	}
	if got := h.eventKinds(""); countOf(got, coordinator.EventRegistrationRefused) != 1 {
		t.Errorf("OnEvent got %d registration_refused events; want 1", countOf(got, coordinator.EventRegistrationRefused))
	}
	h.clock.Advance(coordinator.RefusalInterval)
	if _, err := cl.Register(ctx, protocol.RegisterRequest{Host: "h"}); err == nil {
		t.Fatal("a revoked join token registered")
	}
	evs := h.stateEvents("", coordinator.EventRegistrationRefused)
	if want := fmt.Sprintf("%d more refusals of this credential since", n-1); len(evs) != 2 || !strings.Contains(evs[1].Message, want) {
		t.Errorf("%d registration_refused events, the last saying %q; want 2, the second saying %q", len(evs), evs[len(evs)-1].Message, want)
	}
	m := h.metrics()
	if got := m[`wdc_registrations_refused_total{pool="edge",reason="credential_revoked"}`]; got != n+1 {
		t.Errorf("wdc_registrations_refused_total = %v; want %d", got, n+1)
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}
