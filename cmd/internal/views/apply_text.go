package views

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
)

// ApplyText renders apply for people: the text plan, one line per event,
// and on a terminal a status line under them that updates in place, then
// the summary line.
type ApplyText struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	width    func() int // the terminal's width in columns; nil elsewhere
	begin    time.Time
	started  bool
	counts   map[string]int
	total    int              // task changes of the plan
	running  map[string]int64 // task → fencing token of its running attempt
	stop     chan struct{}
	done     chan struct{}
}

// NewApplyText writes to w. width is nil when w is not a terminal: then
// the view writes one line per event and nothing else; on a terminal it
// reports the terminal's width in columns, which the status line keeps
// within.
func NewApplyText(w io.Writer, width func() int) *ApplyText {
	return &ApplyText{w: w, terminal: width != nil, width: width, counts: map[string]int{}, running: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Plan writes the text plan and remembers how many task changes it has.
func (v *ApplyText) Plan(doc *jsonplan.Plan, color bool) error {
	v.total = doc.Summary.Total
	return PlanText(v.w, doc, color)
}

// Start writes an empty line and, on a terminal, starts the status line.
func (v *ApplyText) Start() {
	v.begin = time.Now()
	fmt.Fprintln(v.w)
	if v.terminal {
		v.started = true
		go v.tick()
	}
}

// Summary writes the summary line after an empty line.
func (v *ApplyText) Summary(res *apply.Result, nothingToDo bool) error {
	if nothingToDo {
		_, err := fmt.Fprintln(v.w, "\n"+nothingToDoText)
		return err
	}
	_, err := fmt.Fprintf(v.w, "\n%s\n", applySummary(res))
	return err
}

func (v *ApplyText) tick() {
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

// Event prints one line for e, with the tail of a failed attempt's stderr
// under it (and refreshes the status line).
func (v *ApplyText) Event(e coordinator.Event) {
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
// "           stderr | line", one per line, each made Printable: the task
// wrote it, and an escape sequence in it must not recolour, move or clear
// the operator's terminal. A line's closing "\r" (CRLF) is dropped.
func indentTail(tail string) string {
	var b strings.Builder
	for _, line := range strings.Split(tail, "\n") {
		b.WriteString("           stderr | " + Printable(strings.TrimSuffix(line, "\r")) + "\n")
	}
	return b.String()
}

func (v *ApplyText) status() {
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

// Close stops the status line and clears it.
func (v *ApplyText) Close() {
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
	// A message may carry what a worker or a task said (an error, a host).
	detail = Printable(detail)
	switch {
	case subject == "":
		return fmt.Sprintf("%-10s %s", e.Kind, detail)
	case detail == "":
		return fmt.Sprintf("%-10s %s", e.Kind, subject)
	}
	return fmt.Sprintf("%-10s %s: %s", e.Kind, subject, detail)
}
