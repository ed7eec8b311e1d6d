package demo

import (
	"time"

	"github.com/wdc-dev/wdc/state"
)

// Step ids of WorkerLeases, in the order the story runs them. They are
// stable: `wdc demo worker-leases --json` prints them as steps[].id.
const (
	StepRegister    = "register"     // two workers register
	StepAssign      = "assign"       // worker A is granted the task: attempt 1, token 1
	StepRenew       = "renew"        // worker A's heartbeat renews its lease
	StepSilence     = "silence"      // worker A goes silent past its lease's expiry
	StepSweep       = "sweep"        // the sweep expires the lease and marks worker A stale
	StepReassign    = "reassign"     // worker B is granted attempt 2 with a higher token
	StepStaleResult = "stale_result" // worker A's late result is rejected as stale_token
	StepResult      = "result"       // worker B's result is accepted and completes the lease
	StepReturn      = "return"       // worker A heartbeats again and is active
)

// Report is what WorkerLeases did: the setting, then each step with the
// state it produced and the checks made on that state.
type Report struct {
	// Start is the fake clock's start; every time of the report is on
	// that clock.
	Start time.Time
	// Config is the configuration the story planned (main.wdc.hcl), and
	// Plan the plan's summary line ("Plan: 2 workers to launch, 1 task to
	// run.").
	Config, Plan string
	// Pool and Task are what the configuration declares.
	Pool PoolInfo
	Task TaskInfo
	// Workers are the story's two workers, A then B.
	Workers []WorkerInfo
	// Steps ran in this order; a story that stopped early has fewer than
	// nine.
	Steps []Step
	// Stopped says why the story stopped before its last step: an answer
	// it could not go on from (its step has a failed check saying so). ""
	// when it ran to its end.
	Stopped string
}

// PoolInfo is the story's pool as the configuration declares it.
type PoolInfo struct {
	Name                   string
	HeartbeatInterval, TTL time.Duration
}

// TaskInfo is the story's task as the configuration declares it.
type TaskInfo struct {
	Address string
	DefHash string // its definition hash, 64 hex digits
	MaxLost int    // retry.max_lost
	// Backoff is the delay before the first retry (retry.backoff).
	Backoff time.Duration
}

// WorkerInfo names one of the story's workers: Name is "A" or "B", ID the
// id the coordinator gave it at registration ("w-" and 12 hex digits,
// random).
type WorkerInfo struct {
	Name, ID string
}

// Step is one step of the story.
type Step struct {
	ID    string // one of the Step* constants
	Title string // a sentence for people, e.g. "Worker A goes silent"
	// At is the fake clock when the step ended and its state was read.
	At time.Time
	// Happened says, in order, what the workers did and what the
	// coordinator answered (times as offsets from Report.Start, "t+4s";
	// workers by name).
	Happened []string
	// State is what the state store recorded after the step; nil only
	// when the story stopped at this step and the state could not be read.
	State *View
	// Checks are the invariants the step shows, judged on State.
	Checks []Check
}

// Check is one invariant judged after a step.
type Check struct {
	ID string // stable within its step, e.g. "token_increases"
	// Invariant says what must hold; Observed what the state (or the
	// coordinator's answer) showed.
	Invariant, Observed string
	OK                  bool
}

// View is the state of the story's task and workers as the state store
// records it after a step.
type View struct {
	// Serial is the state's serial: it moves with every write.
	Serial int64
	// FencingCounter is the last fencing token granted (0 before the
	// first).
	FencingCounter int64
	Task           TaskView
	// Leases are every lease of the task, by fencing token.
	Leases []LeaseView
	// Workers are the story's workers, A then B (those registered so far).
	Workers []WorkerView
	// Retry is the task's latest retry directive; nil when it has none.
	Retry *RetryView
	// Results are the results posted for the task, in the order received.
	Results []ResultView
	// Events are the events the step appended to the state's event log.
	Events []EventView
}

