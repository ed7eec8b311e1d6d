package coordinator_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Done closes before the last task's "succeeded" event reaches OnEvent;
// FlushEvents waits for it, so apply's "draining" line comes after it.
func TestFlushEventsWaitsForTheLastEvent(t *testing.T) {
	t.Parallel()
	s, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pools, tasks := []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}
	upsertAll(t, s, pools, tasks, time.Now())
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var kinds []string
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, OnEvent: func(e coordinator.Event) {
		if e.Kind == coordinator.EventSucceeded {
			close(entered)
			<-release // a slow reader of events
		}
		mu.Lock()
		kinds = append(kinds, e.Kind)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	t.Cleanup(srv.Close)
	cl, reg := registerOn(t, c, srv.URL, "p", protocol.RegisterRequest{Host: "test", PID: 1, Version: "test"})
	ctx := context.Background()
	resp, err := cl.Claim(ctx, reg.WorkerID, protocol.ClaimRequest{Max: 1})
	if err != nil || len(resp.Assignments) != 1 {
		t.Fatalf("claim: %v %+v", err, resp)
	}
	a := resp.Assignments[0]
	zero := 0
	posted := make(chan error, 1)
	go func() {
		_, err := cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: reg.WorkerID, Task: a.Task, Attempt: a.Attempt,
			IdempotencyKey: "k", ExitCode: &zero, StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC()})
		posted <- err
	}()
	<-c.Done()
	<-entered
	flushed := make(chan struct{})
	go func() {
		c.FlushEvents()
		close(flushed)
	}()
	select {
	case <-flushed:
		t.Fatal("FlushEvents returned while the succeeded event was still on its way to OnEvent")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-flushed
	mu.Lock()
	got := append([]string(nil), kinds...)
	mu.Unlock()
	if len(got) == 0 || got[len(got)-1] != coordinator.EventSucceeded {
		t.Fatalf("events after FlushEvents = %v, want succeeded last", got)
	}
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
}
