package agent

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
)

// TestPrefetchedAttemptStartsAtOnce: with a coordinator that grants
// prefetched leases, a worker of capacity 1 starts each prefetched attempt
// the moment the one before it ends, reports that start with the earlier
// attempt's result, never runs two at once, and holds at most one
// prefetched lease; with NoPrefetch it asks for none.
func TestPrefetchedAttemptStartsAtOnce(t *testing.T) {
	t.Parallel()
	for _, noPrefetch := range []bool{false, true} {
		t.Run(map[bool]string{false: "prefetch", true: "no prefetch"}[noPrefetch], func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
			f.eager = true
			// Each result is answered after 150 ms: a prefetched attempt
			// runs while its predecessor's result is being written.
			f.resultHook = func(int, *http.Request) int { time.Sleep(150 * time.Millisecond); return 0 }
			s := startFake(t, f)
			var asgs []protocol.Assignment
			for _, name := range []string{"task.a", "task.b", "task.c", "task.d", "task.e"} {
				asgs = append(asgs, assignment(t, name, "true"))
			}
			asgs = f.add(asgs...)
			startAgent(t, s.URL(), func(o *Options) { o.NoPrefetch = noPrefetch })
			waitFor(t, 20*time.Second, "5 results", func() bool { return len(f.resultsCopy()) >= 5 })

			results := f.resultsCopy()
			var reported []int64
			posted := map[int64]time.Time{} // when each result reached the fake
			for _, r := range results {
				if r.req.FailureClass != "" {
					t.Errorf("result of %s: %s %s", r.req.Task, r.req.FailureClass, r.req.Error)
				}
				if noPrefetch && (r.req.Prefetch != 0 || len(r.req.Started) != 0) {
					t.Errorf("with NoPrefetch a result asked for prefetch %d, reported starts %v", r.req.Prefetch, r.req.Started)
				}
				reported = append(reported, r.req.Started...)
				posted[r.token] = r.at
			}
			if noPrefetch {
				return
			}
			if len(reported) == 0 {
				t.Fatal("no result reported a prefetched attempt's start")
			}
			overlapped := 0
			for _, r := range results {
				for _, tok := range r.req.Started {
					started, ok := f.result(tok)
					if !ok {
						t.Errorf("the started attempt of lease %d never posted its result", tok)
						continue
					}
					// It started after its predecessor ended, before that
					// result's answer came (the fake held it 150 ms).
					if started.req.StartedAt.Before(r.req.EndedAt) {
						t.Errorf("prefetched attempt %s started %s before its predecessor %s ended", started.req.Task,
							r.req.EndedAt.Sub(started.req.StartedAt), r.req.Task)
					}
					if started.req.StartedAt.Before(posted[r.token].Add(150 * time.Millisecond)) {
						overlapped++
					}
				}
			}
			if overlapped == 0 {
				t.Errorf("no prefetched attempt ran while its predecessor's result was being written")
			}
			// One at a time: capacity 1.
			slices.SortFunc(results, func(a, b resultRec) int { return a.req.StartedAt.Compare(b.req.StartedAt) })
			for i := 1; i < len(results); i++ {
				if results[i].req.StartedAt.Before(results[i-1].req.EndedAt) {
					t.Errorf("%s started before %s ended: two attempts at once on capacity 1", results[i].req.Task, results[i-1].req.Task)
				}
			}
			_ = asgs
		})
	}
}

// TestRefusedStartStopsTheAttempt: a start the coordinator refuses (its
// lease is gone) stops that attempt, whose result then says it was lost.
func TestRefusedStartStopsTheAttempt(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	f.eager, f.refuseStarts = true, true
	s := startFake(t, f)
	// task.a's answer brings task.b to run and task.c prefetched; task.b's
	// result reports task.c's start, which is refused.
	long := assignment(t, "task.c", "sleep")
	long.Definition.Command = []string{"sleep", "30"}
	asgs := f.add(assignment(t, "task.a", "true"), assignment(t, "task.b", "true"), long)
	startAgent(t, s.URL(), nil)
	waitFor(t, 20*time.Second, "the result of the refused attempt", func() bool {
		for _, r := range f.resultsCopy() {
			for _, tok := range r.req.Started {
				if _, ok := f.result(tok); ok {
					return true
				}
			}
		}
		return false
	})
	for _, r := range f.resultsCopy() {
		for _, tok := range r.req.Started {
			res, _ := f.result(tok)
			if res.req.FailureClass != ClassLost || res.req.EndedAt.Sub(res.req.StartedAt) > 10*time.Second {
				t.Errorf("the attempt whose start was refused: class %q after %s (%s); want lost, stopped at once",
					res.req.FailureClass, res.req.EndedAt.Sub(res.req.StartedAt), res.req.Error)
			}
		}
	}
	_ = asgs
}

// TestDrainDropsThePrefetchedAssignment: a worker that drains never starts
// the prefetched assignment it holds and stops reporting it in its
// heartbeats, so its lease goes back at no cost.
func TestDrainDropsThePrefetchedAssignment(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 50*time.Millisecond, 3*time.Second)
	f.eager = true
	s := startFake(t, f)
	long := assignment(t, "task.a", "sleep")
	long.Definition.Command = []string{"sleep", "1"}
	asgs := f.add(assignment(t, "task.first", "true"), long, assignment(t, "task.b", "true"), assignment(t, "task.c", "true"))
	a := startAgent(t, s.URL(), nil)
	var parked int64
	waitFor(t, 20*time.Second, "a prefetched assignment held while task.a runs", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for tok := range f.unstarted {
			parked = tok
			return true
		}
		return false
	})
	a.cancel()
	if err := a.wait(t, 20*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if _, ok := f.result(parked); ok {
		t.Errorf("the prefetched assignment (lease %d) ran although the worker was draining", parked)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.heartbeats[len(f.heartbeats)-1]
	if slices.Contains(last.leases, parked) {
		t.Errorf("the last heartbeat still reports the dropped prefetched lease %d: %v", parked, last.leases)
	}
	_ = asgs
}
