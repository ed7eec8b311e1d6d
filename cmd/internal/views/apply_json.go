package views

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
)

// ApplyJSON reports apply as NDJSON (docs/json.md,
// docs/schema/apply-event.schema.json): one object per line, each with a
// "type": "plan" (the plan document), "event" (one event), "summary".
type ApplyJSON struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewApplyJSON writes the lines to w.
func NewApplyJSON(w io.Writer) *ApplyJSON { return &ApplyJSON{enc: json.NewEncoder(w)} }

// eventDoc is one "event" line of apply --json.
type eventDoc struct {
	Type     string    `json:"type"`
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	Task     string    `json:"task,omitempty"`
	Pool     string    `json:"pool,omitempty"`
	WorkerID string    `json:"worker_id,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Token    int64     `json:"fencing_token,omitempty"`
	Launch   int       `json:"launch,omitempty"`
	Message  string    `json:"message,omitempty"`
	// StderrTail is the last lines of a failed attempt's stderr
	// (retried and failed events; format 1.1).
	StderrTail string `json:"stderr_tail,omitempty"`
}

// summaryLine is the last line of apply --json.
type summaryLine struct {
	Type        string  `json:"type"`
	OK          bool    `json:"ok"`
	Succeeded   int     `json:"succeeded"`
	Failed      int     `json:"failed"`
	Cancelled   int     `json:"cancelled"`
	Unfinished  int     `json:"unfinished"`
	Attempts    int     `json:"attempts"`
	Workers     int     `json:"workers"`
	Joined      int     `json:"joined,omitempty"`
	Interrupted bool    `json:"interrupted"`
	WallSeconds float64 `json:"wall_seconds"`
	Text        string  `json:"text"`
}

func (j *ApplyJSON) write(v any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.enc.Encode(v)
}

// Plan writes the "plan" line: the plan document.
func (j *ApplyJSON) Plan(doc *jsonplan.Plan, _ bool) error {
	return j.write(struct {
		Type string         `json:"type"`
		Plan *jsonplan.Plan `json:"plan"`
	}{"plan", doc})
}

// Start does nothing: NDJSON has no live progress.
func (j *ApplyJSON) Start() {}

// Close does nothing: NDJSON has no live progress.
func (j *ApplyJSON) Close() {}

// Event writes one "event" line; an error writing it is dropped (apply's
// streams remember it).
func (j *ApplyJSON) Event(e coordinator.Event) {
	_ = j.write(eventDoc{Type: "event", Kind: e.Kind, At: e.At.UTC(), Task: e.Task, Pool: e.Pool, WorkerID: e.WorkerID,
		Attempt: e.Attempt, Token: e.Token, Launch: e.Launch, Message: e.Message, StderrTail: e.StderrTail})
}

// Summary writes the "summary" line, the last.
func (j *ApplyJSON) Summary(res *apply.Result, nothingToDo bool) error {
	text := applySummary(res)
	if nothingToDo {
		text = nothingToDoText
	}
	return j.write(summaryLine{Type: "summary", OK: res.OK(), Succeeded: res.Succeeded, Failed: res.Failed, Cancelled: res.Cancelled,
		Unfinished: res.Unfinished, Attempts: res.Attempts, Workers: res.Workers, Joined: res.Joined, Interrupted: res.Interrupted,
		WallSeconds: res.Wall.Seconds(), Text: text})
}
