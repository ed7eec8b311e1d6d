package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"golang.org/x/term"
)

// applyOutput is how apply reports: the plan, each event, the summary.
type applyOutput interface {
	// plan shows the plan before anything runs.
	plan(doc *planDoc, color bool) error
	// start begins live progress (after confirmation).
	start()
	// event reports one event; safe to call from several goroutines.
	event(e coordinator.Event)
	// close ends live progress.
	close()
	// summary reports the outcome; nothingToDo when the plan had no changes.
	summary(res *apply.Result, nothingToDo bool) error
}

// progressView renders apply's progress for people: one line per event,
// and on a terminal a status line under them that updates in place.
type progressView struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	width    func() int // the terminal's width in columns
	begin    time.Time
	started  bool
	counts   map[string]int
	total    int              // task changes of the plan
	running  map[string]int64 // task → fencing token of its running attempt
	stop     chan struct{}
	done     chan struct{}
}

func newProgressView(w io.Writer, terminal bool) *progressView {
	v := &progressView{w: w, terminal: terminal, counts: map[string]int{}, running: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{}), width: func() int { return 80 }}
	if f, ok := fileOf(w); ok && terminal {
		v.width = func() int {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
			return 80
		}
	}
	return v
}

func (v *progressView) plan(doc *planDoc, color bool) error {
	v.total = doc.Summary.Total
	return renderPlan(v.w, doc, color)
}

func (v *progressView) start() {
	v.begin = time.Now()
	fmt.Fprintln(v.w)
	if v.terminal {
		v.started = true
		go v.tick()
	}
}

func (v *progressView) summary(res *apply.Result, nothingToDo bool) error {
	if nothingToDo {
		_, err := fmt.Fprintln(v.w, "\nApply complete! Nothing to do.")
		return err
	}
	_, err := fmt.Fprintf(v.w, "\n%s\n", applySummary(res))
	return err
}

func (v *progressView) tick() {
	defer close(v.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			v.mu.Lock()
			v.status()
			v.mu.Unlock()
		}
	}
}

// event prints one line for e (and refreshes the status line).
func (v *progressView) event(e coordinator.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.counts[e.Kind]++
	switch e.Kind {
	case coordinator.EventLeased:
		v.running[e.Task] = e.Token
	case coordinator.EventSucceeded, coordinator.EventExpired, coordinator.EventFailed, coordinator.EventRetried,
		coordinator.EventReleased, coordinator.EventRevoked, coordinator.EventCancelled:
		// The attempt named ended (or the task did, without one).
		if tok, ok := v.running[e.Task]; ok && (e.Token == 0 || e.Token == tok) {
			delete(v.running, e.Task)
		}
	}
	if v.terminal {
		fmt.Fprint(v.w, "\r\x1b[K")
	}
	fmt.Fprintln(v.w, eventLine(e))
	if e.StderrTail != "" {
		fmt.Fprint(v.w, indentTail(e.StderrTail))
	}
	if v.terminal {
		v.status()
	}
}

// indentTail renders a failed attempt's stderr tail under its event line:
// "           stderr │ line", one per line.
func indentTail(tail string) string {
	var b strings.Builder
	for _, line := range strings.Split(tail, "\n") {
		b.WriteString("           stderr | " + line + "\n")
	}
	return b.String()
}

func (v *progressView) status() {
	running := make([]string, 0, len(v.running))
	for t := range v.running {
		running = append(running, t)
	}
	sort.Strings(running)
	fmt.Fprint(v.w, "\r\x1b[K"+statusLine(progressCounts{
		Done: v.counts[coordinator.EventSucceeded] + v.counts[coordinator.EventFailed] + v.counts[coordinator.EventCancelled], Total: v.total,
		Succeeded: v.counts[coordinator.EventSucceeded], Failed: v.counts[coordinator.EventFailed], Attempts: v.counts[coordinator.EventLeased],
	}, running, time.Since(v.begin), v.width()))
}

// progressCounts are the numbers of the live status line.
type progressCounts struct {
	Done, Total, Succeeded, Failed, Attempts int
}

