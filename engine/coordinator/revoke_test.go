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

// TestRevokeLease: a lease revoked at once loses its attempt (the task is
// queued again, one of max_lost spent) and the holder's result that comes
// after is rejected, never accepted: the revoked token is fenced off. A
// second revoke, or one of a lease that ended, changes nothing.
func TestRevokeLease(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	a := w.claimOne()
	for _, tc := range []struct {
		name  string
		token int64
		want  bool
	}{
		{"the live lease", a.FencingToken, true},
		{"again", a.FencingToken, false},
		{"a token never granted", a.FencingToken + 100, false},
	} {
		got, err := h.c.RevokeLease(ctx, tc.token, "a test revokes it")
		if err != nil || got != tc.want {
			t.Fatalf("%s: RevokeLease = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if task := h.task("task.a"); task.Status != state.TaskQueued || task.LostUsed != 1 {
		t.Fatalf("after the revoke: task %s, lost %d; want queued, 1 lost", task.Status, task.LostUsed)
	}
	if resp := w.post(a, "", ""); resp.Decision != protocol.DecisionRejected {
		t.Fatalf("the late result: %+v, want rejected", resp)
	}
	if kinds := h.eventKinds("task.a"); !slices.Contains(kinds, coordinator.EventRevoked) {
		t.Fatalf("events %v: no %s", kinds, coordinator.EventRevoked)
	}
	if a2 := w.claimOne(); a2.Attempt != 2 || a2.FencingToken <= a.FencingToken {
		t.Fatalf("the retry: attempt %d, token %d; want attempt 2 with a higher token than %d", a2.Attempt, a2.FencingToken, a.FencingToken)
	}
}

// injector is a FaultInjector that silences the workers in silenced and
// revokes the leases of the attempts in late ("task.a/1").
type injector struct {
	mu       sync.Mutex
	silenced map[string]bool
	late     map[string]bool
}

func (f *injector) DropHeartbeat(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.silenced[id]
}

func (f *injector) AttemptStarted(string, int, string, int) {}

func (f *injector) RevokeBeforeResult(task string, attempt int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.late[fmt.Sprintf("%s/%d", task, attempt)]
}

// TestFaultInjector: a result whose lease the injector revokes first is
// rejected and its attempt lost, the next attempt's result accepted; a
// heartbeat the injector drops renews nothing, so the lease expires at
// its ttl although the worker kept sending them.
func TestFaultInjector(t *testing.T) {
	f := &injector{silenced: map[string]bool{}, late: map[string]bool{"task.a/1": true}}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{faults: f})
	w := h.register("p")

	a := w.claimOne()
	if a.Task != "task.a" {
		t.Fatalf("claimed %s first, want task.a", a.Task)
	}
	if resp := w.post(a, "", ""); resp.Decision != protocol.DecisionRejected {
		t.Fatalf("the late result: %+v, want rejected", resp)
	}
	if task := h.task("task.a"); task.Status != state.TaskQueued || task.LostUsed != 1 {
		t.Fatalf("after the late result: %s, %d lost; want queued, 1 lost", task.Status, task.LostUsed)
	}
	var again protocol.Assignment
	for again.Task != "task.a" {
		again = w.claimOne()
		if again.Task != "task.a" {
			w.post(again, "", "")
		}
	}
	if resp := w.post(again, "", ""); resp.Decision != protocol.DecisionAccepted || again.Attempt != 2 {
		t.Fatalf("attempt %d's result: %+v, want attempt 2 accepted", again.Attempt, resp)
	}

	// Silence: a worker of another coordinator whose heartbeats are
	// dropped while it holds a lease.
	h2 := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("c")}, harnessOpts{faults: f})
	w2 := h2.register("p")
	c := w2.claimOne()
	f.mu.Lock()
	f.silenced[w2.id] = true
	f.mu.Unlock()
	for i := 0; i < 6; i++ { // 12 s of heartbeats every 2 s, ttl 10 s
		h2.clock.Advance(2 * time.Second)
		if _, err := w2.cl.Heartbeat(context.Background(), w2.id, protocol.HeartbeatRequest{Leases: []int64{c.FencingToken}}); err == nil {
			t.Fatal("a dropped heartbeat was answered")
		}
	}
	h2.sweep()
	if task := h2.task("task.c"); task.Status != state.TaskQueued || task.LostUsed != 1 {
		t.Fatalf("after 12 s of dropped heartbeats: %s, %d lost; want queued, 1 lost (the lease expired)", task.Status, task.LostUsed)
	}
}

// startRecorder is a FaultInjector that records the attempts it is told
// started ("task.a/1").
type startRecorder struct {
	mu      sync.Mutex
	started []string
}

func (f *startRecorder) DropHeartbeat(string) bool           { return false }
func (f *startRecorder) RevokeBeforeResult(string, int) bool { return false }
func (f *startRecorder) AttemptStarted(task string, attempt int, _ string, _ int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, fmt.Sprintf("%s/%d", task, attempt))
}

func (f *startRecorder) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.started)
}

// TestFaultInjectorToldOfKeptGrantsOnly: the injector hears that an
// attempt started only once its grant is to be answered. A claim whose
// worker went away after the grant was written (its request's context
// ended) releases the lease, which never ran: the injector is not told
// (kill_worker would kill a worker whose attempt then counts as no loss),
// and the attempt ends with no failure class. The next claim's grant is
// told.
func TestFaultInjectorToldOfKeptGrantsOnly(t *testing.T) {
	f := &startRecorder{}
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{faults: f})
	w := h.register("p")
	cred, err := h.c.Authenticate(w.session, coordinator.KindSession)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.c.Session(cred, w.id)
	if err != nil {
		t.Fatal(err)
	}

	gone, cancel := context.WithCancel(context.Background())
	coordinator.SetAnswerHook(h.c, cancel) // the worker goes away once the grant is written
	if resp, err := h.c.Claim(gone, sess, 1, 0); err == nil {
		t.Fatalf("a claim whose request ended was answered: %+v", resp)
	}
	if got := f.seen(); len(got) != 0 {
		t.Errorf("the injector was told of a grant that was released: %v", got)
	}
	attempts, err := h.store.Attempts(context.Background(), "task.a")
	if err != nil || len(attempts) != 1 || attempts[0].EndedAt.IsZero() || attempts[0].FailureClass != "" {
		t.Fatalf("attempts after the abandoned claim: %+v, %v; want one, ended with no failure class", attempts, err)
	}

	coordinator.SetAnswerHook(h.c, nil)
	a := w.claimOne()
	if got, want := f.seen(), []string{fmt.Sprintf("task.a/%d", a.Attempt)}; !slices.Equal(got, want) {
		t.Errorf("after a kept grant the injector was told %v, want %v", got, want)
	}
}
