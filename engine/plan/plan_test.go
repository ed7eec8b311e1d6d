package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func pool(name string, capacity, min, max int, labels map[string]string) *wdchcl.Pool {
	if labels == nil {
		labels = map[string]string{}
	}
	return &wdchcl.Pool{Name: name, Provider: "local", Capacity: capacity, Min: min, Max: max, Labels: labels}
}

func task(name string, index int, cmd string, placement map[string]string, deps ...string) *wdchcl.Task {
	if placement == nil {
		placement = map[string]string{}
	}
	return &wdchcl.Task{Name: name, Index: index, Command: []string{"sh", "-c", cmd}, Env: map[string]string{},
		Dir: "/cfg", Placement: placement, DependsOn: deps, Retry: wdchcl.Retry{MaxAttempts: 1, MaxLost: 3}}
}

// baseConfig: fetch → build → report, plus lint on its own; two pools.
func baseConfig() *wdchcl.Config {
	return &wdchcl.Config{
		Dir: "/cfg",
		Pools: []*wdchcl.Pool{
			pool("builders", 1, 0, 2, map[string]string{"can": "build"}),
			pool("general", 2, 1, 3, nil),
		},
		Tasks: []*wdchcl.Task{
			task("fetch", -1, "fetch", nil),
			task("build", -1, "build", map[string]string{"can": "build"}, "task.fetch"),
			task("report", -1, "report", nil, "task.build"),
			task("lint", -1, "lint", nil),
		},
	}
}

// stateOf records every task of cfg with the given status, as an apply
// would have, except the overrides (address → status).
func stateOf(cfg *wdchcl.Config, status state.TaskStatus, overrides map[string]state.TaskStatus) *state.Snapshot {
	snap := &state.Snapshot{Lineage: "lin", Serial: 7}
	defs := Definitions(cfg, nil)
	for _, t := range cfg.Tasks {
		st := status
		if o, ok := overrides[t.Address()]; ok {
			st = o
		}
		d := defs[t.Address()]
		snap.Tasks = append(snap.Tasks, state.Task{Address: t.Address(), Name: t.Name, Index: t.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: st, LastError: map[bool]string{true: "exit status 1"}[st == state.TaskFailed]})
	}
	return snap
}

type change struct {
	Address, Action, Reason, Pool string
}

func summarize(p *Plan) []change {
	var out []change
	for _, tc := range p.Tasks {
		out = append(out, change{tc.Address, string(tc.Action), tc.Reason, tc.Pool})
	}
	return out
}