// statusLine renders the live status line, at most width columns:
// "[3/10] 2 succeeded, 1 failed, 4 attempts, 12.4s · running: task.a, task.b[1] +2 more".
// The counts and the timer always show; the running tasks fill what is left.
func statusLine(c progressCounts, running []string, elapsed time.Duration, width int) string {
	head := fmt.Sprintf("[%d/%d] %d succeeded, %d failed, %d attempts, %s", c.Done, c.Total, c.Succeeded, c.Failed, c.Attempts,
		elapsed.Round(100*time.Millisecond))
	if len(running) == 0 {
		return head
	}
	// Leave the last column free: writing into it wraps some terminals.
	room := width - 1 - len(head) - len(" · running: ")
	shown := 0
	list := ""
	for i, t := range running {
		next := list
		if i > 0 {
			next += ", "
		}
		next += t
		more := ""
		if rest := len(running) - i - 1; rest > 0 {
			more = fmt.Sprintf(" +%d more", rest)
		}
		if len(next)+len(more) > room {
			break
		}
		list, shown = next, i+1
	}
	switch {
	case shown == len(running):
		return head + " · running: " + list
	case shown > 0:
		return head + " · running: " + list + fmt.Sprintf(" +%d more", len(running)-shown)
	}
	return head + fmt.Sprintf(" · %d running", len(running))
}

func (v *progressView) close() {
	if v.started {
		v.started = false
		close(v.stop)
		<-v.done
		fmt.Fprint(v.w, "\r\x1b[K")
	}
}

// eventLine renders e as "KIND  SUBJECT: detail".
func eventLine(e coordinator.Event) string {
	subject := e.Task
	if subject == "" && e.Pool != "" {
		subject = "pool." + e.Pool
	}
	var detail string
	switch e.Kind {
	case coordinator.EventLeased:
		detail = fmt.Sprintf("attempt %d, fencing token %d, worker %s", e.Attempt, e.Token, e.WorkerID)
	case coordinator.EventSucceeded:
		detail = fmt.Sprintf("attempt %d", e.Attempt)
	case coordinator.EventRegistered:
		detail = "worker " + e.WorkerID
	case coordinator.EventStale:
		detail = "worker " + e.WorkerID + ": " + e.Message
	default:
		detail = e.Message
		// Name the attempt, unless the message starts with it already
		// ("attempt 4 failed …").
		if e.Attempt > 0 && e.Kind != coordinator.EventQueued && !strings.HasPrefix(e.Message, fmt.Sprintf("attempt %d ", e.Attempt)) {
			detail = fmt.Sprintf("attempt %d: %s", e.Attempt, e.Message)
		}
	}
	switch {
	case subject == "":
		return fmt.Sprintf("%-10s %s", e.Kind, detail)
	case detail == "":
		return fmt.Sprintf("%-10s %s", e.Kind, subject)
	}
	return fmt.Sprintf("%-10s %s: %s", e.Kind, subject, detail)
}

// jsonOutput reports apply as NDJSON: one object per line, each with a
// "type": "plan" (the plan document), "event" (one event), "summary".
type jsonOutput struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newJSONOutput(w io.Writer) *jsonOutput { return &jsonOutput{enc: json.NewEncoder(w)} }

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

func (j *jsonOutput) write(v any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.enc.Encode(v)
}

func (j *jsonOutput) plan(doc *planDoc, _ bool) error {
	return j.write(struct {
		Type string   `json:"type"`
		Plan *planDoc `json:"plan"`
	}{"plan", doc})
}

func (j *jsonOutput) start() {}
func (j *jsonOutput) close() {}

func (j *jsonOutput) event(e coordinator.Event) {
	_ = j.write(eventDoc{Type: "event", Kind: e.Kind, At: e.At.UTC(), Task: e.Task, Pool: e.Pool, WorkerID: e.WorkerID,
		Attempt: e.Attempt, Token: e.Token, Launch: e.Launch, Message: e.Message, StderrTail: e.StderrTail})
}

func (j *jsonOutput) summary(res *apply.Result, nothingToDo bool) error {
	text := applySummary(res)
	if nothingToDo {
		text = "Apply complete! Nothing to do."
	}
	return j.write(summaryLine{Type: "summary", OK: res.OK(), Succeeded: res.Succeeded, Failed: res.Failed, Cancelled: res.Cancelled,
		Unfinished: res.Unfinished, Attempts: res.Attempts, Workers: res.Workers, Joined: res.Joined, Interrupted: res.Interrupted,
		WallSeconds: res.Wall.Seconds(), Text: text})
}
