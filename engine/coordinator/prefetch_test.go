package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// postNext posts a success for a asking for next started and prefetch
// unstarted leases, reporting started as its prefetched leases' starts.
func (w *worker) postNext(a protocol.Assignment, next, prefetch int, started ...int64) protocol.ResultResponse {
	w.h.t.Helper()
	zero := 0
	resp, err := w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{
		WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: fmt.Sprintf("%s-%d", w.id, a.FencingToken),
		ExitCode: &zero, Next: next, Prefetch: prefetch, Started: started})
	if err != nil {
		w.h.t.Fatal(err)
	}
	return resp
}

// split returns a result's assignments: the started one and the prefetched one.
func split(t *testing.T, asg []protocol.Assignment) (started, prefetched []protocol.Assignment) {
	t.Helper()
	for _, a := range asg {
		if a.Prefetched {
			prefetched = append(prefetched, a)
		} else {
			started = append(started, a)
		}
	}
	return started, prefetched
}

// TestPrefetchedLeases walks a worker of capacity 1 through prefetching
// (docs/design.md §3, prefetched leases): a result asking for a next lease
// and a prefetch gets one of each; the next result reports the prefetched
// lease's start and gets the next prefetch; a worker never holds more than
// one unstarted lease; a start of a lease not the worker's is answered
// cancelled; and when the worker falls silent its unstarted lease goes back
// at no cost while its started one is lost.
func TestPrefetchedLeases(t *testing.T) {
	t.Parallel()
	var tasks []coordinator.TaskRuntime
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		tasks = append(tasks, rtTask(n))
	}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, tasks, harnessOpts{})
	ctx := context.Background()
	w := h.register("p")
	first := w.claimOne()

	// Next 1 and prefetch 1: one started lease, one unstarted.
	resp := w.postNext(first, 1, 1)
	run, pre := split(t, resp.Assignments)
	if resp.Decision != protocol.DecisionAccepted || len(run) != 1 || len(pre) != 1 {
		t.Fatalf("first result: %s, %d started and %d prefetched assignments; want accepted, 1 and 1", resp.Decision, len(run), len(pre))
	}
	if l, _ := h.store.Lease(ctx, pre[0].FencingToken); !l.Unstarted || !l.HardExpiresAt.Equal(state.UnstartedHardExpiry) {
		t.Errorf("prefetched lease: unstarted %v, hard expiry %s", l.Unstarted, l.HardExpiresAt)
	}
	if l, _ := h.store.Lease(ctx, run[0].FencingToken); l.Unstarted {
		t.Errorf("the started lease is unstarted in the state")
	}

	// Its slot frees: the worker starts the prefetched attempt and reports
	// it with the result; it asks for no started lease, one prefetch.
	h.clock.Advance(time.Second)
	resp = w.postNext(run[0], 0, 1, pre[0].FencingToken)
	run2, pre2 := split(t, resp.Assignments)
	if len(run2) != 0 || len(pre2) != 1 || len(resp.CancelLeases) != 0 {
		t.Fatalf("second result: %d started, %d prefetched, cancelled %v; want 0, 1, none", len(run2), len(pre2), resp.CancelLeases)
	}
	started, _ := h.store.Lease(ctx, pre[0].FencingToken)
	if started.Unstarted || !started.HardExpiresAt.Equal(ct0.Add(time.Second+time.Hour+time.Minute)) {
		t.Errorf("reported start: unstarted %v, hard expiry %s; want started, start + timeout + grace", started.Unstarted, started.HardExpiresAt)
	}

	// At most one unstarted lease: a result that asks for five more
	// prefetches while one is held gets none.
	resp = w.postNext(pre[0], 0, 5)
	if len(resp.Assignments) != 0 {
		t.Errorf("a worker holding an unstarted lease got %d more", len(resp.Assignments))
	}
	unstarted := 0
	active, _ := h.store.ActiveLeases(ctx, w.id)
	for _, l := range active {
		if l.Unstarted {
			unstarted++
		}
	}
	if unstarted != 1 || len(active) != 1 {
		t.Errorf("the worker holds %d active leases, %d unstarted; want 1 and 1", len(active), unstarted)
	}

	// A start of a lease not the worker's is refused.
	other := h.register("p")
	resp = other.postNext(other.claimOne(), 0, 0, pre2[0].FencingToken)
	if !slices.Equal(resp.CancelLeases, []int64{pre2[0].FencingToken}) {
		t.Errorf("a start of another worker's lease: cancelled %v, want [%d]", resp.CancelLeases, pre2[0].FencingToken)
	}

	// The worker falls silent: its unstarted lease goes back at no cost.
	h.clock.Advance(time.Minute)
	h.sweep()
	task := h.task(pre2[0].Task)
	if task.Status != state.TaskQueued || task.LostUsed != 0 {
		t.Errorf("task of the expired unstarted lease: %s, lost %d; want queued, 0", task.Status, task.LostUsed)
	}
	if kinds := h.eventKinds(pre2[0].Task); !slices.Contains(kinds, coordinator.EventReleased) || slices.Contains(kinds, coordinator.EventRetried) {
		t.Errorf("events of the expired unstarted lease's task: %v; want released, not retried", kinds)
	}
	// Five leases granted, one of them never started: four attempts.
	if got := h.c.Progress().AttemptsGranted; got != 4 {
		t.Errorf("attempts counted: %d, want 4 (the unstarted lease is none)", got)
	}
}

