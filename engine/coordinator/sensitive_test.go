package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// stateKey makes a state file and returns its path and hash key.
func stateKey(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key, err := s.HashKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return path, key
}

// A task with a sensitive value: the state keeps its spec without it, the
// worker gets it in its assignment, and the assignment hashes to its lease
// as the agent checks.
func TestSensitiveValueReachesOnlyTheWorker(t *testing.T) {
	path, key := stateKey(t)
	rt := rtTask("deploy")
	rt.Definition.Env = map[string]string{"TOKEN": "hunter2", "MODE": "fast"}
	rt.Definition = rt.Definition.Protect(key, map[string][]string{protocol.EnvPart("TOKEN"): {"var.token"}})
	rt.DefHash = protocol.DefinitionHash(rt.Definition, nil)
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rt}, harnessOpts{path: path})

	if spec := h.task("task.deploy").Spec; strings.Contains(string(spec), "hunter2") || !strings.Contains(string(spec), `"TOKEN":"(sensitive)"`) {
		t.Errorf("the state's spec: %s", spec)
	}
	a := h.register("p").claimOne()
	if a.Definition.Env["TOKEN"] != "hunter2" || protocol.DefinitionHash(a.Definition, a.DepHashes) != a.DefHash {
		t.Errorf("assignment env %v, hash %s; want the value and the lease's hash %s", a.Definition.Env, protocol.DefinitionHash(a.Definition, a.DepHashes), a.DefHash)
	}
	h.store.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") {
		t.Error("the state file holds the value")
	}
}

// A coordinator that does not have a task's sensitive value — it has the
// definition as the state keeps it, or one whose value is not the one its
// hash covers — refuses to start, saying so.
func TestCoordinatorRefusesTaskWithoutItsSensitiveValue(t *testing.T) {
	path, key := stateKey(t)
	real := rtTask("deploy")
	real.Definition.Env = map[string]string{"TOKEN": "hunter2"}
	real.Definition = real.Definition.Protect(key, map[string][]string{protocol.EnvPart("TOKEN"): {"var.token"}})
	real.DefHash = protocol.DefinitionHash(real.Definition, nil)

	stored := real
	if err := json.Unmarshal(real.Definition.Canonical(), &stored.Definition); err != nil {
		t.Fatal(err)
	}
	changed := real
	changed.Definition.Env = map[string]string{"TOKEN": "hunter3"}

	s, err := state.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pools := []coordinator.PoolRuntime{rtPool("p", 1)}
	upsertAll(t, s, pools, []coordinator.TaskRuntime{real}, ct0)
	for name, rt := range map[string]coordinator.TaskRuntime{"as the state keeps it": stored, "another value": changed} {
		_, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: []coordinator.TaskRuntime{rt}, Now: func() time.Time { return ct0 }})
		want := "task task.deploy: this apply does not have the values of its sensitive env.TOKEN (from var.token)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: New = %v, want an error containing %q", name, err, want)
		}
	}
}

// sensitiveChainConfig proposes a task whose environment holds a sensitive
// variable's value.
const sensitiveChainConfig = `
variable "token" {
  type      = string
  sensitive = true
}

pool "p" {
  provider = "local"
}

task "doctor" {
  command = ["true"]
}

task "notify" {
  proposed_only = true
  command       = ["echo", "notify", proposal.input.run]
  env           = { TOKEN = var.token }
}

edge "ticket_notify" {
  from    = task.doctor
  type    = "ticket"
  propose = task.notify
  input   = object({ run = string })
}
`

// A proposal keeps no sensitive value either: its run gets the value from
// rendering the proposed task again with the apply's configuration, which
// must give the hash it recorded; one that does not is refused, saying
// what to do.
func TestProposalSensitiveValue(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(sensitiveChainConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(token string) *wdchcl.Config {
		cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: []string{"token=" + token}})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return cfg
	}
	cfg := load("hunter2")
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("doctor")}, harnessOpts{config: cfg})
	w := h.register("p")
	a := w.claimOne()
	zero := 0
	if _, err := w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
		IdempotencyKey: "k", ExitCode: &zero, Recommendations: json.RawMessage(`[{"type":"ticket","input":{"run":"42"}}]`)}); err != nil {
		t.Fatal(err)
	}
	<-h.c.Done()
	p, err := h.store.Proposal(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.Spec), "hunter2") || !strings.Contains(string(p.Spec), `"TOKEN":"(sensitive)"`) {
		t.Errorf("the proposal's spec: %s", p.Spec)
	}
	key, err := h.store.HashKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := coordinator.ProposalRuntime(p, cfg, key)
	if err != nil || rt.Definition.Env["TOKEN"] != "hunter2" || protocol.DefinitionHash(rt.Definition, nil) != p.DefHash {
		t.Errorf("ProposalRuntime = env %v, %v; want the value, hashing to the proposal's %s", rt.Definition.Env, err, p.DefHash)
	}
	_, err = coordinator.ProposalRuntime(p, load("hunter3"), key)
	want := "proposal.1: the sensitive values of its task, env.TOKEN (from var.token), are not kept in the state, and this configuration does not render them as they were when it was proposed: " +
		"give those variables their values again, or reject it (wdc reject 1 --reason TEXT)"
	if err == nil || err.Error() != want {
		t.Errorf("ProposalRuntime with another value: %v\nwant %s", err, want)
	}
}