func TestNewPlan(t *testing.T) {
	edited := baseConfig()
	edited.Tasks[1].Command = []string{"sh", "-c", "build --fast"}

	removed := baseConfig()
	removed.Tasks = removed.Tasks[:3] // drop lint

	counted := baseConfig()
	counted.Tasks = append(counted.Tasks, task("shard", 0, "s0", nil), task("shard", 1, "s1", nil), task("shard", 2, "s2", nil))

	tests := []struct {
		name    string
		cfg     *wdchcl.Config
		snap    *state.Snapshot
		opts    Options
		want    []change
		summary string
		workers map[string]int
		// ready counts each pool's tasks that can start with the apply
		// (none of their dependencies runs in the plan).
		ready map[string]int
		// queued counts each pool's queue at its first step: the ready
		// tasks it can run, also those counted toward an earlier pool
		// (each is queued for every pool that can run it); nil: ready.
		queued map[string]int
	}{
		{
			name: "fresh state runs everything",
			cfg:  baseConfig(),
			snap: state.EmptySnapshot(),
			want: []change{
				{"task.fetch", "run", "new task", "builders"},
				{"task.build", "run", "new task", "builders"},
				{"task.report", "run", "new task", "builders"},
				{"task.lint", "run", "new task", "builders"},
			},
			summary: "Plan: 2 workers to launch, 4 tasks to run.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 2, "general": 0},
			queued:  map[string]int{"builders": 2, "general": 2},
		},
		{
			name:    "everything succeeded: no changes",
			cfg:     baseConfig(),
			snap:    stateOf(baseConfig(), state.TaskSucceeded, nil),
			summary: "No changes.",
			workers: map[string]int{"builders": 0, "general": 0},
			ready:   map[string]int{"builders": 0, "general": 0},
		},
		{
			name: "edited command replaces the task and its downstream only",
			cfg:  edited,
			snap: stateOf(baseConfig(), state.TaskSucceeded, nil),
			want: []change{
				{"task.build", "replace", "definition changed", "builders"},
				{"task.report", "replace", "depends on task.build, which is replaced", "builders"},
			},
			summary: "Plan: up to 2 workers (1 at start) to launch, 2 tasks to replace.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 1, "general": 0},
		},
		{
			name: "failed and cancelled tasks are retried with the reason",
			cfg:  baseConfig(),
			snap: stateOf(baseConfig(), state.TaskSucceeded, map[string]state.TaskStatus{"task.build": state.TaskFailed, "task.report": state.TaskCancelled}),
			want: []change{
				{"task.build", "retry", "failed earlier: exit status 1", "builders"},
				{"task.report", "retry", "cancelled earlier", "builders"},
			},
			summary: "Plan: up to 2 workers (1 at start) to launch, 2 tasks to retry.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 1, "general": 0},
		},
		{
			name: "unfinished task no longer configured is cancelled; finished ones are not listed",
			cfg:  removed,
			snap: stateOf(baseConfig(), state.TaskSucceeded, map[string]state.TaskStatus{"task.lint": state.TaskQueued}),
			want: []change{
				{"task.lint", "cancel", "no longer in the configuration", ""},
			},
			summary: "Plan: 1 task to cancel.",
			workers: map[string]int{"builders": 0, "general": 0},
			ready:   map[string]int{"builders": 0, "general": 0},
		},
		{
			name: "--replace forces a succeeded task and its downstream",
			cfg:  baseConfig(),
			snap: stateOf(baseConfig(), state.TaskSucceeded, nil),
			opts: Options{Replace: []string{"build"}},
			want: []change{
				{"task.build", "replace", "replacement requested with --replace", "builders"},
				{"task.report", "replace", "depends on task.build, which is replaced", "builders"},
			},
			summary: "Plan: up to 2 workers (1 at start) to launch, 2 tasks to replace.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 1, "general": 0},
		},
		{
			name: "queued and running tasks left by a stopped apply",
			cfg:  baseConfig(),
			snap: stateOf(baseConfig(), state.TaskSucceeded, map[string]state.TaskStatus{"task.lint": state.TaskQueued, "task.report": state.TaskRunning}),
			want: []change{
				{"task.report", "retry", "was running when an earlier apply stopped", "builders"},
				{"task.lint", "run", "left queued by an earlier apply that stopped before running it", "builders"},
			},
			summary: "Plan: 2 workers to launch, 1 task to run, 1 to retry.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 2, "general": 0},
			queued:  map[string]int{"builders": 2, "general": 2},
		},
		{
			name: "counted instances each count toward sizing",
			cfg:  counted,
			snap: stateOf(baseConfig(), state.TaskSucceeded, nil),
			want: []change{
				{"task.shard[0]", "run", "new task", "builders"},
				{"task.shard[1]", "run", "new task", "builders"},
				{"task.shard[2]", "run", "new task", "builders"},
			},
			summary: "Plan: 2 workers to launch, 3 tasks to run.",
			workers: map[string]int{"builders": 2, "general": 0},
			ready:   map[string]int{"builders": 3, "general": 0},
			queued:  map[string]int{"builders": 3, "general": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := New(tt.cfg, tt.snap, now, tt.opts)
			if diags.HasErrors() {
				t.Fatalf("unexpected diagnostics: %s", diags.Error())
			}
			if diff := cmp.Diff(tt.want, summarize(p)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if got := p.Summary().String(); got != tt.summary {
				t.Errorf("summary = %q, want %q", got, tt.summary)
			}
			gotWorkers, gotReady, gotQueued := map[string]int{}, map[string]int{}, map[string]int{}
			for _, pc := range p.Pools {
				gotWorkers[pc.Name] = pc.Workers
				gotReady[pc.Name] = pc.Ready
				gotQueued[pc.Name] = pc.QueuedAtStart
			}
			if diff := cmp.Diff(tt.ready, gotReady); diff != "" {
				t.Errorf("ready tasks per pool (-want +got):\n%s", diff)
			}
			wantQueued := tt.queued
			if wantQueued == nil {
				wantQueued = tt.ready
			}
			if diff := cmp.Diff(wantQueued, gotQueued); diff != "" {
				t.Errorf("tasks queued at the first step per pool (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.workers, gotWorkers); diff != "" {
				t.Errorf("workers (-want +got):\n%s", diff)
			}
			if p.Lineage != tt.snap.Lineage || p.Serial != tt.snap.Serial {
				t.Errorf("plan records lineage %q serial %d, want %q %d", p.Lineage, p.Serial, tt.snap.Lineage, tt.snap.Serial)
			}
		})
	}
}

func TestNewPlanReplaceUnknownAddress(t *testing.T) {
	_, diags := New(baseConfig(), state.EmptySnapshot(), now, Options{Replace: []string{"task.nope"}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `"task.nope"`) {
		t.Fatalf("want an error naming task.nope, got %v", diags)
	}
}

func TestReplaceShowsHashes(t *testing.T) {
	edited := baseConfig()
	edited.Tasks[0].Env = map[string]string{"X": "1"}
	p, _ := New(edited, stateOf(baseConfig(), state.TaskSucceeded, nil), now, Options{})
	if len(p.Tasks) != 3 {
		t.Fatalf("editing the root task must replace it and both downstream tasks, got %+v", summarize(p))
	}
	for _, tc := range p.Tasks {
		if tc.OldHash == "" || tc.NewHash == "" || tc.OldHash == tc.NewHash {
			t.Errorf("%s: old hash %q, new hash %q: want two different hashes", tc.Address, tc.OldHash, tc.NewHash)
		}
	}
}

func TestSummaryString(t *testing.T) {
	tests := []struct {
		s    Summary
		want string
	}{
		{Summary{}, "No changes."},
		{Summary{WorkersToLaunch: 2, WorkersAtStart: 2, Run: 3, Replace: 1, Retry: 1, Cancel: 1}, "Plan: 2 workers to launch, 3 tasks to run, 1 to replace, 1 to retry, 1 to cancel."},
		{Summary{WorkersToLaunch: 1, WorkersAtStart: 1, Run: 1}, "Plan: 1 worker to launch, 1 task to run."},
		{Summary{WorkersToLaunch: 2, Run: 1}, "Plan: up to 2 workers (0 at start) to launch, 1 task to run."},
		{Summary{WorkersToLaunch: 3, WorkersAtStart: 1, Run: 3}, "Plan: up to 3 workers (1 at start) to launch, 3 tasks to run."},
		{Summary{WorkersToLaunch: 2, WorkersAtStart: 2, Run: 3}, "Plan: 2 workers to launch, 3 tasks to run."},
		{Summary{Replace: 2, Cancel: 1}, "Plan: 2 tasks to replace, 1 to cancel."},
		{Summary{Retry: 1}, "Plan: 1 task to retry."},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestWorkersFor(t *testing.T) {
	tests := []struct{ tasks, capacity, min, max, want int }{
		{0, 1, 0, 4, 0},
		{0, 1, 2, 4, 0}, // a pool with no work launches none, even with min
		{1, 1, 0, 4, 1},
		{5, 2, 0, 4, 3},
		{9, 2, 0, 4, 4},
		{1, 4, 2, 4, 2},
	}
	for _, tt := range tests {
		if got := WorkersFor(tt.tasks, tt.capacity, tt.min, tt.max); got != tt.want {
			t.Errorf("WorkersFor(%d, cap %d, min %d, max %d) = %d, want %d", tt.tasks, tt.capacity, tt.min, tt.max, got, tt.want)
		}
	}
}

func TestCheckPlacementNamesEveryUnmetLabel(t *testing.T) {
	cfg := baseConfig()
	cfg.Tasks = []*wdchcl.Task{task("gpu", -1, "x", map[string]string{"gpu": "a100", "can": "train"})}
	diags := CheckPlacement(cfg)
	if len(diags) != 1 {
		t.Fatalf("want one diagnostic, got %d: %v", len(diags), diags)
	}
	detail := diags[0].Detail
	for _, want := range []string{
		`pool.builders: needs can = "train", has can = "build"; needs gpu = "a100", has no gpu label`,
		`pool.general: needs can = "train", has no can label; needs gpu = "a100", has no gpu label`,
	} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail %q lacks %q", detail, want)
		}
	}
}

func TestNewPlanRetriesInterruptedAttempts(t *testing.T) {
	snap := stateOf(baseConfig(), state.TaskSucceeded, map[string]state.TaskStatus{"task.lint": state.TaskQueued})
	for i := range snap.Tasks {
		if snap.Tasks[i].Address == "task.lint" {
			snap.Tasks[i].Attempts = 2
			snap.Tasks[i].LastError = "lease revoked: the apply that granted the lease is gone"
		}
	}
	p, diags := New(baseConfig(), snap, now, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := []change{{"task.lint", "retry", "an earlier apply stopped before it finished: lease revoked: the apply that granted the lease is gone", "builders"}}
	if diff := cmp.Diff(want, summarize(p)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

func TestNewPlanCountGrowsReasons(t *testing.T) {
	two := &wdchcl.Config{Dir: "/cfg", Pools: []*wdchcl.Pool{pool("p", 1, 0, 2, nil)},
		Tasks: []*wdchcl.Task{task("a", 0, "a0", nil), task("a", 1, "a1", nil), task("b", -1, "b", nil, "task.a[0]", "task.a[1]")}}
	three := &wdchcl.Config{Dir: "/cfg", Pools: two.Pools,
		Tasks: []*wdchcl.Task{task("a", 0, "a0", nil), task("a", 1, "a1", nil), task("a", 2, "a2", nil),
			task("b", -1, "b", nil, "task.a[0]", "task.a[1]", "task.a[2]")}}
	p, diags := New(three, stateOf(two, state.TaskSucceeded, nil), now, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := []change{
		{"task.a[2]", "run", "new task", "p"},
		{"task.b", "replace", "definition changed; depends on task.a[2], which is to run", "p"},
	}
	if diff := cmp.Diff(want, summarize(p)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// The instances of a counted task that no pool can run share one error
// naming them; instances with another placement get their own.
func TestCheckPlacementOncePerTask(t *testing.T) {
	cfg := baseConfig()
	gpu := map[string]string{"gpu": "a100"}
	cfg.Tasks = []*wdchcl.Task{
		task("train", 0, "x", gpu), task("train", 1, "x", gpu), task("train", 2, "x", gpu),
		task("mixed", 0, "x", gpu), task("mixed", 1, "x", nil), task("mixed", 2, "x", gpu),
	}
	diags := CheckPlacement(cfg)
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	want := []string{
		"Unsatisfiable placement for task.train (all 3 instances)",
		"Unsatisfiable placement for task.mixed[0], task.mixed[2]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("summaries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInstances(t *testing.T) {
	cases := []struct {
		indices []int
		total   int
		want    string
	}{
		{[]int{0, 1}, 2, "task.t (all 2 instances)"},
		{[]int{1}, 2, "task.t[1]"},
		{[]int{0}, 1, "task.t[0]"},
		{[]int{0, 2}, 3, "task.t[0], task.t[2]"},
		{[]int{0, 1, 2, 5, 7, 8, 9, 10}, 12, "task.t[0] to task.t[2], task.t[5], task.t[7] to task.t[10]"},
		{[]int{3, 4}, 9, "task.t[3], task.t[4]"},
	}
	for _, c := range cases {
		if got := Instances("t", c.indices, c.total); got != c.want {
			t.Errorf("Instances(%v, %d) = %q, want %q", c.indices, c.total, got, c.want)
		}
	}
}

// A value computed from a sensitive variable is recorded as its keyed hash
// under the state's key: the same value plans no changes, another value
// replaces the task and what depends on it, and the recorded spec holds no
// value.
func TestPlanSensitiveValues(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	withToken := func(token string) *wdchcl.Config {
		cfg := baseConfig()
		fetch := cfg.Tasks[0]
		fetch.Env = map[string]string{"TOKEN": token, "MODE": "x"}
		fetch.Sensitive = wdchcl.SensitiveFields{EnvKeys: map[string]bool{"TOKEN": true},
			From: map[string][]string{"env.TOKEN": {"var.token"}}}
		return cfg
	}
	recorded := func(cfg *wdchcl.Config, key []byte) *state.Snapshot {
		snap := &state.Snapshot{Lineage: "lin", Serial: 7, HashKey: key}
		for addr, d := range Definitions(cfg, key) {
			snap.Tasks = append(snap.Tasks, state.Task{Address: addr, DefHash: d.Hash, Spec: d.Definition.Canonical(), Status: state.TaskSucceeded})
		}
		return snap
	}
	snap := recorded(withToken("hunter2"), key)
	for _, tk := range snap.Tasks {
		if strings.Contains(string(tk.Spec), "hunter2") {
			t.Fatalf("the recorded spec of %s holds the value: %s", tk.Address, tk.Spec)
		}
	}
	replaced := []change{
		{"task.fetch", "replace", "definition changed", "builders"},
		{"task.build", "replace", "depends on task.fetch, which is replaced", "builders"},
		{"task.report", "replace", "depends on task.build, which is replaced", "builders"},
	}
	for _, tt := range []struct {
		name string
		cfg  *wdchcl.Config
		snap *state.Snapshot
		want []change
	}{
		{"the same value", withToken("hunter2"), snap, nil},
		{"another value", withToken("hunter3"), snap, replaced},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := New(tt.cfg, tt.snap, now, Options{})
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if diff := cmp.Diff(tt.want, summarize(p)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

// Rekey gives the definitions and hashes a plan made with no state would
// have had with the state's key, without reading input files again.
func TestRekey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := baseConfig()
	cfg.Tasks[0].Command = []string{"deploy", "hunter2"}
	cfg.Tasks[0].Sensitive = wdchcl.SensitiveFields{Command: true, From: map[string][]string{"command": {"var.token"}}}
	p, diags := New(cfg, state.EmptySnapshot(), now, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	Rekey(p, cfg, key)
	want := Definitions(cfg, key)
	for _, tc := range p.Tasks {
		if tc.NewHash != want[tc.Address].Hash || p.Definitions[tc.Address].Hash != want[tc.Address].Hash {
			t.Errorf("%s: rekeyed hash %s, want %s", tc.Address, tc.NewHash, want[tc.Address].Hash)
		}
	}
	if string(p.Key) != string(key) {
		t.Errorf("the plan's key is %q", p.Key)
	}
}
