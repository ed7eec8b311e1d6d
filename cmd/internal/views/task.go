package views

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TaskJSON is one task in `wdc tasks list --json`, in the state document
// of `wdc show --json`, and the head of `wdc tasks show --json`.
type TaskJSON struct {
	Address   string     `json:"address"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	DefHash   string     `json:"def_hash"`
	LastError string     `json:"last_error,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	Finished  *time.Time `json:"finished_at,omitempty"`
}

// NewTaskJSON is the JSON of a task the state recorded.
func NewTaskJSON(t state.Task) TaskJSON {
	return TaskJSON{Address: t.Address, Status: string(t.Status), Attempts: t.Attempts, DefHash: t.DefHash,
		LastError: t.LastError, UpdatedAt: JSONTime(t.UpdatedAt), Finished: JSONTime(t.FinishedAt)}
}

// ArtifactJSON is one log or output an attempt's accepted result bound
// (`wdc tasks show --json`, `wdc artifacts list --json`).
type ArtifactJSON struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type,omitempty"`
}

// NewArtifactsJSON is the JSON of artifacts the state recorded: [] when
// there are none.
func NewArtifactsJSON(as []state.Artifact) []ArtifactJSON {
	out := make([]ArtifactJSON, 0, len(as))
	for _, a := range as {
		out = append(out, ArtifactJSON{Kind: a.Kind, Name: a.Name, SHA256: a.SHA256, Size: a.Size, MediaType: a.MediaType})
	}
	return out
}

// AttemptJSON is one attempt of `wdc tasks show --json`.
type AttemptJSON struct {
	Number       int        `json:"number"`
	WorkerID     string     `json:"worker_id"`
	FencingToken int64      `json:"fencing_token"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	ExitCode     *int       `json:"exit_code,omitempty"`
	Signal       string     `json:"signal,omitempty"`
	FailureClass string     `json:"failure_class,omitempty"`
	Error        string     `json:"error,omitempty"`
	// StdoutPath and StderrPath are set only for attempts recorded by an
	// earlier version, whose agents reported log paths.
	StdoutPath string         `json:"stdout_path,omitempty"`
	StderrPath string         `json:"stderr_path,omitempty"`
	Artifacts  []ArtifactJSON `json:"artifacts"`
	// StderrTail is the last lines of a failed attempt's stderr, redacted.
	StderrTail string `json:"stderr_tail,omitempty"`
}

// RejectedJSON is a result the coordinator refused, with the artifacts it
// named.
type RejectedJSON struct {
	ReceivedAt   time.Time      `json:"received_at"`
	WorkerID     string         `json:"worker_id"`
	FencingToken int64          `json:"fencing_token"`
	Attempt      int            `json:"attempt,omitempty"`
	Reason       string         `json:"reason"`
	Artifacts    []ArtifactJSON `json:"artifacts"`
}

// rejectedResults lists a task's rejected results with the artifacts they
// named (from the body as posted).
func rejectedResults(rs []state.Result) []RejectedJSON {
	out := []RejectedJSON{}
	for _, r := range rs {
		if r.Decision != state.DecisionRejected {
			continue
		}
		rj := RejectedJSON{ReceivedAt: r.ReceivedAt, WorkerID: r.WorkerID, FencingToken: r.Token, Attempt: r.Attempt, Reason: r.Reason,
			Artifacts: []ArtifactJSON{}}
		var body protocol.ResultRequest
		if json.Unmarshal(r.Body, &body) == nil {
			for _, a := range body.Artifacts {
				rj.Artifacts = append(rj.Artifacts, ArtifactJSON{Kind: a.Kind, Name: a.Name, SHA256: a.SHA256, Size: a.Size, MediaType: a.MediaType})
			}
		}
		out = append(out, rj)
	}
	return out
}

// EventJSON is one event of `wdc tasks show --json`.
type EventJSON struct {
	Seq          int64     `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	WorkerID     string    `json:"worker_id,omitempty"`
	FencingToken int64     `json:"fencing_token,omitempty"`
	Message      string    `json:"message"`
}

// TaskDetail is what `wdc tasks show` shows of one task: the task, its
// attempts, every result posted for it (the view lists the rejected ones),
// its events, and the last lines of stderr of its failed attempts, by
// attempt number, already redacted.
type TaskDetail struct {
	Task        state.Task
	Attempts    []state.Attempt
	Results     []state.Result
	Events      []state.Event
	StderrTails map[int]string
}

// TaskDetailJSON is `wdc tasks show --json` (docs/json.md).
type TaskDetailJSON struct {
	TaskJSON
	AttemptList []AttemptJSON  `json:"attempt_list"`
	Rejected    []RejectedJSON `json:"rejected_results"`
	Events      []EventJSON    `json:"events"`
}

