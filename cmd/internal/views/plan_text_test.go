package views

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// Golden-file tests of the human plan output (PlanText). The expected
// outputs are in testdata/golden/*.txt; run with WDC_UPDATE_GOLDEN=1 to
// rewrite them, then review the diff.

var goldenNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func gPool(name string, capacity, min, max int, labels map[string]string) *wdchcl.Pool {
	if labels == nil {
		labels = map[string]string{}
	}
	return &wdchcl.Pool{Name: name, Provider: "local", Capacity: capacity, Min: min, Max: max, Labels: labels}
}

func gTask(name string, index int, placement map[string]string, command []string, deps ...string) *wdchcl.Task {
	if placement == nil {
		placement = map[string]string{}
	}
	return &wdchcl.Task{Name: name, Index: index, Command: command, Env: map[string]string{},
		Dir: "/cfg", Placement: placement, DependsOn: deps, Retry: wdchcl.Retry{MaxAttempts: 1, MaxLost: 3}}
}

// goldenConfig: fetch → test[0], test[1] → report, and lint on its own.
// Pool "builders" (can = build) is the only one for test; fetch, report
// and lint may run on either pool.
func goldenConfig() *wdchcl.Config {
	return &wdchcl.Config{
		Dir: "/cfg",
		Pools: []*wdchcl.Pool{
			gPool("builders", 1, 0, 2, map[string]string{"can": "build"}),
			gPool("general", 2, 1, 3, nil),
		},
		Tasks: []*wdchcl.Task{
			gTask("fetch", -1, nil, []string{"curl", "-o", "src.tgz", "https://example.com/src.tgz"}),
			gTask("test", 0, map[string]string{"can": "build"}, []string{"go", "test", "-run", "Shard0", "./..."}, "task.fetch"),
			gTask("test", 1, map[string]string{"can": "build"}, []string{"go", "test", "-run", "Shard1", "./..."}, "task.fetch"),
			gTask("report", -1, nil, []string{"sh", "-c", "cat reports/*.json > summary.json"}, "task.test[0]", "task.test[1]"),
			gTask("lint", -1, nil, []string{"golangci-lint", "run"}),
		},
	}
}

// filesConfig: split reads words.txt of the configuration directory and
// writes parts/*.txt; sort reads them through input "parts" (so they land
// in parts/parts/), on a pool labelled gpu that starts with one worker and
// may grow to three; merge sets dir, so its input block lands under
// $WDC_ATTEMPT_DIR. The configuration directory is a temporary one holding
// words.txt, whose content, not its place, goes into the hashes.
func filesConfig(t *testing.T) *wdchcl.Config {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "words.txt"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	split := gTask("split", -1, nil, []string{"split", "-l", "1", "words.txt", "parts/"})
	split.Dir, split.Inputs, split.Outputs = dir, []string{"words.txt"}, []string{"parts/*.txt"}
	sort := gTask("sort", -1, map[string]string{"gpu": "yes"}, []string{"sh", "-c", "cat parts/parts/*.txt | sort"}, "task.split")
	sort.Dir, sort.Mounts = dir, []wdchcl.Mount{{Name: "parts", From: "task.split", Output: "parts/*.txt"}}
	merge := gTask("merge", -1, nil, []string{"sh", "-c", "cat $WDC_ATTEMPT_DIR/parts/parts/*.txt"}, "task.split")
	merge.Dir, merge.DirSet, merge.Mounts = filepath.Join(dir, "sub"), true, []wdchcl.Mount{{Name: "parts", From: "task.split", Output: "parts/*.txt"}}
	return &wdchcl.Config{
		Dir: dir,
		Pools: []*wdchcl.Pool{
			gPool("gpus", 1, 1, 3, map[string]string{"gpu": "yes"}),
		},
		Tasks: []*wdchcl.Task{split, sort, merge},
	}
}

// goldenState records every task of cfg as an apply would have left it,
// succeeded unless overridden (address → status); failed and cancelled
// tasks get a last error.
func goldenState(cfg *wdchcl.Config, overrides map[string]state.TaskStatus) *state.Snapshot {
	snap := &state.Snapshot{Lineage: "0123456789abcdef0123456789abcdef", Serial: 12}
	defs := plan.Definitions(cfg, nil)
	for _, t := range cfg.Tasks {
		status := state.TaskSucceeded
		if o, ok := overrides[t.Address()]; ok {
			status = o
		}
		d := defs[t.Address()]
		task := state.Task{Address: t.Address(), Name: t.Name, Index: t.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: status, Attempts: 1}
		switch status {
		case state.TaskFailed:
			task.LastError = "attempt 1 failed (failure budget spent): exit status 2"
		case state.TaskCancelled:
			task.LastError = "dependency task.fetch failed"
		}
		snap.Tasks = append(snap.Tasks, task)
	}
	return snap
}

