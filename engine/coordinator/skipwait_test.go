package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// jumper jumps the harness's fake clock as a testclock.Clock jumps.
type jumper struct{ f *fakeClock }

func (j jumper) Advance(d time.Duration) { j.f.Advance(d) }

// TestSkipWait: the test clock jumps only when nothing but waiting is
// left (no lease, no claimable task), to the earliest wait ahead (a
// delayed retry, or a deadline the caller gives), and the jump moves the
// workers' last heartbeats with it: a sweep right after finds no worker
// stale though the jump is far longer than their ttl, and the retry is
// claimable at once.
func TestSkipWait(t *testing.T) {
	ctx := context.Background()
	pools := []coordinator.PoolRuntime{rtPool("p", 1)}
	tasks := []coordinator.TaskRuntime{withRetry(rtTask("a"), 2, 3, 10*time.Minute), rtTask("b")}
	h := newHarness(t, pools, tasks, harnessOpts{})
	clock := jumper{h.clock}
	skip := func(step string, also []time.Time, want time.Duration) {
		t.Helper()
		d, err := h.c.SkipWait(ctx, clock, also)
		if err != nil || d != want {
			t.Fatalf("%s: SkipWait = %s, %v; want %s", step, d, err, want)
		}
	}
	w := h.register("p")
	skip("a registered worker, two claimable tasks", nil, 0)
	a := w.claimOne()
	skip("a lease active", nil, 0)
	if resp := w.post(a, "failure", ""); resp.Decision != protocol.DecisionAccepted {
		t.Fatalf("failure of %s: %+v", a.Task, resp)
	}
	skip("one task still claimable", nil, 0)
	b := w.claimOne()
	skip("a lease active again", nil, 0)
	w.post(b, "", "")
	retryAt := h.clock.Now().Add(10 * time.Minute)
	if got := h.task("task.a"); got.Status != state.TaskQueued {
		t.Fatalf("task.a is %s, want queued for its retry", got.Status)
	}

	// A deadline of the caller's before the retry comes first; one past
	// already is none.
	skip("an idle delay ends before the retry", []time.Time{h.clock.Now().Add(-time.Second), h.clock.Now().Add(5 * time.Second)}, 5*time.Second+time.Millisecond)
	h.sweep()
	if got := h.c.Progress().Pools[0]; got.Stale != 0 || got.Active != 1 {
		t.Fatalf("after a 5s jump (ttl 10s): %+v, want the worker active", got)
	}
	if len(w.claim(1)) != 0 {
		t.Fatal("the retry was claimable before its backoff ended")
	}

	before, err := h.store.Worker(ctx, w.id)
	if err != nil {
		t.Fatal(err)
	}
	want := retryAt.Sub(h.clock.Now()).Truncate(time.Millisecond) + time.Millisecond
	skip("only the retry's backoff is left", nil, want)
	if h.clock.Now().Before(retryAt) {
		t.Fatalf("the clock is at %s, before the retry at %s", h.clock.Now(), retryAt)
	}
	after, err := h.store.Worker(ctx, w.id)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.LastHeartbeatAt.Sub(before.LastHeartbeatAt); got != want {
		t.Fatalf("the worker's last heartbeat moved %s, want %s (the jump)", got, want)
	}
	if last, _ := h.c.WorkerLastSeen(w.id); !last.Equal(before.LastHeartbeatAt.Add(want)) {
		t.Fatalf("the coordinator last saw the worker at %s, want %s", last, before.LastHeartbeatAt.Add(want))
	}
	h.sweep()
	if got := h.c.Progress().Pools[0]; got.Stale != 0 || got.Active != 1 {
		t.Fatalf("after a 10m jump (ttl 10s): %+v, want the worker active", got)
	}
	if a2 := w.claimOne(); a2.Task != "task.a" || a2.Attempt != 2 {
		t.Fatalf("after the jump: claimed %s attempt %d, want task.a attempt 2", a2.Task, a2.Attempt)
	}
	skip("the retry runs", nil, 0)
}
