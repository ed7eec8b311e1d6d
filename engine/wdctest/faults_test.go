package wdctest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// TestInjector: each fault fires once, for its own task and attempt (or
// pool), and says what it did; silence ends after its duration on the
// run's clock; fail_launch fires fully only after its count.
func TestInjector(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	faults := []*wdchcl.TestFault{
		{Kind: wdchcl.FaultKillWorker, Task: "task.a", Attempt: 2},
		{Kind: wdchcl.FaultSilenceWorker, Task: "task.b", Attempt: 1, Duration: time.Minute},
		{Kind: wdchcl.FaultLateResult, Task: "task.c", Attempt: 1},
		{Kind: wdchcl.FaultFailLaunch, Pool: "gpu", Count: 2},
		{Kind: wdchcl.FaultKillWorker, Task: "task.never", Attempt: 1},
	}
	in := newInjector(faults, clock)
	killed := make(chan int, 4)
	in.kill = func(pid int) error { killed <- pid; return nil }

	in.AttemptStarted("task.a", 1, "w1", 101) // another attempt: nothing
	in.AttemptStarted("task.a", 2, "w1", 101)
	in.AttemptStarted("task.a", 2, "w1", 101) // fired already
	if pid := <-killed; pid != 101 {
		t.Fatalf("killed pid %d, want 101", pid)
	}
	select {
	case pid := <-killed:
		t.Fatalf("killed %d again", pid)
	case <-time.After(20 * time.Millisecond):
	}

	in.AttemptStarted("task.b", 1, "w2", 102)
	for _, tc := range []struct {
		after  time.Duration
		worker string
		drop   bool
	}{{0, "w2", true}, {0, "w1", false}, {59 * time.Second, "w2", true}, {time.Second, "w2", false}, {time.Hour, "w2", false}} {
		advance(tc.after)
		if got := in.DropHeartbeat(tc.worker); got != tc.drop {
			t.Fatalf("after %s more, heartbeat of %s dropped %v, want %v", tc.after, tc.worker, got, tc.drop)
		}
	}

	if in.RevokeBeforeResult("task.c", 2) || !in.RevokeBeforeResult("task.c", 1) || in.RevokeBeforeResult("task.c", 1) {
		t.Fatal("late_result must revoke attempt 1's lease once, and nothing else")
	}

	if err := in.FailLaunch("cpu"); err != nil {
		t.Fatalf("a launch of another pool failed: %v", err)
	}
	for i, want := range []bool{true, true, false} {
		if err := in.FailLaunch("gpu"); (err != nil) != want || (err != nil && !errors.Is(err, errLaunchFault)) {
			t.Fatalf("launch %d of gpu: %v, want failed %v", i+1, err, want)
		}
		if i == 0 {
			if r := in.outcome()[3]; r.Fired || r.Detail != "1 of 2 launches failed" {
				t.Fatalf("after one failed launch: %+v, want not fired yet", r)
			}
		}
	}

	out := in.outcome()
	for i, want := range []bool{true, true, true, true, false} {
		if out[i].Fired != want {
			t.Errorf("fault %s: fired %v, want %v (%s)", out[i].Fault, out[i].Fired, want, out[i].Detail)
		}
	}
	if f := neverFired(out[4]); !f.Fault || f.Message != "fault kill_worker of task.never attempt 1 never fired" {
		t.Errorf("never fired: %+v", f)
	}
}

func TestCheckFaultTargets(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, writeConfig(t, map[string]string{"main.wdc.hcl": `
pool "p" {
  provider = "local"
}
task "one" {
  command = ["true"]
}
task "shard" {
  count   = 2
  command = ["true"]
}
`}))
	cases := []struct {
		name  string
		fault wdchcl.TestFault
		want  string // in the detail; "" for no diagnostic
	}{
		{"task", wdchcl.TestFault{Kind: wdchcl.FaultKillWorker, Task: "task.one"}, ""},
		{"instance", wdchcl.TestFault{Kind: wdchcl.FaultKillWorker, Task: "task.shard[1]"}, ""},
		{"unknown_task", wdchcl.TestFault{Kind: wdchcl.FaultLateResult, Task: "task.zzz"}, "names task.zzz, which the configuration"},
		{"instance_past_count", wdchcl.TestFault{Kind: wdchcl.FaultKillWorker, Task: "task.shard[2]"}, "names task.shard[2]"},
		{"counted_without_index", wdchcl.TestFault{Kind: wdchcl.FaultSilenceWorker, Task: "task.shard"}, "name one of its instances, as task.shard[0]"},
		{"pool", wdchcl.TestFault{Kind: wdchcl.FaultFailLaunch, Pool: "p"}, ""},
		{"unknown_pool", wdchcl.TestFault{Kind: wdchcl.FaultFailLaunch, Pool: "q"}, `names pool "q"`},
		{"disk_full", wdchcl.TestFault{Kind: wdchcl.FaultDiskFull}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.fault
			diags := checkFaultTargets([]*wdchcl.TestFault{&f}, cfg)
			switch {
			case c.want == "" && len(diags) > 0:
				t.Errorf("diagnostics %v, want none", diags)
			case c.want != "" && (len(diags) != 1 || !strings.Contains(diags[0].Detail, c.want)):
				t.Errorf("diagnostics %v, want one saying %q", diags, c.want)
			}
		})
	}
}