// JSON is the document of `wdc tasks show --json`: the task's entry of
// `wdc tasks list --json` with its attempts, rejected results and events.
func (d *TaskDetail) JSON() TaskDetailJSON {
	out := TaskDetailJSON{TaskJSON: NewTaskJSON(d.Task), AttemptList: []AttemptJSON{}, Rejected: rejectedResults(d.Results), Events: []EventJSON{}}
	for _, a := range d.Attempts {
		out.AttemptList = append(out.AttemptList, AttemptJSON{Number: a.Number, WorkerID: a.WorkerID, FencingToken: a.Token,
			StartedAt: JSONTime(a.StartedAt), EndedAt: JSONTime(a.EndedAt), ExitCode: a.ExitCode, Signal: a.Signal,
			FailureClass: string(a.FailureClass), Error: a.Error, StdoutPath: a.StdoutPath, StderrPath: a.StderrPath,
			Artifacts: NewArtifactsJSON(a.Artifacts), StderrTail: d.StderrTails[a.Number]})
	}
	for _, ev := range d.Events {
		out.Events = append(out.Events, EventJSON{Seq: ev.Seq, At: ev.At.UTC(), Kind: ev.Kind, WorkerID: ev.WorkerID, FencingToken: ev.Token, Message: ev.Message})
	}
	return out
}

// WriteJSON writes the document of `wdc tasks show --json` (JSON).
func (d *TaskDetail) WriteJSON(w io.Writer) error { return WriteJSON(w, d.JSON()) }

// WriteText prints the task, its attempts (and the last lines of their
// stderr), its rejected results and its events.
func (d *TaskDetail) WriteText(w io.Writer) error {
	task := d.Task
	fmt.Fprintf(w, "%s\n  status:     %s\n  attempts:   %d\n  def_hash:   %s\n", task.Address, task.Status, task.Attempts, task.DefHash)
	if task.LastError != "" {
		fmt.Fprintf(w, "  last error: %s\n", OneLine(task.LastError))
	}
	if err := d.writeAttempts(w); err != nil {
		return err
	}
	if rejected := rejectedResults(d.Results); len(rejected) > 0 {
		fmt.Fprintf(w, "\nRejected results:\n")
		for _, r := range rejected {
			names := make([]string, len(r.Artifacts))
			for i, a := range r.Artifacts {
				names[i] = Printable(a.Name) + " " + protocol.ShortHash(a.SHA256)
			}
			fmt.Fprintf(w, "  %s  worker %s, token %d: %s; artifacts: %s\n", FormatTime(r.ReceivedAt), Printable(r.WorkerID), r.FencingToken, Printable(r.Reason),
				OrDash(strings.Join(names, ", ")))
		}
	}
	fmt.Fprintf(w, "\nEvents:\n")
	if len(d.Events) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	width := 10 // the kinds' column: as wide as the longest kind shown
	for _, ev := range d.Events {
		width = max(width, len(ev.Kind))
	}
	for _, ev := range d.Events {
		fmt.Fprintf(w, "  %s  %-*s %s\n", FormatTime(ev.At), width, ev.Kind, OneLine(ev.Message))
	}
	return nil
}

// writeAttempts prints the attempts' table, then the last lines of stderr
// of each attempt that wrote some.
func (d *TaskDetail) writeAttempts(w io.Writer) error {
	fmt.Fprintf(w, "\nAttempts:\n")
	if len(d.Attempts) == 0 {
		fmt.Fprintf(w, "  none\n")
		return nil
	}
	tw := NewTable(w)
	fmt.Fprintln(tw, "  #\tWORKER\tTOKEN\tSTARTED\tENDED\tEXIT\tCLASS\tARTIFACTS")
	for _, a := range d.Attempts {
		exit := "-"
		switch {
		case a.ExitCode != nil:
			exit = strconv.Itoa(*a.ExitCode)
		case a.Signal != "":
			exit = Printable(a.Signal)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Number, a.WorkerID, a.Token, FormatTime(a.StartedAt), FormatTime(a.EndedAt),
			exit, OrDash(Printable(string(a.FailureClass))), artifactsSummary(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range d.Attempts {
		if tail := d.StderrTails[a.Number]; tail != "" {
			fmt.Fprintf(w, "\nAttempt %d, last lines of stderr (wdc logs %s --attempt %d --stderr for all):\n", a.Number, d.Task.Address, a.Number)
			for _, line := range strings.Split(tail, "\n") {
				// The task wrote it: made Printable, its tabs kept.
				fields := strings.Split(line, "\t")
				for i, f := range fields {
					fields[i] = Printable(f)
				}
				fmt.Fprintf(w, "  | %s\n", strings.Join(fields, "\t"))
			}
		}
	}
	return nil
}

// artifactsSummary is an attempt's artifacts in one cell: "stdout 12 B,
// stderr 0 B, out/r.json 2.1 KiB", or the log paths an earlier version
// recorded.
func artifactsSummary(a state.Attempt) string {
	if len(a.Artifacts) == 0 {
		if a.StdoutPath != "" || a.StderrPath != "" {
			return OrDash(Printable(a.StdoutPath)) + " " + OrDash(Printable(a.StderrPath))
		}
		return "-"
	}
	parts := make([]string, len(a.Artifacts))
	for i, x := range a.Artifacts {
		parts[i] = Printable(x.Name) + " " + artifact.FormatSize(x.Size)
	}
	return strings.Join(parts, ", ")
}
