package views

import (
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/demo"
	"github.com/wdc-dev/wdc/internal/plural"
)

// DemoFormatVersion is the format_version of the demo document
// (docs/json.md, "The demo document").
const DemoFormatVersion = "1.0"

// DemoDoc is what `wdc demo worker-leases --json` prints
// (docs/schema/demo-worker-leases.schema.json).
type DemoDoc struct {
	FormatVersion string       `json:"format_version"`
	Demo          string       `json:"demo"`
	OK            bool         `json:"ok"`
	ClockStart    time.Time    `json:"clock_start"`
	Configuration string       `json:"configuration"`
	Plan          string       `json:"plan"`
	Pool          DemoPool     `json:"pool"`
	Task          DemoTask     `json:"task"`
	Workers       []DemoWorker `json:"workers"`
	Steps         []DemoStep   `json:"steps"`
	Summary       DemoSummary  `json:"summary"`
}

// DemoPool is the story's pool and its heartbeat timings, in seconds.
type DemoPool struct {
	Name              string  `json:"name"`
	HeartbeatInterval float64 `json:"heartbeat_interval_seconds"`
	TTL               float64 `json:"ttl_seconds"`
}

// DemoTask is the story's task: its definition hash and lost budget.
type DemoTask struct {
	Address string  `json:"address"`
	DefHash string  `json:"def_hash"`
	MaxLost int     `json:"max_lost"`
	Backoff float64 `json:"backoff_seconds"`
}

// DemoWorker names one of the story's workers (A, B) by its id.
type DemoWorker struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// DemoStep is one step: what happened, the state it left, its checks.
type DemoStep struct {
	Number   int         `json:"number"`
	ID       string      `json:"id"`
	Title    string      `json:"title"`
	At       time.Time   `json:"at"`
	OK       bool        `json:"ok"`
	Happened []string    `json:"happened"`
	State    *DemoState  `json:"state"`
	Checks   []DemoCheck `json:"checks"`
}

// DemoState is the part of the state a step shows.
type DemoState struct {
	Serial         int64             `json:"serial"`
	FencingCounter int64             `json:"fencing_counter"`
	Task           DemoTaskState     `json:"task"`
	Leases         []DemoLease       `json:"leases"`
	Workers        []DemoWorkerState `json:"workers"`
	RetryDirective *DemoRetry        `json:"retry_directive"`
	Results        []DemoResult      `json:"results"`
	Events         []DemoEvent       `json:"events"`
}

// DemoTaskState is the task's row of the state.
type DemoTaskState struct {
	Address   string `json:"address"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	LostUsed  int    `json:"lost_used"`
	LastError string `json:"last_error,omitempty"`
}

// DemoLease is one lease of the task.
type DemoLease struct {
	FencingToken  int64      `json:"fencing_token"`
	Attempt       int        `json:"attempt"`
	Worker        string     `json:"worker,omitempty"`
	WorkerID      string     `json:"worker_id"`
	Status        string     `json:"status"`
	GrantedAt     time.Time  `json:"granted_at"`
	RenewedAt     time.Time  `json:"renewed_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	HardExpiresAt time.Time  `json:"hard_expires_at"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
}

// DemoWorkerState is one worker as the registry records it.
type DemoWorkerState struct {
	Name            string    `json:"name"`
	ID              string    `json:"id"`
	Status          string    `json:"status"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	LeasesHeld      int       `json:"leases_held"`
}

// DemoRetry is the task's retry directive.
type DemoRetry struct {
	NextAttempt int        `json:"next_attempt"`
	Kind        string     `json:"kind"`
	NotBefore   time.Time  `json:"not_before"`
	Reason      string     `json:"reason"`
	ConsumedAt  *time.Time `json:"consumed_at,omitempty"`
}

// DemoResult is one posted result and the coordinator's decision.
type DemoResult struct {
	FencingToken int64     `json:"fencing_token"`
	Attempt      int       `json:"attempt"`
	Worker       string    `json:"worker,omitempty"`
	Decision     string    `json:"decision"`
	Reason       string    `json:"reason,omitempty"`
	ReceivedAt   time.Time `json:"received_at"`
}

// DemoEvent is one event the step appended to the log.
type DemoEvent struct {
	Seq          int64     `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	Task         string    `json:"task,omitempty"`
	Worker       string    `json:"worker,omitempty"`
	WorkerID     string    `json:"worker_id,omitempty"`
	FencingToken int64     `json:"fencing_token,omitempty"`
	Message      string    `json:"message"`
}

// DemoCheck is one invariant a step checks, and what it observed.
type DemoCheck struct {
	ID        string `json:"id"`
	OK        bool   `json:"ok"`
	Invariant string `json:"invariant"`
	Observed  string `json:"observed"`
}

