package apply

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	_ "github.com/wdc-dev/wdc/providers/local"
	"github.com/wdc-dev/wdc/providers/ray"
	"github.com/wdc-dev/wdc/state"
)

// applyFixture loads src as a configuration and plans it against a fresh
// state file.
func applyFixture(t *testing.T, src string) (*state.Store, *wdchcl.Config, *plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	store, err := state.Open(context.Background(), filepath.Join(dir, ".wdc", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	snap, err := store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, diags := plan.New(cfg, snap, time.Now(), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return store, cfg, p, dir
}

// A pool whose workers never register (here: the worker executable exits at
// once) fails its remaining tasks after three launches in a row, with a
// reason naming the worker logs; apply ends instead of hanging.
func TestApplyFailsPoolWhoseWorkersNeverRegister(t *testing.T) {
	store, cfg, p, dir := applyFixture(t, `
pool "broken" {
  provider = "local"
  max      = 1
}

task "a" {
  command = ["true"]
}

task "b" {
  depends_on = [task.a]
  command    = ["true"]
}
`)
	pools, tasks := Inputs(cfg, p)
	var mu sync.Mutex
	var events []coordinator.Event
	res, err := Run(context.Background(), Options{
		Store: store, Plan: p, Pools: pools, Tasks: tasks,
		WorkDir:    filepath.Join(dir, ".wdc"),
		Executable: "/bin/false", // exits 1 at once: never registers
		OnEvent: func(e coordinator.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 2 || res.Succeeded != 0 || res.OK() {
		t.Fatalf("result = %+v, want both tasks failed", res)
	}
	if res.Workers != neverRegisteredLimit {
		t.Errorf("launched %d workers, want %d", res.Workers, neverRegisteredLimit)
	}
	var poolFailed string
	for _, e := range events {
		if e.Kind == EventPoolFailed {
			poolFailed = e.Message
		}
	}
	if !strings.Contains(poolFailed, "3 workers launched in a row never registered") || !strings.Contains(poolFailed, "workers") {
		t.Errorf("pool_failed event = %q", poolFailed)
	}
	got, err := store.Task(context.Background(), "task.a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != state.TaskFailed || !strings.Contains(got.LastError, "never registered") {
		t.Errorf("task.a = %s %q, want failed naming the launches", got.Status, got.LastError)
	}
}

// backoff = "0s" retries at once: Inputs marks the policy Immediate
// (and the coordinator keeps the zero backoff instead of its 5s default:
// coordinator.TestImmediateRetryKeepsZeroBackoff).
func TestApplyInputsImmediateRetry(t *testing.T) {
	t.Parallel()
	_, cfg, p, _ := applyFixture(t, `
pool "p" {
  provider = "local"
}

task "now" {
  command = ["true"]
  retry {
    max_attempts = 2
    backoff      = "0s"
  }
}

task "later" {
  command = ["true"]
}
`)
	_, tasks := Inputs(cfg, p)
	if got := tasks["task.now"].Retry; !got.Immediate || got.Backoff != 0 {
		t.Fatalf("task.now retry = %+v, want Immediate with no backoff", got)
	}
	if got := tasks["task.later"].Retry; got.Immediate || got.Backoff != 5*time.Second {
		t.Fatalf("task.later retry = %+v, want the 5s default", got)
	}
}

// Ray pools' settings reach the provider (launches and reclaim), and their
// workers share no disk with apply.
func TestRayPoolSettings(t *testing.T) {
	t.Parallel()
	closed := &ray.Settings{Address: "http://h:8265", WdcPath: "/wdc"}
	open := &ray.Settings{Address: "http://h:8265", WdcPath: "/wdc", AllowWrites: true}
	cfg := &wdchcl.Config{Pools: []*wdchcl.Pool{{Name: "closed", Provider: "ray", Settings: closed}, {Name: "open", Provider: "ray", Settings: open}}}
	if s := ProviderSettings(cfg)["ray"]; len(s) != 2 || s[0] != wdchcl.ProviderSettings(closed) {
		t.Errorf("ProviderSettings[ray] = %v", s)
	}
	pools, _ := Inputs(cfg, &plan.Plan{})
	if pools[1].Settings != wdchcl.ProviderSettings(open) || !pools[1].Runtime.SharesNoDisk {
		t.Errorf("Inputs: %+v", pools[1])
	}
}
