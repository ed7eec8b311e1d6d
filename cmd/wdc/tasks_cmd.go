package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// TasksListCmd lists the tasks recorded in the state.
type TasksListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

// taskJSON is one task in `wdc tasks list --json` and `wdc tasks show --json`.
type taskJSON struct {
	Address   string     `json:"address"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	DefHash   string     `json:"def_hash"`
	LastError string     `json:"last_error,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	Finished  *time.Time `json:"finished_at,omitempty"`
}

func newTaskJSON(t state.Task) taskJSON {
	return taskJSON{Address: t.Address, Status: string(t.Status), Attempts: t.Attempts, DefHash: t.DefHash,
		LastError: t.LastError, UpdatedAt: jsonTime(t.UpdatedAt), Finished: jsonTime(t.FinishedAt)}
}

// Run prints one row per task: address, status, attempts, short def_hash and
// last error.
func (c *TasksListCmd) Run(e *env) error {
	snap, path, err := e.readStateSnapshot()
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]taskJSON, 0, len(snap.Tasks))
		for _, t := range snap.Tasks {
			out = append(out, newTaskJSON(t))
		}
		return writeJSON(e.stdout, out)
	}
	if len(snap.Tasks) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No tasks in the state"+noStateHint(snap.Lineage != "", path)+".")
		return err
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "ADDRESS\tSTATUS\tATTEMPTS\tDEF_HASH\tLAST ERROR")
	for _, t := range snap.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.Address, t.Status, t.Attempts, protocol.ShortHash(t.DefHash), orDash(oneLine(t.LastError)))
	}
	return tw.Flush()
}

// TasksShowCmd shows one task with its attempts and events.
type TasksShowCmd struct {
	Address string `arg:"" name:"address" predictor:"address" help:"Task address (task.NAME, task.NAME[INDEX]) or bare name (NAME, NAME[INDEX])."`
	JSON    bool   `name:"json" help:"Print JSON instead of text."`
}

type attemptJSON struct {
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
	Artifacts  []artifactJSON `json:"artifacts"`
	// StderrTail is the last lines of a failed attempt's stderr, redacted.
	StderrTail string `json:"stderr_tail,omitempty"`
}

// artifactJSON is one log or output an attempt's accepted result bound.
type artifactJSON struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type,omitempty"`
}

// rejectedJSON is a result the coordinator refused.
type rejectedJSON struct {
	ReceivedAt   time.Time      `json:"received_at"`
	WorkerID     string         `json:"worker_id"`
	FencingToken int64          `json:"fencing_token"`
	Attempt      int            `json:"attempt,omitempty"`
	Reason       string         `json:"reason"`
	Artifacts    []artifactJSON `json:"artifacts"`
}

func newArtifactsJSON(as []state.Artifact) []artifactJSON {
	out := make([]artifactJSON, 0, len(as))
	for _, a := range as {
		out = append(out, artifactJSON{Kind: a.Kind, Name: a.Name, SHA256: a.SHA256, Size: a.Size, MediaType: a.MediaType})
	}
	return out
}

// rejectedResults lists a task's rejected results with the artifacts they
// named (from the body as posted).
func rejectedResults(rs []state.Result) []rejectedJSON {
	out := []rejectedJSON{}
	for _, r := range rs {
		if r.Decision != state.DecisionRejected {
			continue
		}
		rj := rejectedJSON{ReceivedAt: r.ReceivedAt, WorkerID: r.WorkerID, FencingToken: r.Token, Attempt: r.Attempt, Reason: r.Reason,
			Artifacts: []artifactJSON{}}
		var body protocol.ResultRequest
		if json.Unmarshal(r.Body, &body) == nil {
			for _, a := range body.Artifacts {
				rj.Artifacts = append(rj.Artifacts, artifactJSON{Kind: a.Kind, Name: a.Name, SHA256: a.SHA256, Size: a.Size, MediaType: a.MediaType})
			}
		}
		out = append(out, rj)
	}
	return out
}