// TestPrefetchConcurrentResults: results posted at once, each asking for a
// next lease and a prefetch, and claims beside them never take a worker
// past its capacity of started leases nor past one unstarted lease.
func TestPrefetchConcurrentResults(t *testing.T) {
	t.Parallel()
	var tasks []coordinator.TaskRuntime
	for i := range 60 {
		tasks = append(tasks, rtTask(fmt.Sprintf("t%02d", i)))
	}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, tasks, harnessOpts{})
	w := h.register("p")
	held := w.claim(2)
	zero := 0
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i%4 == 3 {
				_, _ = w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 2})
				return
			}
			a := held[i%len(held)]
			_, _ = w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{
				WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: fmt.Sprintf("k%d", i%3), ExitCode: &zero, Next: 2, Prefetch: 1})
		})
	}
	wg.Wait()
	active, err := h.store.ActiveLeases(context.Background(), w.id)
	if err != nil {
		t.Fatal(err)
	}
	var started, unstarted int
	for _, l := range active {
		if l.Unstarted {
			unstarted++
		} else {
			started++
		}
	}
	if started > 2 || unstarted > 1 {
		t.Errorf("the worker holds %d started and %d unstarted leases; its capacity is 2, one unstarted at most", started, unstarted)
	}
}

// TestPrefetchNeverKeepsATaskFromAnIdleWorker: no lease is prefetched
// while another worker of the pool has a free slot, and a worker that
// claims with a free slot and finds nothing queued takes over another
// worker's unstarted lease, handed back at no cost; the holder's next
// heartbeat cancels it.
func TestPrefetchNeverKeepsATaskFromAnIdleWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b"), rtTask("c"), rtTask("d"), rtTask("e", "task.d"), rtTask("f", "task.d")}, harnessOpts{})
	w1 := h.register("p")
	first := w1.claimOne()
	resp := w1.postNext(first, 1, 1)
	run, pre := split(t, resp.Assignments)
	if len(run) != 1 || len(pre) != 1 {
		t.Fatalf("lone busy worker: %d started and %d prefetched; want 1 and 1", len(run), len(pre))
	}

	// A second worker with a free slot: nothing is queued but task d, which
	// it claims; then it takes the prefetched lease over.
	w2 := h.register("p")
	d := w2.claimOne()
	if d.Task != "task.d" {
		t.Fatalf("second worker claimed %s, want task.d", d.Task)
	}
	w3 := h.register("p")
	// Just granted, the prefetched lease is left to its holder, whose
	// running attempt may end any moment and start it.
	if got := w3.claim(1); len(got) != 0 {
		t.Fatalf("an idle worker took over a lease prefetched a moment ago: %+v", got)
	}
	h.clock.Advance(time.Second) // takeOverAfter
	took := w3.claimOne()
	if took.Task != pre[0].Task || took.Prefetched {
		t.Fatalf("idle worker claimed %s (prefetched %v); want %s, started", took.Task, took.Prefetched, pre[0].Task)
	}
	if l, _ := h.store.Lease(ctx, pre[0].FencingToken); l.Status != state.LeaseReleased {
		t.Errorf("the prefetched lease taken over is %s, want released", l.Status)
	}
	if task := h.task(took.Task); task.LostUsed != 0 || task.FailuresUsed != 0 {
		t.Errorf("taking over spent budget: lost %d, failures %d", task.LostUsed, task.FailuresUsed)
	}
	if hb := w1.heartbeat(run[0].FencingToken, pre[0].FencingToken); !slices.Equal(hb.CancelLeases, []int64{pre[0].FencingToken}) {
		t.Errorf("holder's heartbeat cancels %v, want [%d]", hb.CancelLeases, pre[0].FencingToken)
	}

	// While w3 is busy and w2 too, w1's result may prefetch again, but not
	// while another worker has a free slot: w2 finishes first.
	h.clock.Advance(time.Second)
	w2.post(d, "", "")
	resp = w1.postNext(run[0], 1, 1)
	if run, pre := split(t, resp.Assignments); len(run) != 1 || len(pre) != 0 {
		t.Errorf("%d started and %d prefetched leases while worker %s had a free slot; want 1 and 0", len(run), len(pre), w2.id)
	}
}

