package wdctest

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/apply"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// FaultResult is what became of one fault block of a run.
type FaultResult struct {
	Fault *wdchcl.TestFault
	// Fired: the fault was injected (for fail_launch, into as many
	// launches as its count). A fault that never fired fails the run.
	Fired bool
	// Detail says what it did: "killed worker w-… (pid 1234)", "2 of 2
	// launches failed"; "" when it never fired.
	Detail string
}

// injector injects a run's faults into its apply (apply.Faults). Each
// fault fires once (fail_launch, for as many launches as its count).
type injector struct {
	now  func() time.Time
	kill func(pid int) error

	mu      sync.Mutex
	results []*FaultResult
	failed  map[*FaultResult]int // fail_launch: launches failed so far
	// silenced maps a worker to the end of its silence, on the run's clock.
	silenced map[string]time.Time
	// diskFull: disk_full fired.
	diskFull bool
}

var _ apply.Faults = (*injector)(nil)

func newInjector(faults []*wdchcl.TestFault, now func() time.Time) *injector {
	in := &injector{now: now, kill: killProcess, failed: map[*FaultResult]int{}, silenced: map[string]time.Time{}}
	for _, f := range faults {
		in.results = append(in.results, &FaultResult{Fault: f})
	}
	return in
}

// killProcess sends pid SIGKILL.
func killProcess(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("no process id (%d)", pid)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// attemptFault is the first unfired fault of kind for attempt of task.
func (in *injector) attemptFault(kind, task string, attempt int) *FaultResult {
	for _, r := range in.results {
		if !r.Fired && r.Fault.Kind == kind && r.Fault.Task == task && r.Fault.Attempt == attempt {
			return r
		}
	}
	return nil
}

// AttemptStarted fires kill_worker (the kill happens on a goroutine of its
// own: the coordinator's lock is held here) and silence_worker.
func (in *injector) AttemptStarted(task string, attempt int, workerID string, pid int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if r := in.attemptFault(wdchcl.FaultKillWorker, task, attempt); r != nil {
		r.Fired, r.Detail = true, fmt.Sprintf("killed worker %s (pid %d) as the attempt started", workerID, pid)
		go func() {
			if err := in.kill(pid); err != nil && !errors.Is(err, syscall.ESRCH) {
				in.mu.Lock()
				r.Detail = fmt.Sprintf("could not kill worker %s (pid %d): %v", workerID, pid, err)
				in.mu.Unlock()
			}
		}()
	}
	if r := in.attemptFault(wdchcl.FaultSilenceWorker, task, attempt); r != nil {
		until := in.now().Add(r.Fault.Duration)
		r.Fired, r.Detail = true, fmt.Sprintf("dropped the heartbeats of worker %s for %s from the attempt's start", workerID, r.Fault.Duration)
		in.silenced[workerID] = until
	}
}

// DropHeartbeat drops a silenced worker's heartbeats until its silence
// ends.
func (in *injector) DropHeartbeat(workerID string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	until, ok := in.silenced[workerID]
	if ok && !in.now().Before(until) {
		delete(in.silenced, workerID)
		return false
	}
	return ok
}

// RevokeBeforeResult fires late_result.
func (in *injector) RevokeBeforeResult(task string, attempt int) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	r := in.attemptFault(wdchcl.FaultLateResult, task, attempt)
	if r == nil {
		return false
	}
	r.Fired, r.Detail = true, "revoked the lease just before its result was judged"
	return true
}

// errLaunchFault is the error of a launch fail_launch failed.
var errLaunchFault = errors.New("the launch was failed by the test's fault fail_launch")

// FailLaunch fires fail_launch for the pool's next launches.
func (in *injector) FailLaunch(pool string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range in.results {
		if r.Fired || r.Fault.Kind != wdchcl.FaultFailLaunch || r.Fault.Pool != pool {
			continue
		}
		in.failed[r]++
		n := in.failed[r]
		r.Detail = fmt.Sprintf("%d of %d launches failed", n, r.Fault.Count)
		r.Fired = n >= r.Fault.Count
		return fmt.Errorf("%w (%d of %d)", errLaunchFault, n, r.Fault.Count)
	}
	return nil
}

// StateLocked makes the state's disk full for disk_full (the first one:
// a disk is full once).
func (in *injector) StateLocked(st *state.Store) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range in.results {
		if r.Fault.Kind != wdchcl.FaultDiskFull {
			continue
		}
		r := r
		st.FailWritesAfter(r.Fault.Writes, func() {
			in.mu.Lock()
			defer in.mu.Unlock()
			r.Fired, r.Detail = true, fmt.Sprintf("the state's disk was full after %d writes", r.Fault.Writes)
			in.diskFull = true
		})
		return
	}
}

// diskFullFired reports whether disk_full fired.
func (in *injector) diskFullFired() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.diskFull
}

// outcome is what became of each fault, in source order.
func (in *injector) outcome() []*FaultResult {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]*FaultResult, len(in.results))
	for i, r := range in.results {
		c := *r
		out[i] = &c
	}
	return out
}

// neverFired is the Failure of a fault that did not fire (or, for
// fail_launch, not into all of its launches).
func neverFired(r *FaultResult) *Failure {
	msg := fmt.Sprintf("fault %s never fired", r.Fault)
	if r.Detail != "" {
		msg = fmt.Sprintf("fault %s fired only partly: %s", r.Fault, r.Detail)
	}
	return &Failure{Range: r.Fault.DeclRange, Message: msg, Fault: true}
}

// checkFaultTargets reports the faults whose task or pool the run's
// configuration does not declare.
func checkFaultTargets(faults []*wdchcl.TestFault, cfg *wdchcl.Config) hcl.Diagnostics {
	tasks, pools := map[string]bool{}, map[string]bool{}
	for _, t := range cfg.Tasks {
		tasks[t.Address()] = true
	}
	for _, p := range cfg.Pools {
		pools[p.Name] = true
	}
	var diags hcl.Diagnostics
	for _, f := range faults {
		switch {
		case f.Kind == wdchcl.FaultDiskFull:
		case f.Kind == wdchcl.FaultFailLaunch && !pools[f.Pool]:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Fault of an unknown pool",
				Detail:  fmt.Sprintf("Fault %s names pool %q, which the configuration does not declare.", f.Kind, f.Pool),
				Subject: f.TargetRange.Ptr()})
		case f.Kind != wdchcl.FaultFailLaunch && !tasks[f.Task]:
			detail := fmt.Sprintf("Fault %s names %s, which the configuration (with the run's variables) does not have.", f.Kind, f.Task)
			if tasks[f.Task+"[0]"] {
				detail += fmt.Sprintf(" The task is counted: name one of its instances, as %s[0].", f.Task)
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Fault of an unknown task",
				Detail: detail, Subject: f.TargetRange.Ptr()})
		}
	}
	return diags
}
