package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// waitUntil polls cond until it holds or 10 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEventQueueFullWaits: while OnEvent holds an event, the queue takes
// its limit and the writer of the next event waits (it is not dropped);
// once OnEvent goes on, every event arrives, in the order queued, and a
// flush returns after the last.
func TestEventQueueFullWaits(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var got []string
	q := newEventQueue(2, slog.New(slog.DiscardHandler), func(e Event) {
		if e.Kind == "e0" {
			<-gate
		}
		mu.Lock()
		got = append(got, e.Kind)
		mu.Unlock()
	})
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for i := range 10 {
			q.push([]Event{{Kind: fmt.Sprintf("e%d", i)}}, false)
		}
	}()
	// e0 is being delivered (maybe with the next, taken in one batch),
	// two more wait: the writer of the next waits.
	waitUntil(t, "a full queue", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.items) == 2
	})
	select {
	case <-pushed:
		t.Fatal("all events were queued while OnEvent held the first and the queue takes 2")
	default:
	}
	close(gate)
	<-pushed
	q.flush()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 10 {
		t.Fatalf("delivered %v; want all 10", got)
	}
	for i, k := range got {
		if k != fmt.Sprintf("e%d", i) {
			t.Fatalf("delivered %v; want them in the order queued", got)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		t.Error("the deliverer still runs with nothing left to deliver")
	}
}

// TestFullQueueHoldsTheCommitter: a slow OnEvent fills the queue; the
// hot path's writes then wait in their after functions (the committer
// waits for room), nothing else does: Progress still answers, from OnEvent
// too. When OnEvent goes on, every lease and result event arrives in
// commit order and nothing is lost.
func TestFullQueueHoldsTheCommitter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	now := time.Now()
	if err := store.UpsertPool(ctx, state.Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1, Labels: map[string]string{}}, now); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var tasks []TaskRuntime
	for i := range n {
		rt := TaskRuntime{Address: fmt.Sprintf("task.t%d", i), Definition: protocol.Definition{Command: []string{"true"}, Dir: "."}}
		if err := store.UpsertTask(ctx, state.TaskDef{Address: rt.Address, Name: rt.Address[len("task."):], Index: -1, DefHash: "h",
			Spec: rt.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: 1}, now); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, rt)
	}
	gate := make(chan struct{})
	var held atomic.Bool
	var mu sync.Mutex
	var got []Event
	var c *Coordinator
	c, err = New(Options{Store: store, Pools: []PoolRuntime{{Name: "p"}}, Tasks: tasks, EventQueue: 2, OnEvent: func(e Event) {
		_ = c.Progress() // allowed from OnEvent, also while writes wait for the queue
		if e.Kind == EventLeased && held.CompareAndSwap(false, true) {
			<-gate
		}
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := c.IssueLaunch(ctx, "p", 1, "local", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := c.Authenticate(secret, KindLaunch)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(ctx, cred, protocol.RegisterRequest{Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cred, err = c.Authenticate(reg.SessionToken, KindSession)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(cred, reg.WorkerID)
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int64
	worked := make(chan error, 1)
	go func() {
		zero := 0
		for i := range n {
			resp, err := c.Claim(ctx, s, 1, 0)
			if err != nil || len(resp.Assignments) != 1 {
				worked <- fmt.Errorf("claim %d: %+v, %v", i, resp, err)
				return
			}
			a := resp.Assignments[0]
			answered.Add(1)
			r, err := c.Result(ctx, s, a.FencingToken, protocol.ResultRequest{WorkerID: reg.WorkerID, Task: a.Task, Attempt: a.Attempt,
				IdempotencyKey: fmt.Sprint("k", i), ExitCode: &zero}, nil)
			if err != nil || r.Decision != state.DecisionAccepted {
				worked <- fmt.Errorf("result %d: %+v, %v", i, r, err)
				return
			}
			answered.Add(1)
		}
		worked <- nil
	}()
	// The first leased event is held; two more wait in the queue; the
	// write of the next waits for room, so its answer does not come.
	waitUntil(t, "a full queue", func() bool {
		c.events.mu.Lock()
		defer c.events.mu.Unlock()
		return len(c.events.items) == 2
	})
	if p := c.Progress(); p.Total != n {
		t.Errorf("Progress while writes wait: %+v", p)
	}
	select {
	case err := <-worked:
		t.Fatalf("the writes went on while the queue was full: %v", err)
	default:
	}
	t.Logf("%d of %d answers before the queue was full", answered.Load(), 2*n)
	close(gate)
	if err := <-worked; err != nil {
		t.Fatal(err)
	}
	c.FlushEvents()
	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	last := int64(0)
	for _, e := range got {
		switch e.Kind {
		case EventLeased:
			if e.Token <= last {
				t.Errorf("leased token %d after %d: not in commit order", e.Token, last)
			}
			last = e.Token
			kinds = append(kinds, "leased")
		case EventSucceeded:
			if e.Token != last {
				t.Errorf("succeeded token %d after leased %d: not in commit order", e.Token, last)
			}
			kinds = append(kinds, "succeeded")
		}
	}
	if len(kinds) != 2*n {
		t.Fatalf("events %v; want %d leased and succeeded", kinds, n)
	}
	for i, k := range kinds {
		if want := map[bool]string{true: "leased", false: "succeeded"}[i%2 == 0]; k != want {
			t.Fatalf("events %v; want leased and succeeded by turns", kinds)
		}
	}
}