// withTask adds a task that is not in the configuration to snap.
func withTask(snap *state.Snapshot, addr string, status state.TaskStatus) *state.Snapshot {
	name := strings.TrimPrefix(addr, "task.")
	snap.Tasks = append(snap.Tasks, state.Task{Address: addr, Name: name, Index: -1,
		DefHash: strings.Repeat("5e", 32), Spec: []byte(`{}`), Status: status})
	return snap
}

// withLease records an active lease of attempt 1 for addr, expiring at
// expires.
func withLease(snap *state.Snapshot, addr string, token int64, expires time.Time) *state.Snapshot {
	return withLeaseStatus(snap, addr, token, expires, state.LeaseActive)
}

// withLeaseStatus records a lease of attempt 1 for addr with the given
// status, expiring at expires.
func withLeaseStatus(snap *state.Snapshot, addr string, token int64, expires time.Time, status state.LeaseStatus) *state.Snapshot {
	snap.Leases = append(snap.Leases, state.Lease{Token: token, Task: addr, WorkerID: "w-0123456789ab", Attempt: 1,
		Status: status, GrantedAt: expires.Add(-10 * time.Second), ExpiresAt: expires})
	return snap
}

func TestRenderPlanGolden(t *testing.T) {
	edited := goldenConfig()
	edited.Tasks[0].Command = []string{"curl", "-fsSL", "-o", "src.tgz", "https://example.com/src.tgz"}

	lintEdited := goldenConfig()
	lintEdited.Tasks[4].Command = []string{"golangci-lint", "run", "--fix"}

	// test[1] is no longer in the configuration; lint is removed too.
	shrunk := goldenConfig()
	shrunk.Tasks = shrunk.Tasks[:2]
	shrunk.Tasks[1].Name, shrunk.Tasks[1].Index = "test", -1

	// A third pool that also satisfies can = build, so test has two
	// candidates and lint three.
	threePools := goldenConfig()
	threePools.Pools = append(threePools.Pools, gPool("spare", 4, 0, 8, map[string]string{"can": "build", "zone": "eu"}))

	// fetch succeeded, test[0] succeeded (its command changes below),
	// test[1] failed; report and lint are not in the state (they run);
	// task.old runs under a lease but left the configuration.
	mixedState := goldenState(goldenConfig(), map[string]state.TaskStatus{"task.test[1]": state.TaskFailed})
	mixedState.Tasks = mixedState.Tasks[:3]
	mixedState = withLease(withTask(mixedState, "task.old", state.TaskRunning), "task.old", 9, goldenNow.Add(time.Minute))
	mixed := goldenConfig()
	mixed.Tasks[1].Command = []string{"go", "test", "-count=1", "-run", "Shard0", "./..."}

	tests := []struct {
		name    string
		cfg     *wdchcl.Config
		snap    *state.Snapshot
		replace []string
		color   bool
	}{
		{name: "run_fresh_state", cfg: goldenConfig(), snap: state.EmptySnapshot()},
		{name: "run_pending_from_earlier_apply", cfg: goldenConfig(), snap: goldenState(goldenConfig(), map[string]state.TaskStatus{
			"task.report": state.TaskPending, "task.lint": state.TaskQueued})},
		{name: "replace_definition_changed", cfg: edited, snap: goldenState(goldenConfig(), nil)},
		{name: "replace_own_definition_only", cfg: lintEdited, snap: goldenState(goldenConfig(), nil)},
		{name: "replace_requested_unchanged", cfg: goldenConfig(), snap: goldenState(goldenConfig(), nil), replace: []string{"task.test[0]"}},
		{name: "retry_failed_and_cancelled", cfg: goldenConfig(), snap: goldenState(goldenConfig(), map[string]state.TaskStatus{
			"task.test[1]": state.TaskFailed, "task.report": state.TaskCancelled})},
		{name: "retry_lease_expired_or_running", cfg: goldenConfig(), snap: withLease(withLease(withLeaseStatus(goldenState(goldenConfig(), map[string]state.TaskStatus{
			"task.test[0]": state.TaskRunning, "task.test[1]": state.TaskRunning, "task.lint": state.TaskRunning, "task.fetch": state.TaskRunning}),
			"task.test[0]", 4, goldenNow.Add(-time.Second), state.LeaseExpired), "task.test[1]", 5, goldenNow.Add(time.Minute)),
			"task.fetch", 3, goldenNow.Add(-time.Minute))},
		{name: "retry_interrupted", cfg: goldenConfig(), snap: withLeaseStatus(goldenState(goldenConfig(), map[string]state.TaskStatus{
			"task.lint": state.TaskQueued, "task.report": state.TaskPending}), "task.lint", 6, goldenNow.Add(-time.Second), state.LeaseReleased)},
		{name: "cancel_removed_tasks", cfg: shrunk, snap: withTask(withTask(goldenState(goldenConfig(), map[string]state.TaskStatus{
			"task.test[1]": state.TaskQueued, "task.lint": state.TaskFailed}), "task.ghost", state.TaskRunning), "task.zombie", state.TaskPending)},
		{name: "no_changes", cfg: goldenConfig(), snap: goldenState(goldenConfig(), nil)},
		{name: "several_candidate_pools", cfg: threePools, snap: state.EmptySnapshot()},
		{name: "every_action_no_color", cfg: mixed, snap: mixedState},
		{name: "every_action_color", cfg: mixed, snap: mixedState, color: true},
		{name: "no_changes_color", cfg: goldenConfig(), snap: goldenState(goldenConfig(), nil), color: true},
	}
	tests = append(tests, struct {
		name    string
		cfg     *wdchcl.Config
		snap    *state.Snapshot
		replace []string
		color   bool
	}{name: "files_and_input_blocks", cfg: filesConfig(t), snap: state.EmptySnapshot()})
	// The state recorded split with another output and sort reading
	// another pattern of it.
	before := filesConfig(t)
	before.Tasks[0].Outputs = []string{"parts/*.txt", "count.txt"}
	before.Tasks[1].Mounts = []wdchcl.Mount{{Name: "parts", From: "task.split", Output: "count.txt"}}
	tests = append(tests, struct {
		name    string
		cfg     *wdchcl.Config
		snap    *state.Snapshot
		replace []string
		color   bool
	}{name: "files_outputs_changed", cfg: filesConfig(t), snap: goldenState(before, nil)})
	update := os.Getenv("WDC_UPDATE_GOLDEN") != ""
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := plan.New(tt.cfg, tt.snap, goldenNow, plan.Options{Replace: tt.replace})
			if diags.HasErrors() {
				t.Fatalf("NewPlan: %s", diags.Error())
			}
			doc, err := jsonplan.New(tt.cfg, p, tt.replace, "test")
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := PlanText(&buf, doc, tt.color); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden", "plan_"+tt.name+".txt"), buf.Bytes(), update)
		})
	}
}