type eventJSON struct {
	Seq          int64     `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	WorkerID     string    `json:"worker_id,omitempty"`
	FencingToken int64     `json:"fencing_token,omitempty"`
	Message      string    `json:"message"`
}

// Run prints the task, each attempt (worker, fencing token, start, end, exit
// code, failure class, log paths) and the task's events.
func (c *TasksShowCmd) Run(e *env) error {
	ctx := context.Background()
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("no task %s: there is no state file at %s", c.Address, path)
	}
	defer st.Close()
	d, err := e.readTaskDetail(ctx, st, path, normalizeAddress(c.Address))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(e.stdout, d.json())
	}
	return d.writeText(e.stdout)
}

// taskDetail is what `wdc tasks show` shows of one task.
type taskDetail struct {
	task     state.Task
	attempts []state.Attempt
	events   []state.Event
	rejected []rejectedJSON
	tails    map[int]string // attempt number → last lines of its stderr
}

// readTaskDetail reads the task at addr and what happened to it. A
// counted task's name, a proposal not run yet and an unknown address each
// get an error saying what to ask instead.
func (e *env) readTaskDetail(ctx context.Context, st *state.Store, path, addr string) (*taskDetail, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	d := &taskDetail{}
	found := false
	for i := range snap.Tasks {
		if snap.Tasks[i].Address == addr {
			d.task, found = snap.Tasks[i], true
		}
	}
	if !found {
		var instances []string
		for _, t := range snap.Tasks {
			if strings.HasPrefix(t.Address, addr+"[") {
				instances = append(instances, t.Address)
			}
		}
		if len(instances) > 0 {
			return nil, fmt.Errorf("%s is a counted task: show one instance, e.g. wdc tasks show %s (instances: %s)", addr, instances[0], strings.Join(instances, ", "))
		}
		if why := notRunYet(snap, addr); why != "" {
			return nil, errors.New(why)
		}
		return nil, fmt.Errorf("no task %s in the state %s (see wdc tasks list)", addr, path)
	}
	if d.attempts, err = st.Attempts(ctx, addr); err != nil {
		return nil, err
	}
	if d.events, err = st.Events(ctx, addr); err != nil {
		return nil, err
	}
	results, err := st.Results(ctx, addr)
	if err != nil {
		return nil, err
	}
	d.rejected = rejectedResults(results)
	d.tails = e.stderrTails(path, d.attempts)
	return d, nil
}

// taskDetailJSON is `wdc tasks show --json` (docs/json.md).
type taskDetailJSON struct {
	taskJSON
	AttemptList []attemptJSON  `json:"attempt_list"`
	Rejected    []rejectedJSON `json:"rejected_results"`
	Events      []eventJSON    `json:"events"`
}

func (d *taskDetail) json() taskDetailJSON {
	out := taskDetailJSON{taskJSON: newTaskJSON(d.task), AttemptList: []attemptJSON{}, Rejected: d.rejected, Events: []eventJSON{}}
	for _, a := range d.attempts {
		out.AttemptList = append(out.AttemptList, attemptJSON{Number: a.Number, WorkerID: a.WorkerID, FencingToken: a.Token,
			StartedAt: jsonTime(a.StartedAt), EndedAt: jsonTime(a.EndedAt), ExitCode: a.ExitCode, Signal: a.Signal,
			FailureClass: string(a.FailureClass), Error: a.Error, StdoutPath: a.StdoutPath, StderrPath: a.StderrPath,
			Artifacts: newArtifactsJSON(a.Artifacts), StderrTail: d.tails[a.Number]})
	}
	for _, ev := range d.events {
		out.Events = append(out.Events, eventJSON{Seq: ev.Seq, At: ev.At.UTC(), Kind: ev.Kind, WorkerID: ev.WorkerID, FencingToken: ev.Token, Message: ev.Message})
	}
	return out
}

// writeText prints the task, its attempts (and the last lines of their
// stderr), its rejected results and its events.
func (d *taskDetail) writeText(w io.Writer) error {
	task := d.task
	fmt.Fprintf(w, "%s\n  status:     %s\n  attempts:   %d\n  def_hash:   %s\n", task.Address, task.Status, task.Attempts, task.DefHash)
	if task.LastError != "" {
		fmt.Fprintf(w, "  last error: %s\n", oneLine(task.LastError))
	}
	if err := d.writeAttempts(w); err != nil {
		return err
	}
	if len(d.rejected) > 0 {
		fmt.Fprintf(w, "\nRejected results:\n")
		for _, r := range d.rejected {
			names := make([]string, len(r.Artifacts))
			for i, a := range r.Artifacts {
				names[i] = a.Name + " " + protocol.ShortHash(a.SHA256)
			}
			fmt.Fprintf(w, "  %s  worker %s, token %d: %s; artifacts: %s\n", formatTime(r.ReceivedAt), r.WorkerID, r.FencingToken, r.Reason,
				orDash(strings.Join(names, ", ")))
		}
	}
	fmt.Fprintf(w, "\nEvents:\n")
	if len(d.events) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	width := 10 // the kinds' column: as wide as the longest kind shown
	for _, ev := range d.events {
		width = max(width, len(ev.Kind))
	}
	for _, ev := range d.events {
		fmt.Fprintf(w, "  %s  %-*s %s\n", formatTime(ev.At), width, ev.Kind, oneLine(ev.Message))
	}
	return nil
}

// writeAttempts prints the attempts' table, then the last lines of stderr
// of each attempt that wrote some.
func (d *taskDetail) writeAttempts(w io.Writer) error {
	fmt.Fprintf(w, "\nAttempts:\n")
	if len(d.attempts) == 0 {
		fmt.Fprintf(w, "  none\n")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  #\tWORKER\tTOKEN\tSTARTED\tENDED\tEXIT\tCLASS\tARTIFACTS")
	for _, a := range d.attempts {
		exit := "-"
		switch {
		case a.ExitCode != nil:
			exit = strconv.Itoa(*a.ExitCode)
		case a.Signal != "":
			exit = a.Signal
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Number, a.WorkerID, a.Token, formatTime(a.StartedAt), formatTime(a.EndedAt),
			exit, orDash(string(a.FailureClass)), artifactsSummary(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range d.attempts {
		if tail := d.tails[a.Number]; tail != "" {
			fmt.Fprintf(w, "\nAttempt %d, last lines of stderr (wdc logs %s --attempt %d --stderr for all):\n", a.Number, d.task.Address, a.Number)
			for _, line := range strings.Split(tail, "\n") {
				fmt.Fprintf(w, "  | %s\n", line)
			}
		}
	}
	return nil
}

// normalizeAddress turns a bare task name ("build", "build[2]") into an
// address ("task.build", "task.build[2]").
func normalizeAddress(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "task.") || strings.HasPrefix(s, "proposal.") {
		return s
	}
	return "task." + s
}

// notRunYet explains an address that names a proposal no apply has run
// yet, or "" when it names none.
func notRunYet(snap *state.Snapshot, addr string) string {
	id, ok := coordinator.ProposalID(addr)
	if !ok {
		return ""
	}
	for _, p := range snap.Proposals {
		if p.ID != id {
			continue
		}
		switch {
		case p.Status == state.ProposalPending:
			return fmt.Sprintf("%s has not run: it waits for approval (wdc proposals show %d; wdc approve %d)", addr, id, id)
		case p.Status == state.ProposalRejected:
			return fmt.Sprintf("%s never runs: it was rejected by %s: %s", addr, p.DecidedBy, p.Reason)
		}
		return fmt.Sprintf("%s is approved and has not run yet: the next wdc apply runs it (wdc proposals show %d)", addr, id)
	}
	return ""
}

// oneLine folds a possibly multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// readStateSnapshot resolves the state path for a read command and returns
// it with a snapshot; an absent state file is an empty state (lineage "").
func (e *env) readStateSnapshot() (*state.Snapshot, string, error) {
	path, err := e.statePathForReading()
	if err != nil {
		return nil, "", err
	}
	snap, err := readSnapshot(context.Background(), path)
	return snap, path, err
}

// artifactsSummary is an attempt's artifacts in one cell: "stdout 12 B,
// stderr 0 B, out/r.json 2.1 KiB", or the log paths an earlier version
// recorded.
func artifactsSummary(a state.Attempt) string {
	if len(a.Artifacts) == 0 {
		if a.StdoutPath != "" || a.StderrPath != "" {
			return orDash(a.StdoutPath) + " " + orDash(a.StderrPath)
		}
		return "-"
	}
	parts := make([]string, len(a.Artifacts))
	for i, x := range a.Artifacts {
		parts[i] = x.Name + " " + artifact.FormatSize(x.Size)
	}
	return strings.Join(parts, ", ")
}

// stderrTails returns the last lines of the stderr of each failed attempt
// (by number), redacted with the configuration's sensitive values; none
// when the configuration does not load (nothing could be redacted).
func (e *env) stderrTails(statePath string, attempts []state.Attempt) map[int]string {
	out := map[int]string{}
	redact := e.quietRedactor()
	if redact == nil {
		return out
	}
	var store *artifact.Store
	for _, a := range attempts {
		if a.FailureClass != state.FailureClassFailure {
			continue
		}
		for _, x := range a.Artifacts {
			if x.Kind != state.ArtifactLog || x.Name != "stderr" {
				continue
			}
			if store == nil {
				s, err := artifact.OpenForReading(apply.ArtifactFolder(filepath.Dir(statePath)))
				if err != nil {
					return out
				}
				store = s
			}
			if tail, err := coordinator.TailBlob(store, x.SHA256, coordinator.StderrTailLines); err == nil && tail != "" {
				out[a.Number] = redact(tail)
			}
		}
	}
	return out
}

// quietRedactor loads the configuration without printing anything and
// returns the function that hides its sensitive values, or nil when it
// does not load.
func (e *env) quietRedactor() func(string) string {
	dir, err := e.configDir()
	if err != nil {
		return nil
	}
	varFiles := make([]string, len(e.flags.VarFile))
	for i, f := range e.flags.VarFile {
		varFiles[i] = resolve(dir, f)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: e.flags.Var, VarFiles: varFiles, Environ: e.environ, Providers: providers.Schemas()})
	if diags.HasErrors() || cfg == nil {
		return nil
	}
	return newRedactor(cfg).text
}
