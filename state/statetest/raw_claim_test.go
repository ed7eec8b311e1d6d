package statetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

func TestRawClaimer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.UpsertPool(ctx, state.Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterWorker(ctx, state.Worker{ID: "w1", Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: 10 * time.Second}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertTask(ctx, state.TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h-a", Status: state.TaskQueued,
		MaxAttempts: 1, MaxLost: 1}, t0); err != nil {
		t.Fatal(err)
	}
	_, serial, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}

	raw := NewRawClaimer(t, path)
	tok, ok, err := raw.Claim(ctx, "w1", 10*time.Second, t0)
	if err != nil || !ok || tok != 1 {
		t.Fatalf("Claim = %d %v %v; want token 1", tok, ok, err)
	}
	if _, ok, err := raw.Claim(ctx, "w1", 10*time.Second, t0); err != nil || ok {
		t.Fatalf("second Claim: %v %v; want nothing queued", ok, err)
	}

	// The Store sees the lease and the running task; no serial bump.
	l, err := s.Lease(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if l.Task != "task.a" || l.WorkerID != "w1" || l.Attempt != 1 || l.Status != state.LeaseActive || !l.ExpiresAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("lease %+v", l)
	}
	if task, err := s.Task(ctx, "task.a"); err != nil || task.Status != state.TaskRunning || task.Attempts != 1 {
		t.Errorf("task %+v, %v; want running, attempt 1", task, err)
	}
	if _, after, err := s.Info(ctx); err != nil || after != serial {
		t.Errorf("serial %d → %d, %v; want unchanged", serial, after, err)
	}
}