// TaskView is the story's task in the state.
type TaskView struct {
	Address  string
	Status   state.TaskStatus
	Attempts int // leases ever granted; the last attempt's number
	LostUsed int // attempts lost, of retry.max_lost
	// LastError is why the last attempt did not succeed ("" when none).
	LastError string
}

// LeaseView is one lease in the state.
type LeaseView struct {
	Token   int64
	Attempt int
	// Worker is the holder's name in the story ("A" or "B"), WorkerID its
	// id.
	Worker, WorkerID string
	Status           state.LeaseStatus
	// GrantedAt, RenewedAt, ExpiresAt (min(RenewedAt + ttl,
	// HardExpiresAt)), HardExpiresAt (GrantedAt + timeout + lease grace)
	// and EndedAt (zero while active).
	GrantedAt, RenewedAt, ExpiresAt, HardExpiresAt, EndedAt time.Time
}

// WorkerView is one of the story's workers in the state.
type WorkerView struct {
	Name, ID        string
	Status          state.WorkerStatus
	LastHeartbeatAt time.Time
	LeasesHeld      int // active leases
}

// RetryView is a retry directive in the state.
type RetryView struct {
	NextAttempt int
	Kind        state.FailureClass // failure or lost
	NotBefore   time.Time
	Reason      string
	// ConsumedAt is when a grant used it (zero while open).
	ConsumedAt time.Time
}

// ResultView is a posted result as the state recorded it.
type ResultView struct {
	Token    int64
	Attempt  int
	Worker   string // the poster's name in the story
	Decision string // accepted or rejected
	Reason   string // the rejection's reason, "" when accepted
	// ReceivedAt is when the coordinator decided it.
	ReceivedAt time.Time
}

// EventView is an entry of the state's event log.
type EventView struct {
	Seq  int64
	At   time.Time
	Kind string
	Task string // "" when none
	// Worker is the worker's name in the story, WorkerID its id ("" when
	// the event names none).
	Worker, WorkerID string
	Token            int64 // 0 when none
	Message          string
}

// OK reports whether the story ran to its end and every check held:
// `wdc demo worker-leases` exits 0 exactly then.
func (r *Report) OK() bool {
	return r.Stopped == "" && len(r.Failed()) == 0
}

// CheckCount is the number of checks made.
func (r *Report) CheckCount() int {
	n := 0
	for _, s := range r.Steps {
		n += len(s.Checks)
	}
	return n
}

// FailedCheck is a check that did not hold, with the step it belongs to.
type FailedCheck struct {
	Step   int // 1-based position in Report.Steps
	StepID string
	Check  Check
}

// Failed returns the checks that did not hold, in step order.
func (r *Report) Failed() []FailedCheck {
	var out []FailedCheck
	for i, s := range r.Steps {
		for _, c := range s.Checks {
			if !c.OK {
				out = append(out, FailedCheck{Step: i + 1, StepID: s.ID, Check: c})
			}
		}
	}
	return out
}

// lease returns the lease with token, or nil.
func (v View) lease(token int64) *LeaseView {
	for i := range v.Leases {
		if v.Leases[i].Token == token {
			return &v.Leases[i]
		}
	}
	return nil
}

// active returns the active leases.
func (v View) active() []LeaseView {
	var out []LeaseView
	for _, l := range v.Leases {
		if l.Status == state.LeaseActive {
			out = append(out, l)
		}
	}
	return out
}

// worker returns the worker named name, or a zero WorkerView with that
// name and no status when it is not in the view.
func (v View) worker(name string) WorkerView {
	for _, w := range v.Workers {
		if w.Name == name {
			return w
		}
	}
	return WorkerView{Name: name, Status: "missing"}
}

// result returns the latest result posted for token, or nil.
func (v View) result(token int64) *ResultView {
	for i := len(v.Results) - 1; i >= 0; i-- {
		if v.Results[i].Token == token {
			return &v.Results[i]
		}
	}
	return nil
}
