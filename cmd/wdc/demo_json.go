package main

import (
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/demo"
	"github.com/wdc-dev/wdc/internal/plural"
)

// demoFormatVersion is the format_version of the demo document
// (docs/json.md, "The demo document").
const demoFormatVersion = "1.0"

// demoDoc is what `wdc demo worker-leases --json` prints
// (docs/schema/demo-worker-leases.schema.json).
type demoDoc struct {
	FormatVersion string           `json:"format_version"`
	Demo          string           `json:"demo"`
	OK            bool             `json:"ok"`
	ClockStart    time.Time        `json:"clock_start"`
	Configuration string           `json:"configuration"`
	Plan          string           `json:"plan"`
	Pool          demoPoolJSON     `json:"pool"`
	Task          demoTaskJSON     `json:"task"`
	Workers       []demoWorkerJSON `json:"workers"`
	Steps         []demoStepJSON   `json:"steps"`
	Summary       demoSummaryJSON  `json:"summary"`
}

type demoPoolJSON struct {
	Name              string  `json:"name"`
	HeartbeatInterval float64 `json:"heartbeat_interval_seconds"`
	TTL               float64 `json:"ttl_seconds"`
}

type demoTaskJSON struct {
	Address string  `json:"address"`
	DefHash string  `json:"def_hash"`
	MaxLost int     `json:"max_lost"`
	Backoff float64 `json:"backoff_seconds"`
}

type demoWorkerJSON struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

type demoStepJSON struct {
	Number   int             `json:"number"`
	ID       string          `json:"id"`
	Title    string          `json:"title"`
	At       time.Time       `json:"at"`
	OK       bool            `json:"ok"`
	Happened []string        `json:"happened"`
	State    *demoStateJSON  `json:"state"`
	Checks   []demoCheckJSON `json:"checks"`
}

type demoStateJSON struct {
	Serial         int64                `json:"serial"`
	FencingCounter int64                `json:"fencing_counter"`
	Task           demoTaskStateJSON    `json:"task"`
	Leases         []demoLeaseJSON      `json:"leases"`
	Workers        []demoWorkerState    `json:"workers"`
	RetryDirective *demoRetryJSON       `json:"retry_directive"`
	Results        []demoResultJSON     `json:"results"`
	Events         []demoEventStateJSON `json:"events"`
}

type demoTaskStateJSON struct {
	Address   string `json:"address"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	LostUsed  int    `json:"lost_used"`
	LastError string `json:"last_error,omitempty"`
}

type demoLeaseJSON struct {
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

type demoWorkerState struct {
	Name            string    `json:"name"`
	ID              string    `json:"id"`
	Status          string    `json:"status"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	LeasesHeld      int       `json:"leases_held"`
}

type demoRetryJSON struct {
	NextAttempt int        `json:"next_attempt"`
	Kind        string     `json:"kind"`
	NotBefore   time.Time  `json:"not_before"`
	Reason      string     `json:"reason"`
	ConsumedAt  *time.Time `json:"consumed_at,omitempty"`
}

type demoResultJSON struct {
	FencingToken int64     `json:"fencing_token"`
	Attempt      int       `json:"attempt"`
	Worker       string    `json:"worker,omitempty"`
	Decision     string    `json:"decision"`
	Reason       string    `json:"reason,omitempty"`
	ReceivedAt   time.Time `json:"received_at"`
}

