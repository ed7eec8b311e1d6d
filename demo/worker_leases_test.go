package demo

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// runStory runs WorkerLeases in a temporary folder of the test and fails
// the test on an error.
func runStory(t *testing.T, opts Options) *Report {
	t.Helper()
	r, err := WorkerLeases(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWorkerLeasesTellsTheStory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the story's temporary folder goes
	r := runStory(t, Options{Version: "test"})
	if !r.OK() {
		t.Fatalf("the story failed: stopped %q, failed checks %+v", r.Stopped, r.Failed())
	}
	var ids []string
	for _, s := range r.Steps {
		ids = append(ids, s.ID)
	}
	want := []string{StepRegister, StepAssign, StepRenew, StepSilence, StepSweep, StepReassign, StepStaleResult, StepResult, StepReturn}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if r.CheckCount() < 2*len(want) {
		t.Errorf("%d checks for %d steps: want at least two a step", r.CheckCount(), len(want))
	}
	step := func(id string) Step {
		for _, s := range r.Steps {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("no step %s", id)
		return Step{}
	}
	start := DefaultStart
	if !r.Start.Equal(start) {
		t.Errorf("start %s, want %s", r.Start, start)
	}
	// The facts the issue names, read from the states the steps recorded.
	assign := step(StepAssign).State
	if l := assign.lease(1); l == nil || l.Attempt != 1 || l.Worker != "A" || l.Status != state.LeaseActive {
		t.Errorf("after assign, lease 1 = %+v: want attempt 1 of worker A, active", l)
	}
	renew := step(StepRenew).State
	if l := renew.lease(1); l == nil || !l.ExpiresAt.Equal(start.Add(14*time.Second)) {
		t.Errorf("after renew, lease 1 = %+v: want it to expire at t+14s", l)
	}
	sweep := step(StepSweep).State
	if l := sweep.lease(1); l == nil || l.Status != state.LeaseExpired {
		t.Errorf("after the sweep, lease 1 = %+v: want expired", l)
	}
	if w := sweep.worker("A"); w.Status != state.WorkerStale {
		t.Errorf("after the sweep, worker A is %s, want stale", w.Status)
	}
	re := step(StepReassign).State
	if l := re.lease(2); l == nil || l.Attempt != 2 || l.Worker != "B" || l.Status != state.LeaseActive {
		t.Errorf("after reassign, lease 2 = %+v: want attempt 2 of worker B, active", l)
	}
	stale := step(StepStaleResult).State
	if res := stale.result(1); res == nil || res.Decision != protocol.DecisionRejected || res.Reason != protocol.ReasonStaleToken {
		t.Errorf("after the stale result, the result of lease 1 = %+v: want rejected stale_token", res)
	}
	done := step(StepResult).State
	if l := done.lease(2); l == nil || l.Status != state.LeaseCompleted || done.Task.Status != state.TaskSucceeded {
		t.Errorf("after the result, lease 2 = %+v and the task is %s: want completed and succeeded", l, done.Task.Status)
	}
	back := step(StepReturn).State
	if w := back.worker("A"); w.Status != state.WorkerActive {
		t.Errorf("at the end worker A is %s, want active", w.Status)
	}
	if len(r.Workers) != 2 || r.Workers[0].Name != "A" || r.Workers[1].Name != "B" || r.Workers[0].ID == r.Workers[1].ID {
		t.Errorf("workers %+v: want A and B with their own ids", r.Workers)
	}
	// The temporary folder is gone.
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the story left %v in the temporary folder", left)
	}
}

// TestWorkerLeasesIsDeterministic: two runs tell the same story, apart
// from the workers' random ids (and the host and pid the registration
// events carry, the same within one process).
func TestWorkerLeasesIsDeterministic(t *testing.T) {
	normalized := func(r *Report) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, w := range r.Workers {
			s = strings.ReplaceAll(s, w.ID, "<worker "+w.Name+">")
		}
		return s
	}
	first := normalized(runStory(t, Options{Version: "test"}))
	second := normalized(runStory(t, Options{Version: "test"}))
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
}

