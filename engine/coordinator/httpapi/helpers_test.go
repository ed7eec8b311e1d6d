package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// harness is a coordinator on a fresh state file, served by New on an
// httptest server. (The coordinator's own tests have a fuller one.)
type harness struct {
	t     *testing.T
	store *state.Store
	c     *coordinator.Coordinator
	srv   *httptest.Server
}

type harnessOpts struct {
	maxClaimWait time.Duration
}

func rtTask(name string, deps ...string) coordinator.TaskRuntime {
	return coordinator.TaskRuntime{
		Address:    "task." + name,
		DefHash:    "h-" + name,
		Definition: protocol.Definition{Command: []string{"true"}, Dir: "."},
		WorkDir:    "/tmp",
		DependsOn:  deps,
		Timeout:    time.Hour,
		LeaseGrace: time.Minute,
		Retry:      coordinator.RetryPolicy{MaxAttempts: 1, MaxLost: 3, Backoff: time.Second, MaxBackoff: time.Minute},
	}
}

func withRetry(rt coordinator.TaskRuntime, maxAttempts, maxLost int, backoff time.Duration) coordinator.TaskRuntime {
	rt.Retry = coordinator.RetryPolicy{MaxAttempts: maxAttempts, MaxLost: maxLost, Backoff: backoff, MaxBackoff: time.Hour}
	return rt
}

func rtPool(name string, capacity int, kv ...string) coordinator.PoolRuntime {
	p := coordinator.PoolRuntime{Name: name, Capacity: capacity, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second, Labels: map[string]string{}}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		p.Labels[k] = v
	}
	return p
}

// upsertAll records pools and tasks in the state as apply does: pending
// when the task has dependencies, else queued.
func upsertAll(t testing.TB, s *state.Store, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pools {
		if err := s.UpsertPool(ctx, state.Pool{Name: p.Name, Provider: "local", Max: 4, Capacity: max(p.Capacity, 1), Labels: p.Labels}, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, rt := range tasks {
		st := state.TaskQueued
		if len(rt.DependsOn) > 0 {
			st = state.TaskPending
		}
		if err := s.UpsertTask(ctx, state.TaskDef{Address: rt.Address, Name: strings.TrimPrefix(rt.Address, "task."), Index: -1, DefHash: rt.DefHash,
			Spec: rt.Definition.Canonical(), Status: st, MaxAttempts: max(rt.Retry.MaxAttempts, 1), MaxLost: rt.Retry.MaxLost}, now); err != nil {
			t.Fatal(err)
		}
	}
}

func newHarness(t *testing.T, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime, o harnessOpts) *harness {
	t.Helper()
	s, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	upsertAll(t, s, pools, tasks, time.Now())
	blobs, err := artifact.Open(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, MaxClaimWait: o.maxClaimWait, Artifacts: blobs})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: s, c: c, srv: httptest.NewServer(New(c))}
	t.Cleanup(h.srv.Close)
	return h
}

// launchSeq numbers the launches of all harnesses.
var launchSeq atomic.Int64

// issueLaunch issues a launch credential of pool on c that lives a year.
func issueLaunch(t testing.TB, c *coordinator.Coordinator, pool string) string {
	t.Helper()
	cred, err := c.IssueLaunch(context.Background(), pool, int(launchSeq.Add(1)), "local", 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// worker is a registered worker: its id and session token.
type worker struct {
	id, session string
}

func (h *harness) register(pool string) *worker {
	h.t.Helper()
	reg, err := protocol.NewClient(h.srv.URL, issueLaunch(h.t, h.c, pool), nil).Register(context.Background(),
		protocol.RegisterRequest{Host: "test", PID: 1, Version: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	return &worker{id: reg.WorkerID, session: reg.SessionToken}
}

// authed adds the bearer token and the protocol version header to r.
func authed(r *http.Request, tok string) *http.Request {
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set(protocol.VersionHeader, "1")
	return r
}
