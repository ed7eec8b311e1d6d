package coordinator

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// backoff = "0s" retries at once: a task whose retry policy is Immediate
// keeps its zero backoff; one without a backoff gets the 5s default.
func TestImmediateRetryKeepsZeroBackoff(t *testing.T) {
	t.Parallel()
	store, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx, now := context.Background(), time.Now()
	if err := store.UpsertPool(ctx, state.Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1, Labels: map[string]string{}}, now); err != nil {
		t.Fatal(err)
	}
	tasks := []TaskRuntime{
		{Address: "task.now", Retry: RetryPolicy{MaxAttempts: 2, Immediate: true}},
		{Address: "task.later", Retry: RetryPolicy{MaxAttempts: 1}},
	}
	for _, rt := range tasks {
		if err := store.UpsertTask(ctx, state.TaskDef{Address: rt.Address, Name: rt.Address[len("task."):], Index: -1, DefHash: "h",
			Spec: rt.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: rt.Retry.MaxAttempts}, now); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Options{Store: store, Pools: []PoolRuntime{{Name: "p"}}, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.policy("task.now").Backoff; got != 0 {
		t.Errorf("coordinator backoff of task.now = %s, want 0", got)
	}
	if got := c.policy("task.later").Backoff; got != 5*time.Second {
		t.Errorf("coordinator backoff of task.later = %s, want 5s", got)
	}
}