// TestTakeOverWaitsForAnOldEnoughLease: on the real clock, a claim that
// long-polls with nothing queued while another worker holds a lease
// prefetched a moment ago takes it over once it has waited takeOverAfter
// (1 s) since its grant: not before, and not at the end of its poll.
func TestTakeOverWaitsForAnOldEnoughLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b"), rtTask("c")}, harnessOpts{realClock: true})
	w1 := h.register("p")
	first := w1.claimOne()
	granted := time.Now() // before the prefetched lease's grant
	run, pre := split(t, w1.postNext(first, 1, 1).Assignments)
	if len(run) != 1 || len(pre) != 1 {
		t.Fatalf("lone busy worker: %d started and %d prefetched; want 1 and 1", len(run), len(pre))
	}
	w2 := h.register("p")
	resp, err := w2.cl.Claim(context.Background(), w2.id, protocol.ClaimRequest{Max: 1, WaitMS: 5000})
	waited := time.Since(granted)
	// A poll that ends answers nothing: an assignment means the claim
	// woke when the lease became old enough.
	if err != nil || len(resp.Assignments) != 1 || resp.Assignments[0].Task != pre[0].Task {
		t.Fatalf("the waiting claim: %+v, %v; want the prefetched %s taken over", resp, err, pre[0].Task)
	}
	if waited < time.Second {
		t.Errorf("the takeover came %s after the grant; want 1 s (takeOverAfter) or later", waited)
	}
}

// TestTakeOverRacingAReportedStart: a worker's result reports the start
// of its prefetched lease while another worker's takeover of that lease
// is being written. The takeover's write, queued first, hands the lease
// back unstarted; the start is then refused. The lease counts as no
// attempt, though memory marked it started when the result arrived: the
// state's decision counts, not memory's guess.
func TestTakeOverRacingAReportedStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b"), rtTask("c"), rtTask("d"), rtTask("e", "task.d")}, harnessOpts{})
	w1 := h.register("p")
	resp := w1.postNext(w1.claimOne(), 1, 1)
	run, pre := split(t, resp.Assignments)
	if len(run) != 1 || len(pre) != 1 {
		t.Fatalf("lone busy worker: %d started and %d prefetched; want 1 and 1", len(run), len(pre))
	}
	w2 := h.register("p")
	d := w2.claimOne() // the last queued task: w3 finds nothing to claim
	if d.Task != "task.d" {
		t.Fatalf("second worker claimed %s, want task.d", d.Task)
	}

	// w3's takeover of pre is in its write when w1's result reports pre's
	// start: the hook lets the result through to the point where memory
	// holds pre as started and its write waits behind the takeover's.
	results := make(chan protocol.ResultResponse, 1)
	var once sync.Once
	coordinator.SetTakeOverHook(h.c, func() {
		once.Do(func() {
			h.clock.Advance(time.Second)
			go func() { results <- w1.postNext(run[0], 0, 0, pre[0].FencingToken) }()
			deadline := time.Now().Add(10 * time.Second)
			for coordinator.UnstartedInMemory(h.c, w1.id) != 0 {
				if time.Now().After(deadline) {
					t.Error("the result's start never reached memory")
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	})
	w3 := h.register("p")
	h.clock.Advance(time.Second) // takeOverAfter
	took := w3.claimOne()
	if took.Task != pre[0].Task {
		t.Fatalf("idle worker claimed %s; want %s, taken over", took.Task, pre[0].Task)
	}
	res := <-results
	if res.Decision != protocol.DecisionAccepted || !slices.Equal(res.CancelLeases, []int64{pre[0].FencingToken}) {
		t.Errorf("w1's result: %s, cancelled %v; want accepted, [%d] (its start refused)", res.Decision, res.CancelLeases, pre[0].FencingToken)
	}
	if l, _ := h.store.Lease(context.Background(), pre[0].FencingToken); l.Status != state.LeaseReleased || !l.Unstarted {
		t.Errorf("the lease taken over: %s, unstarted %v; want released unstarted", l.Status, l.Unstarted)
	}
	// Grants: the first, run, pre (never started), d, took: four attempts.
	if got := h.c.Progress().AttemptsGranted; got != 4 {
		t.Errorf("attempts counted: %d, want 4 (the lease taken over unstarted is none)", got)
	}
	if n := coordinator.UnstartedInMemory(h.c, w1.id); n != 0 {
		t.Errorf("w1 holds %d unstarted leases in memory, want 0", n)
	}
}