// DemoSummary counts the steps and checks; Text is the verdict line.
type DemoSummary struct {
	Steps   int    `json:"steps"`
	Checks  int    `json:"checks"`
	Failed  int    `json:"failed"`
	Stopped string `json:"stopped,omitempty"`
	Text    string `json:"text"`
}

// NewDemoDoc turns a report into the demo document.
func NewDemoDoc(r *demo.Report) DemoDoc {
	doc := DemoDoc{
		FormatVersion: DemoFormatVersion, Demo: "worker-leases", OK: r.OK(), ClockStart: r.Start.UTC(),
		Configuration: r.Config, Plan: r.Plan,
		Pool:    DemoPool{Name: r.Pool.Name, HeartbeatInterval: r.Pool.HeartbeatInterval.Seconds(), TTL: r.Pool.TTL.Seconds()},
		Task:    DemoTask{Address: r.Task.Address, DefHash: r.Task.DefHash, MaxLost: r.Task.MaxLost, Backoff: r.Task.Backoff.Seconds()},
		Workers: []DemoWorker{},
		Steps:   []DemoStep{},
	}
	for _, w := range r.Workers {
		doc.Workers = append(doc.Workers, DemoWorker{Name: w.Name, ID: w.ID})
	}
	for i, st := range r.Steps {
		js := DemoStep{Number: i + 1, ID: st.ID, Title: st.Title, At: st.At.UTC(), OK: true,
			Happened: append([]string{}, st.Happened...), Checks: []DemoCheck{}}
		if st.State != nil {
			state := newDemoState(*st.State)
			js.State = &state
		}
		for _, c := range st.Checks {
			js.Checks = append(js.Checks, DemoCheck{ID: c.ID, OK: c.OK, Invariant: c.Invariant, Observed: c.Observed})
			js.OK = js.OK && c.OK
		}
		doc.Steps = append(doc.Steps, js)
	}
	doc.Summary = DemoSummary{Steps: len(r.Steps), Checks: r.CheckCount(), Failed: len(r.Failed()), Stopped: r.Stopped, Text: demoSummaryText(r)}
	return doc
}

// demoSummaryText is the verdict line that ends the text output: "Every
// invariant held: 34 checks in 9 steps." or "2 of 34 checks did not hold."
func demoSummaryText(r *demo.Report) string {
	if r.OK() {
		return fmt.Sprintf("Every invariant held: %s in %s.", plural.Count(r.CheckCount(), "check", "checks"), plural.Count(len(r.Steps), "step", "steps"))
	}
	return fmt.Sprintf("%d of %s did not hold.", len(r.Failed()), plural.Count(r.CheckCount(), "check", "checks"))
}

func newDemoState(v demo.View) DemoState {
	s := DemoState{
		Serial: v.Serial, FencingCounter: v.FencingCounter,
		Task:    DemoTaskState{Address: v.Task.Address, Status: string(v.Task.Status), Attempts: v.Task.Attempts, LostUsed: v.Task.LostUsed, LastError: v.Task.LastError},
		Leases:  []DemoLease{},
		Workers: []DemoWorkerState{},
		Results: []DemoResult{},
		Events:  []DemoEvent{},
	}
	for _, l := range v.Leases {
		s.Leases = append(s.Leases, DemoLease{FencingToken: l.Token, Attempt: l.Attempt, Worker: l.Worker, WorkerID: l.WorkerID,
			Status: string(l.Status), GrantedAt: l.GrantedAt.UTC(), RenewedAt: l.RenewedAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
			HardExpiresAt: l.HardExpiresAt.UTC(), EndedAt: JSONTime(l.EndedAt)})
	}
	for _, w := range v.Workers {
		s.Workers = append(s.Workers, DemoWorkerState{Name: w.Name, ID: w.ID, Status: string(w.Status), LastHeartbeatAt: w.LastHeartbeatAt.UTC(), LeasesHeld: w.LeasesHeld})
	}
	if d := v.Retry; d != nil {
		s.RetryDirective = &DemoRetry{NextAttempt: d.NextAttempt, Kind: string(d.Kind), NotBefore: d.NotBefore.UTC(), Reason: d.Reason, ConsumedAt: JSONTime(d.ConsumedAt)}
	}
	for _, r := range v.Results {
		s.Results = append(s.Results, DemoResult{FencingToken: r.Token, Attempt: r.Attempt, Worker: r.Worker, Decision: r.Decision,
			Reason: r.Reason, ReceivedAt: r.ReceivedAt.UTC()})
	}
	for _, e := range v.Events {
		s.Events = append(s.Events, DemoEvent{Seq: e.Seq, At: e.At.UTC(), Kind: e.Kind, Task: e.Task, Worker: e.Worker,
			WorkerID: e.WorkerID, FencingToken: e.Token, Message: e.Message})
	}
	return s
}
