package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TestEagerDispatch: a result that asks for next assignments gets the
// worker's next leases in its answer, capped by the worker's free capacity
// once the result's lease has ended; none for a rejected result, while the
// coordinator drains, or for a worker that did not ask. Each granted lease
// is recorded like a claimed one.
func TestEagerDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		capacity int
		next     int
		hold     int  // leases the worker holds besides the one it posts for
		stale    bool // the result names an expired lease (rejected)
		drain    bool
		want     int
	}{
		{name: "one for one", capacity: 1, next: 1, want: 1},
		{name: "asks none", capacity: 1, next: 0, want: 0},
		{name: "capped by free capacity", capacity: 2, next: 3, hold: 1, want: 1},
		{name: "more when capacity allows", capacity: 3, next: 3, want: 3},
		{name: "rejected result gets none", capacity: 1, next: 1, stale: true, want: 0},
		{name: "draining gets none", capacity: 1, next: 1, drain: true, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var tasks []coordinator.TaskRuntime
			for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
				tasks = append(tasks, rtTask(n))
			}
			h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", tt.capacity)}, tasks, harnessOpts{})
			w := h.register("p")
			first := w.claimOne()
			for range tt.hold {
				w.claimOne()
			}
			if tt.stale {
				h.clock.Advance(time.Hour)
				h.sweep()
			}
			if tt.drain {
				h.c.Drain()
			}
			zero := 0
			resp, err := w.cl.PostResult(context.Background(), first.FencingToken, protocol.ResultRequest{
				WorkerID: w.id, Task: first.Task, Attempt: first.Attempt, IdempotencyKey: "k", ExitCode: &zero, Next: tt.next})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.Assignments); got != tt.want {
				t.Fatalf("%d assignments with the answer (%s); want %d", got, resp.Decision, tt.want)
			}
			for _, a := range resp.Assignments {
				l, err := h.store.Lease(context.Background(), a.FencingToken)
				if err != nil || l.Status != state.LeaseActive || l.WorkerID != w.id || l.Task != a.Task {
					t.Errorf("assignment %+v: lease %+v, %v", a, l, err)
				}
				if a.Definition.Command == nil {
					t.Errorf("assignment %s has no definition", a.Task)
				}
			}
			p := h.c.Progress()
			if want := 1 + tt.hold + tt.want; p.AttemptsGranted != want {
				t.Errorf("coordinator counts %d leases granted; want %d", p.AttemptsGranted, want)
			}
		})
	}
}

// TestEagerDispatchConcurrentCopies: copies of one result posted at once,
// each asking for next leases, and claims beside them never take the
// worker past its capacity: the ending lease's slot counts for one copy,
// grants still being written take slots, and replays get no assignments.
func TestEagerDispatchConcurrentCopies(t *testing.T) {
	t.Parallel()
	var tasks []coordinator.TaskRuntime
	for i := range 40 {
		tasks = append(tasks, rtTask(fmt.Sprintf("t%02d", i)))
	}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
	w := h.register("p")
	first := w.claimOne()
	zero := 0
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			if i%3 == 2 {
				_, _ = w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 2})
				return
			}
			_, _ = w.cl.PostResult(context.Background(), first.FencingToken, protocol.ResultRequest{
				WorkerID: w.id, Task: first.Task, Attempt: first.Attempt, IdempotencyKey: "same", ExitCode: &zero, Next: 2})
		})
	}
	wg.Wait()
	active, err := h.store.ActiveLeases(context.Background(), w.id)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) > 2 {
		t.Errorf("the worker holds %d active leases; its capacity is 2", len(active))
	}
}
