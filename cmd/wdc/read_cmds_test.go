package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/state"
)

// seedState writes a state with one pool, two workers, three tasks (one
// succeeded, one running under a lease, one failed) and returns its path.
func seedState(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.UpsertPool(ctx, state.Pool{Name: "builders", Provider: "local", Max: 2, Capacity: 1, Labels: map[string]string{"can": "build"}}, now))
	w1, err := st.RegisterWorker(ctx, state.Worker{ID: "w-one", Pool: "builders", Labels: map[string]string{"can": "build"}, Capacity: 1,
		Host: "lab1", PID: 4242, Version: "test", HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
	must(err)
	_, err = st.RegisterWorker(ctx, state.Worker{ID: "w-two", Pool: "builders", Labels: map[string]string{"can": "build"}, Capacity: 1,
		Host: "lab2", PID: 4343, Version: "test", HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
	must(err)
	for _, addr := range []string{"task.fetch", "task.build[0]", "task.lint"} {
		name := strings.TrimSuffix(strings.TrimPrefix(addr, "task."), "[0]")
		idx := -1
		if strings.HasSuffix(addr, "]") {
			idx = 0
		}
		must(st.UpsertTask(ctx, state.TaskDef{Address: addr, Name: name, Index: idx, DefHash: strings.Repeat("ab", 32),
			Spec: []byte(`{}`), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, now))
	}
	must(seedSucceeded(ctx, st, now, "task.fetch"))
	must(seedFailed(ctx, st, now, "exit status 2", "task.lint"))
	_, err = st.GrantLease(ctx, state.GrantRequest{Task: "task.build[0]", WorkerID: w1.ID, Timeout: time.Hour, Grace: 2 * time.Minute}, now)
	must(err)
	return path
}

func runWDC(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb, []string{"NO_COLOR=1"})
	return out.String(), errb.String(), code
}

func TestReadCommands(t *testing.T) {
	path := seedState(t)
	tests := []struct {
		name string
		args []string
		want []string // substrings of stdout, in order
	}{
		{"tasks list", []string{"tasks", "list"}, []string{
			"ADDRESS", "STATUS", "ATTEMPTS", "LAST ERROR",
			"task.build[0]", "running", "1", "abababab",
			"task.fetch", "succeeded", "1",
			"task.lint", "failed", "0", "exit status 2",
		}},
		{"tasks show by bare name", []string{"tasks", "show", "build[0]"}, []string{
			"task.build[0]", "status:     running", "attempts:   1",
			"Attempts:", "WORKER", "TOKEN", "w-one", "2026-11-29T12:00:00Z",
			"Events:", "leased",
		}},
		{"tasks show failed task", []string{"tasks", "show", "task.lint"}, []string{
			"status:     failed", "last error: exit status 2", "Attempts:", "none", "Events:", "failed", "exit status 2",
		}},
		{"workers list", []string{"workers", "list"}, []string{
			"ID", "POOL", "LABELS", "STATUS", "HOST", "PID", "LAST HEARTBEAT", "LEASES",
			"w-one", "builders", "can=build", "active", "lab1", "4242", "2026-11-29T12:00:00Z", "1",
			"w-two", "builders", "can=build", "active", "lab2", "4343", "2026-11-29T12:00:00Z", "0",
		}},
		{"leases list", []string{"leases", "list"}, []string{
			"TOKEN", "TASK", "ATTEMPT", "WORKER", "STATUS", "1", "task.build[0]", "1", "w-one", "active",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runWDC(t, append([]string{"--state", path}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			rest := stdout
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout lacks %q after the earlier matches; stdout:\n%s", w, stdout)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestReadCommandsJSON(t *testing.T) {
	path := seedState(t)

	var tasks []views.TaskJSON
	decode(t, &tasks, "--state", path, "tasks", "list", "--json")
	if len(tasks) != 3 || tasks[0].Address != "task.build[0]" || tasks[0].Status != "running" || tasks[2].LastError != "exit status 2" {
		t.Errorf("tasks list --json = %+v", tasks)
	}

	var workers []workerJSON
	decode(t, &workers, "--state", path, "workers", "list", "--json")
	// w-one and w-two, and the worker that seeded task.fetch's success
	if len(workers) != 3 || workers[0].ID != "w-one" || workers[0].LeasesHeld != 1 || workers[0].Labels["can"] != "build" || workers[0].TTL != 10 {
		t.Errorf("workers list --json = %+v", workers)
	}

	var leases []leaseJSON
	decode(t, &leases, "--state", path, "leases", "list", "--json")
	if len(leases) != 2 || leases[0].Status != "completed" {
		t.Fatalf("leases list --json = %+v, want task.fetch's completed lease and task.build[0]'s active one", leases)
	}
	l := leases[1]
	if l.FencingToken != 2 || l.WorkerID != "w-one" || l.Status != "active" || l.ExpiresAt == nil {
		t.Errorf("leases list --json = %+v", leases)
	}
	// expires_at = min(granted + ttl, granted + timeout + grace) = granted + 10s
	if got := l.ExpiresAt.Sub(*l.GrantedAt); got != 10*time.Second {
		t.Errorf("lease expires %v after its grant, want 10s (the worker's ttl)", got)
	}

	var show views.TaskDetailJSON
	decode(t, &show, "--state", path, "tasks", "show", "task.build[0]", "--json")
	if show.Address != "task.build[0]" || len(show.AttemptList) != 1 || show.AttemptList[0].FencingToken != 2 || len(show.Events) == 0 {
		t.Errorf("tasks show --json = %+v", show)
	}
}

func TestReadCommandsErrors(t *testing.T) {
	path := seedState(t)
	missing := filepath.Join(t.TempDir(), "none.db")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"unknown task", []string{"--state", path, "tasks", "show", "task.nope"}, 1, "", "no task task.nope in the state"},
		{"counted task without an index", []string{"--state", path, "tasks", "show", "build"}, 1, "", "task.build is a counted task: name one instance, e.g. wdc tasks show task.build[0] (instances: task.build[0])"},
		{"logs of a counted task without an index", []string{"--state", path, "logs", "build"}, 1, "", "task.build is a counted task: name one instance, e.g. wdc logs task.build[0] (instances: task.build[0])"},
		{"outputs of a counted task without an index", []string{"--state", path, "artifacts", "list", "build"}, 1, "", "task.build is a counted task: name one instance, e.g. wdc artifacts list task.build[0]"},
		{"logs of an unknown task", []string{"--state", path, "logs", "nope"}, 1, "", "no task task.nope in the state"},
		{"show without a state file", []string{"--state", missing, "tasks", "show", "x"}, 1, "", "there is no state file"},
		{"list without a state file is empty", []string{"--state", missing, "tasks", "list"}, 0, "No tasks in the state (there is no state file at", ""},
		{"json list without a state file", []string{"--state", missing, "workers", "list", "--json"}, 0, "[]", ""},
		{"leases without a state file", []string{"--state", missing, "leases", "list"}, 0, "No leases in the state (there is no state file at", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runWDC(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stdout, tt.wantStdout) || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d, stdout containing %q, stderr containing %q",
					code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func decode(t *testing.T, v any, args ...string) {
	t.Helper()
	stdout, stderr, code := runWDC(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr:\n%s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stdout)
	}
}

// TestListingsEscapeRegistrationText: a registration host holding a
// right-to-left override (U+202E, which the protocol's printable check
// lets through: it is not a control character) is printed by wdc
// workers list and wdc show as \u202e, never raw; so is a task's last
// error in wdc tasks list.
func TestListingsEscapeRegistrationText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := state.Open(ctx, path)
	mustDo(t, err)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mustDo(t, st.UpsertPool(ctx, state.Pool{Name: "p", Provider: "external", Max: 1, Capacity: 1}, now))
	_, err = st.RegisterWorker(ctx, state.Worker{ID: "w-one", Pool: "p", Capacity: 1, Host: "lab\u202etxt.exe", PID: 7, Version: "test",
		HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, now)
	mustDo(t, err)
	mustDo(t, st.UpsertTask(ctx, state.TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: strings.Repeat("ab", 32),
		Spec: []byte(`{}`), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, now))
	mustDo(t, seedFailed(ctx, st, now, "exit 1: \u202egnp.exe", "task.a"))
	st.Close()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"workers", "list"}, `lab\u202etxt.exe`},
		{[]string{"show"}, `lab\u202etxt.exe`},
		{[]string{"tasks", "list"}, `exit 1: \u202egnp.exe`},
		{[]string{"tasks", "show", "task.a"}, `last error: exit 1: \u202egnp.exe`},
	} {
		stdout, stderr, code := runWDC(t, append([]string{"--state", path}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr:\n%s", tt.args, code, stderr)
		}
		if strings.Contains(stdout, "\u202e") || !strings.Contains(stdout, tt.want) {
			t.Errorf("%v: want %q and no raw U+202E; stdout:\n%s", tt.args, tt.want, stdout)
		}
	}
}