func TestWorkerLeasesStartsWhereTold(t *testing.T) {
	start := time.Date(2030, 6, 15, 8, 30, 0, 0, time.UTC)
	r := runStory(t, Options{Start: start})
	if !r.OK() || !r.Start.Equal(start) {
		t.Fatalf("ok %v, start %s: want a story that holds from %s", r.OK(), r.Start, start)
	}
	if last := r.Steps[len(r.Steps)-1]; !last.At.Equal(start.Add(20 * time.Second)) {
		t.Errorf("the last step ends at %s, want t+20s", last.At)
	}
}

func TestWorkerLeasesKeepsItsFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kept")
	r := runStory(t, Options{Dir: dir})
	if !r.OK() {
		t.Fatalf("the story failed: %+v", r.Failed())
	}
	for _, f := range []string{ConfigFile, StateFile} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			t.Errorf("the kept folder lacks %s: %v", f, err)
		}
	}
	st, err := state.OpenReadOnly(context.Background(), filepath.Join(dir, filepath.FromSlash(StateFile)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task, err := st.Task(context.Background(), r.Task.Address)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != state.TaskSucceeded || task.Attempts != 2 {
		t.Errorf("the kept state has %s %s after %d attempts, want succeeded after 2", task.Address, task.Status, task.Attempts)
	}
	// It ended as an apply ends: its workers are gone, its launches closed.
	snap, err := st.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range snap.Workers {
		if w.Status != state.WorkerGone {
			t.Errorf("worker %s is %s in the kept state, want gone", w.ID, w.Status)
		}
	}
	if open, err := st.OpenLaunches(context.Background(), ""); err != nil || len(open) != 0 {
		t.Errorf("open launches in the kept state: %v (%v), want none", open, err)
	}

	// A folder that is not empty is refused and left alone.
	_, err = WorkerLeases(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("a second story in %s: %v, want it refused as not empty", dir, err)
	}
	again, err := state.OpenReadOnly(context.Background(), filepath.Join(dir, filepath.FromSlash(StateFile)))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if leases, err := again.Leases(context.Background(), ""); err != nil || len(leases) != 2 {
		t.Errorf("the kept state has %d leases (%v) after the refusal, want its 2", len(leases), err)
	}
}

// TestChecksCatchBrokenStates hands each step's checks the state a real
// story recorded, broken in one way, and expects the check that guards
// against it to fail (and the unbroken state to pass).
func TestChecksCatchBrokenStates(t *testing.T) {
	r := runStory(t, Options{})
	if !r.OK() {
		t.Fatalf("the story failed: %+v", r.Failed())
	}
	j := judge{start: r.Start, task: r.Task.Address, ttl: r.Pool.TTL, backoff: r.Task.Backoff, maxLost: r.Task.MaxLost}
	views := map[string]View{}
	var order []string
	for _, s := range r.Steps {
		views[s.ID] = *s.State
		order = append(order, s.ID)
	}
	before := func(id string) View {
		for i, o := range order {
			if o == id && i > 0 {
				return clone(t, views[order[i-1]])
			}
		}
		return View{}
	}
	after := func(id string) View { return clone(t, views[id]) }
	at := func(id string) time.Time {
		for _, s := range r.Steps {
			if s.ID == id {
				return s.At
			}
		}
		return time.Time{}
	}
	asg := func(v View, token int64) protocol.Assignment {
		l := v.lease(token)
		if l == nil {
			t.Fatalf("no lease %d", token)
		}
		return protocol.Assignment{Task: r.Task.Address, Attempt: l.Attempt, FencingToken: l.Token, ExpiresAt: l.ExpiresAt}
	}
	rejected := protocol.ResultResponse{Decision: protocol.DecisionRejected, Reason: protocol.ReasonStaleToken}
	accepted := protocol.ResultResponse{Decision: protocol.DecisionAccepted}

	cases := []struct {
		name  string
		check string // the ID of the check that must fail
		run   func() []Check
	}{
		{"a worker is not active after registering", "workers_active", func() []Check {
			v := after(StepRegister)
			v.Workers[1].Status = state.WorkerStale
			return j.registerChecks(v)
		}},
		{"a second active lease for the task", "one_active", func() []Check {
			v := after(StepAssign)
			extra := v.Leases[0]
			extra.Token, extra.Worker = 2, "B"
			v.Leases = append(v.Leases, extra)
			return j.assignChecks(v, asg(v, 1), 0)
		}},
		{"worker B's claim was granted the task too", "one_active", func() []Check {
			v := after(StepAssign)
			return j.assignChecks(v, asg(v, 1), 1)
		}},
		{"the first token is not 1", "first_lease", func() []Check {
			v := after(StepAssign)
			v.Leases[0].Token, v.FencingCounter = 7, 7
			return j.assignChecks(v, asg(v, 7), 0)
		}},
		{"an expiry beyond renewed_at + ttl", "expiry", func() []Check {
			v := after(StepAssign)
			v.Leases[0].ExpiresAt = v.Leases[0].ExpiresAt.Add(time.Second)
			return j.assignChecks(v, asg(v, 1), 0)
		}},
		{"a heartbeat that renewed nothing", "renewed", func() []Check {
			v := after(StepRenew)
			v.Leases[0].ExpiresAt, v.Leases[0].RenewedAt = before(StepRenew).Leases[0].ExpiresAt, before(StepRenew).Leases[0].RenewedAt
			return j.renewChecks(before(StepRenew), v, 1, 0, at(StepRenew))
		}},
		{"a renewal that changed the holder", "same_lease", func() []Check {
			v := after(StepRenew)
			v.Leases[0].WorkerID = "w-someone"
			return j.renewChecks(before(StepRenew), v, 1, 1, at(StepRenew))
		}},
		{"a lease ended before any sweep", "until_sweep", func() []Check {
			v := after(StepSilence)
			v.Leases[0].Status = state.LeaseExpired
			return j.silenceChecks(before(StepSilence), v, 1, at(StepSilence))
		}},
		{"worker B went stale too", "worker_stale", func() []Check {
			v := after(StepSweep)
			v.Workers[1].Status = state.WorkerStale
			return j.sweepChecks(before(StepSweep), v, 1, at(StepSweep))
		}},
		{"the sweep marked the task succeeded", "not_done", func() []Check {
			v := after(StepSweep)
			v.Task.Status = state.TaskSucceeded
			return j.sweepChecks(before(StepSweep), v, 1, at(StepSweep))
		}},
		{"no retry directive after the loss", "retry", func() []Check {
			v := after(StepSweep)
			v.Retry = nil
			return j.sweepChecks(before(StepSweep), v, 1, at(StepSweep))
		}},
		{"an expired lease still active", "lease_expired", func() []Check {
			v := after(StepSweep)
			v.Leases[0].Status, v.Leases[0].EndedAt = state.LeaseActive, time.Time{}
			return j.sweepChecks(before(StepSweep), v, 1, at(StepSweep))
		}},
		{"a token that does not increase", "token_increases", func() []Check {
			prev := before(StepReassign)
			prev.FencingCounter = 2
			return j.reassignChecks(prev, after(StepReassign), asg(after(StepReassign), 2), 1, at(StepReassign))
		}},
		{"a retry with the same attempt number", "attempt_increments", func() []Check {
			v := after(StepReassign)
			v.Leases[1].Attempt = 1
			return j.reassignChecks(before(StepReassign), v, asg(v, 2), 1, at(StepReassign))
		}},
		{"the retry went to the stale worker", "live_holder", func() []Check {
			v := after(StepReassign)
			v.Leases[1].Worker = "A"
			return j.reassignChecks(before(StepReassign), v, asg(v, 2), 1, at(StepReassign))
		}},
		{"the old lease came back to life", "one_active", func() []Check {
			v := after(StepReassign)
			v.Leases[0].Status = state.LeaseActive
			return j.reassignChecks(before(StepReassign), v, asg(v, 2), 1, at(StepReassign))
		}},
		{"the late result was accepted", "rejected_stale", func() []Check {
			return j.staleResultChecks(before(StepStaleResult), after(StepStaleResult), accepted, 1)
		}},
		{"the late result was rejected for another reason", "rejected_stale", func() []Check {
			return j.staleResultChecks(before(StepStaleResult), after(StepStaleResult),
				protocol.ResultResponse{Decision: protocol.DecisionRejected, Reason: protocol.ReasonLeaseExpired}, 1)
		}},
		{"the rejected result changed the task", "task_unchanged", func() []Check {
			v := after(StepStaleResult)
			v.Task.Status = state.TaskSucceeded
			return j.staleResultChecks(before(StepStaleResult), v, rejected, 1)
		}},
		{"the rejected result changed a lease", "leases_unchanged", func() []Check {
			v := after(StepStaleResult)
			v.Leases[1].Status = state.LeaseCompleted
			return j.staleResultChecks(before(StepStaleResult), v, rejected, 1)
		}},
		{"the rejection was not recorded", "recorded", func() []Check {
			v := after(StepStaleResult)
			v.Results = nil
			return j.staleResultChecks(before(StepStaleResult), v, rejected, 1)
		}},
		{"the holder's result was rejected", "accepted", func() []Check {
			return j.resultChecks(after(StepResult), rejected, 2, at(StepResult))
		}},
		{"the accepted result left its lease active", "lease_completed", func() []Check {
			v := after(StepResult)
			v.Leases[1].Status, v.Leases[1].EndedAt = state.LeaseActive, time.Time{}
			return j.resultChecks(v, accepted, 2, at(StepResult))
		}},
		{"the task is not done after an accepted result", "task_succeeded", func() []Check {
			v := after(StepResult)
			v.Task.Status = state.TaskRunning
			return j.resultChecks(v, accepted, 2, at(StepResult))
		}},
		{"the worker stays stale after its heartbeat", "active_again", func() []Check {
			v := after(StepReturn)
			v.Workers[0].Status = state.WorkerStale
			return j.returnChecks(before(StepReturn), v, protocol.HeartbeatResponse{}, at(StepReturn))
		}},
		{"coming back revived the old lease", "history_unchanged", func() []Check {
			v := after(StepReturn)
			v.Leases[0].Status = state.LeaseActive
			return j.returnChecks(before(StepReturn), v, protocol.HeartbeatResponse{}, at(StepReturn))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var found bool
			for _, got := range c.run() {
				if got.ID == c.check {
					found = true
					if got.OK {
						t.Errorf("check %s holds on a broken state: %s: %s", got.ID, got.Invariant, got.Observed)
					}
				}
			}
			if !found {
				t.Errorf("no check %s", c.check)
			}
		})
	}
}

// clone deep-copies a view, so a case can break it without touching the
// others.
func clone(t *testing.T, v View) View {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out View
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReportOK(t *testing.T) {
	r := &Report{Steps: []Step{{ID: StepRegister, Checks: []Check{{ID: "a", OK: true}, {ID: "b", OK: true}}}}}
	if !r.OK() || r.CheckCount() != 2 || len(r.Failed()) != 0 {
		t.Fatalf("a report whose checks hold: OK %v, %d checks, %d failed", r.OK(), r.CheckCount(), len(r.Failed()))
	}
	r.Steps[0].Checks[1].OK = false
	if f := r.Failed(); r.OK() || len(f) != 1 || f[0].Step != 1 || f[0].StepID != StepRegister || f[0].Check.ID != "b" {
		t.Errorf("a report with a failed check: OK %v, failed %+v", r.OK(), f)
	}
	r.Steps[0].Checks[1].OK = true
	r.Stopped = "step 1 could not go on"
	if r.OK() {
		t.Error("a story that stopped is OK")
	}
}

func TestRelativeTimes(t *testing.T) {
	j := judge{start: DefaultStart}
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{DefaultStart, "t+0s"},
		{DefaultStart.Add(14 * time.Second), "t+14s"},
		{DefaultStart.Add(-time.Second), "t-1s"},
		{time.Time{}, "-"},
	} {
		if got := j.rel(c.t); got != c.want {
			t.Errorf("rel(%s) = %q, want %q", c.t, got, c.want)
		}
	}
}