// TestRenderPlanGoldenCoverage keeps the golden files honest: together
// they show every action, every reason phrase and both color modes.
func TestRenderPlanGoldenCoverage(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "plan_*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, want := range []string{
		"will run: new task",
		"will run: left pending by an earlier apply that stopped before running it",
		"will run: left queued by an earlier apply that stopped before running it",
		"will be retried: attempt 1 (fencing token 6) was interrupted when an earlier apply stopped; it runs again from the start",
		"will be retried: attempt 1 (fencing token 3) was running when an earlier apply stopped; apply revokes its lease first",
		"will be replaced: definition changed",
		"will be replaced: depends on task.fetch, which is replaced",
		"will be replaced: replacement requested with --replace",
		"(definition unchanged)",
		" → ",
		"will be retried: failed earlier: ",
		"will be retried: cancelled earlier: ",
		"will be retried: lease of attempt 1 (fencing token 4) expired",
		"will be retried: attempt 1 (fencing token 5) was running when an earlier apply stopped; apply revokes its lease first",
		"will be retried: was running when an earlier apply stopped",
		"will be cancelled: no longer in the configuration",
		"(could also run on pool.general, pool.spare)",
		"No changes.",
		"\x1b[32m  +\x1b[0m",
		"\x1b[33m-/+\x1b[0m",
		"\x1b[33m  ~\x1b[0m",
		"\x1b[31m  -\x1b[0m",
		"\x1b[1mPlan: ",
		"placement  = { \"can\" = \"build\" }",
		"inputs     = [\"words.txt\"]",
		"outputs    = [\"parts/*.txt\"]",
		"input \"parts\" ← task.split outputs parts/*.txt → parts/parts/*.txt",
		"input \"parts\" ← task.split outputs parts/*.txt → $WDC_ATTEMPT_DIR/parts/parts/*.txt",
		"Plan: up to 3 workers (1 at start) to launch",
		"~ outputs was [\"parts/*.txt\", \"count.txt\"]",
		"~ input blocks were \"parts\" ← task.split outputs count.txt",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no golden file shows %q", want)
		}
	}
}

// checkGolden compares got with the golden file at path, or rewrites the
// file when update is set.
func checkGolden(t *testing.T, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with WDC_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (-want +got; WDC_UPDATE_GOLDEN=1 rewrites it):\n%s", path,
			cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")))
	}
}
