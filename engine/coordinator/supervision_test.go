package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TestDrainWorkerOnlyIdle: the supervisor's drain request is refused for a
// worker holding a lease; an idle worker is drained (its claims answer
// drain) and the pool's view counts it draining, its queue what is
// claimable.
func TestDrainWorkerOnlyIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b"), rtTask("c", "task.a")}, harnessOpts{})
	ctx := context.Background()
	busy, idle := h.register("p"), h.register("p")
	v, _ := h.c.PoolView("p")
	if v.Queued != 2 || v.Unfinished != 3 || len(v.Workers) != 2 {
		t.Errorf("view before claims = %+v; want 2 queued (c waits on a), 3 unfinished, 2 workers", v)
	}
	busy.claimOne()
	if ok, err := h.c.DrainWorker(ctx, busy.id); ok || err != nil {
		t.Errorf("DrainWorker of a worker holding a lease = %t, %v; want refused", ok, err)
	}
	if ok, err := h.c.DrainWorker(ctx, idle.id); !ok || err != nil {
		t.Fatalf("DrainWorker of an idle worker = %t, %v", ok, err)
	}
	resp, err := idle.cl.Claim(ctx, idle.id, protocol.ClaimRequest{Max: 1})
	if err != nil || !resp.Drain || len(resp.Assignments) != 0 {
		t.Errorf("claim of a drained worker = %+v, %v; want drain and nothing", resp, err)
	}
	if got, _ := h.store.Worker(ctx, idle.id); got.Status != state.WorkerDraining {
		t.Errorf("drained worker is %s in the state", got.Status)
	}
	if ok, _ := h.c.DrainWorker(ctx, idle.id); ok {
		t.Errorf("a draining worker was drained again")
	}
	v, _ = h.c.PoolView("p")
	if v.Queued != 1 {
		t.Errorf("view after one claim: %d queued, want 1", v.Queued)
	}
}

// TestWorkerLostRequeuesAtOnce: a worker its provider reports gone loses
// its lease at once as lost; the task is claimable again right away by
// another worker, with a higher fencing token, and the lost worker's late
// result is rejected.
func TestWorkerLostRequeuesAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, []coordinator.TaskRuntime{withRetry(rtTask("a"), 3, 3, 1<<40)}, harnessOpts{})
	ctx := context.Background()
	lost, other := h.register("p"), h.register("p")
	a := lost.claimOne()
	if err := h.c.WorkerLost(ctx, lost.id, "worker 1 (pid 1) was killed by SIGKILL"); err != nil {
		t.Fatal(err)
	}
	if l, _ := h.store.Lease(ctx, a.FencingToken); l.Status != state.LeaseRevoked {
		t.Errorf("lease after the worker was lost: %s, want revoked", l.Status)
	}
	b := other.claimOne() // no backoff: a lost attempt is due at once
	if b.Task != "task.a" || b.Attempt != 2 || b.FencingToken <= a.FencingToken {
		t.Errorf("second claim = %+v; want task.a attempt 2 with a higher token", b)
	}
	zero := 0
	if _, err := lost.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: lost.id, Task: a.Task, Attempt: a.Attempt,
		IdempotencyKey: "late", ExitCode: &zero, DefHash: a.DefHash}); protocol.StatusOf(err) != 401 {
		t.Errorf("late result of the lost worker: %v; want 401 (its session is revoked)", err)
	}
}

// WorkerLastSeen is the registration, then each heartbeat: what apply hands
// a provider's liveness mirror (a Kubernetes Lease's renewTime).
func TestWorkerLastSeen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	if got, ok := h.c.WorkerLastSeen(w.id); !ok || !got.Equal(ct0) {
		t.Errorf("after registering: %v, %v; want %v", got, ok, ct0)
	}
	later := h.clock.Advance(3 * time.Second)
	w.heartbeat()
	if got, ok := h.c.WorkerLastSeen(w.id); !ok || !got.Equal(later) {
		t.Errorf("after a heartbeat: %v, %v; want %v", got, ok, later)
	}
	if _, ok := h.c.WorkerLastSeen("w-nobody"); ok {
		t.Error("a worker the coordinator does not know was seen")
	}
}