type demoEventStateJSON struct {
	Seq          int64     `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	Task         string    `json:"task,omitempty"`
	Worker       string    `json:"worker,omitempty"`
	WorkerID     string    `json:"worker_id,omitempty"`
	FencingToken int64     `json:"fencing_token,omitempty"`
	Message      string    `json:"message"`
}

type demoCheckJSON struct {
	ID        string `json:"id"`
	OK        bool   `json:"ok"`
	Invariant string `json:"invariant"`
	Observed  string `json:"observed"`
}

type demoSummaryJSON struct {
	Steps   int    `json:"steps"`
	Checks  int    `json:"checks"`
	Failed  int    `json:"failed"`
	Stopped string `json:"stopped,omitempty"`
	Text    string `json:"text"`
}

// newDemoDoc turns a report into the demo document.
func newDemoDoc(r *demo.Report) demoDoc {
	doc := demoDoc{
		FormatVersion: demoFormatVersion, Demo: "worker-leases", OK: r.OK(), ClockStart: r.Start.UTC(),
		Configuration: r.Config, Plan: r.Plan,
		Pool:    demoPoolJSON{Name: r.Pool.Name, HeartbeatInterval: r.Pool.HeartbeatInterval.Seconds(), TTL: r.Pool.TTL.Seconds()},
		Task:    demoTaskJSON{Address: r.Task.Address, DefHash: r.Task.DefHash, MaxLost: r.Task.MaxLost, Backoff: r.Task.Backoff.Seconds()},
		Workers: []demoWorkerJSON{},
		Steps:   []demoStepJSON{},
	}
	for _, w := range r.Workers {
		doc.Workers = append(doc.Workers, demoWorkerJSON{Name: w.Name, ID: w.ID})
	}
	for i, st := range r.Steps {
		js := demoStepJSON{Number: i + 1, ID: st.ID, Title: st.Title, At: st.At.UTC(), OK: true,
			Happened: append([]string{}, st.Happened...), Checks: []demoCheckJSON{}}
		if st.State != nil {
			state := newDemoState(*st.State)
			js.State = &state
		}
		for _, c := range st.Checks {
			js.Checks = append(js.Checks, demoCheckJSON{ID: c.ID, OK: c.OK, Invariant: c.Invariant, Observed: c.Observed})
			js.OK = js.OK && c.OK
		}
		doc.Steps = append(doc.Steps, js)
	}
	doc.Summary = demoSummaryJSON{Steps: len(r.Steps), Checks: r.CheckCount(), Failed: len(r.Failed()), Stopped: r.Stopped, Text: demoSummaryText(r)}
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

func newDemoState(v demo.View) demoStateJSON {
	s := demoStateJSON{
		Serial: v.Serial, FencingCounter: v.FencingCounter,
		Task:    demoTaskStateJSON{Address: v.Task.Address, Status: string(v.Task.Status), Attempts: v.Task.Attempts, LostUsed: v.Task.LostUsed, LastError: v.Task.LastError},
		Leases:  []demoLeaseJSON{},
		Workers: []demoWorkerState{},
		Results: []demoResultJSON{},
		Events:  []demoEventStateJSON{},
	}
	for _, l := range v.Leases {
		s.Leases = append(s.Leases, demoLeaseJSON{FencingToken: l.Token, Attempt: l.Attempt, Worker: l.Worker, WorkerID: l.WorkerID,
			Status: string(l.Status), GrantedAt: l.GrantedAt.UTC(), RenewedAt: l.RenewedAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
			HardExpiresAt: l.HardExpiresAt.UTC(), EndedAt: jsonTime(l.EndedAt)})
	}
	for _, w := range v.Workers {
		s.Workers = append(s.Workers, demoWorkerState{Name: w.Name, ID: w.ID, Status: string(w.Status), LastHeartbeatAt: w.LastHeartbeatAt.UTC(), LeasesHeld: w.LeasesHeld})
	}
	if d := v.Retry; d != nil {
		s.RetryDirective = &demoRetryJSON{NextAttempt: d.NextAttempt, Kind: string(d.Kind), NotBefore: d.NotBefore.UTC(), Reason: d.Reason, ConsumedAt: jsonTime(d.ConsumedAt)}
	}
	for _, r := range v.Results {
		s.Results = append(s.Results, demoResultJSON{FencingToken: r.Token, Attempt: r.Attempt, Worker: r.Worker, Decision: r.Decision,
			Reason: r.Reason, ReceivedAt: r.ReceivedAt.UTC()})
	}
	for _, e := range v.Events {
		s.Events = append(s.Events, demoEventStateJSON{Seq: e.Seq, At: e.At.UTC(), Kind: e.Kind, Task: e.Task, Worker: e.Worker,
			WorkerID: e.WorkerID, FencingToken: e.Token, Message: e.Message})
	}
	return s
}
