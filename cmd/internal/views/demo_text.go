package views

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/demo"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/state"
)

// demoRel renders t as an offset from the story's start: "t+4s"; "-" for the
// zero time.
func demoRel(r *demo.Report, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "t+" + t.Sub(r.Start).String()
}

// DemoText prints the worker-leases story for people: a paragraph on the
// setting, then each step — what happened, the state it produced, its
// checks — then whether every invariant held, and why not.
func DemoText(w io.Writer, r *demo.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Fenced worker leases, step by step, on a state of the demo's own: apply's\n")
	fmt.Fprintf(&b, "coordinator and state store, worker protocol v1 over HTTP on 127.0.0.1, and a\n")
	fmt.Fprintf(&b, "fake clock from %s (t+0s). The demo plays both workers.\n", r.Start.Format(time.RFC3339))
	fmt.Fprintf(&b, "pool.%s: heartbeat every %s, ttl %s. %s: retry.max_lost %d, backoff %s.\n",
		r.Pool.Name, r.Pool.HeartbeatInterval, r.Pool.TTL, r.Task.Address, r.Task.MaxLost, r.Task.Backoff)
	fmt.Fprintf(&b, "%s\n", r.Plan)
	for i, st := range r.Steps {
		fmt.Fprintf(&b, "\n%d. %s (%s)\n", i+1, st.Title, demoRel(r, st.At))
		for _, h := range st.Happened {
			fmt.Fprintf(&b, "   %s\n", h)
		}
		if st.State == nil {
			b.WriteString("   state: could not be read\n")
		} else {
			b.WriteString("   state:\n")
			tw := NewTable(&b)
			for _, row := range demoStateRows(r, *st.State) {
				fmt.Fprintf(tw, "     %s\n", row)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		for _, c := range st.Checks {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "   %s  %s: %s\n", mark, c.Invariant, c.Observed)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", demoSummaryText(r))
	for _, f := range r.Failed() {
		fmt.Fprintf(&b, "  step %d (%s): %s: %s\n", f.Step, f.StepID, f.Check.Invariant, f.Check.Observed)
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "The story stopped: %s.\n", r.Stopped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// demoStateRows renders a view as tab-separated rows: the task, its
// retry directive, its leases, the workers, the results and the events
// the step appended.
func demoStateRows(r *demo.Report, v demo.View) []string {
	var rows []string
	t := v.Task
	rows = append(rows, fmt.Sprintf("%s\t%s\t%s, lost %d of %d", t.Address, t.Status, plural.Count(t.Attempts, "attempt", "attempts"), t.LostUsed, r.Task.MaxLost))
	if d := v.Retry; d != nil {
		status, when := "open", "not before "+demoRel(r, d.NotBefore)
		if !d.ConsumedAt.IsZero() {
			status, when = "consumed", "consumed "+demoRel(r, d.ConsumedAt)
		}
		rows = append(rows, fmt.Sprintf("retry\t%s\tattempt %d (%s), %s", status, d.NextAttempt, d.Kind, when))
	}
	for _, l := range v.Leases {
		detail := fmt.Sprintf("attempt %d, worker %s, renewed %s, expires %s", l.Attempt, demoWorker(l.Worker, l.WorkerID), demoRel(r, l.RenewedAt), demoRel(r, l.ExpiresAt))
		if !l.EndedAt.IsZero() {
			detail = fmt.Sprintf("attempt %d, worker %s, ended %s", l.Attempt, demoWorker(l.Worker, l.WorkerID), demoRel(r, l.EndedAt))
		}
		rows = append(rows, fmt.Sprintf("lease %d\t%s\t%s", l.Token, l.Status, detail))
	}
	for _, w := range v.Workers {
		rows = append(rows, fmt.Sprintf("worker %s\t%s\tlast heartbeat %s, %s", w.Name, w.Status, demoRel(r, w.LastHeartbeatAt),
			plural.Count(w.LeasesHeld, "lease", "leases")))
	}
	for _, res := range v.Results {
		detail := fmt.Sprintf("lease %d from worker %s at %s", res.Token, demoWorker(res.Worker, ""), demoRel(r, res.ReceivedAt))
		if res.Reason != "" {
			detail = res.Reason + ": " + detail
		}
		rows = append(rows, fmt.Sprintf("result\t%s\t%s", res.Decision, detail))
	}
	if len(v.Events) > 0 {
		parts := make([]string, len(v.Events))
		for i, ev := range v.Events {
			switch {
			case ev.Kind == state.EventWorker:
				parts[i] = fmt.Sprintf("%s (worker %s: %s)", ev.Kind, demoWorker(ev.Worker, ev.WorkerID), ev.Message)
			case ev.Token > 0:
				parts[i] = fmt.Sprintf("%s (lease %d)", ev.Kind, ev.Token)
			case ev.WorkerID != "":
				parts[i] = fmt.Sprintf("%s (worker %s)", ev.Kind, demoWorker(ev.Worker, ev.WorkerID))
			default:
				parts[i] = ev.Kind
			}
		}
		rows = append(rows, "events\t"+strings.Join(parts, ", "))
	}
	return rows
}

// demoWorker names a worker by its story name, else by its id.
func demoWorker(name, id string) string {
	if name != "" {
		return name
	}
	return OrDash(id)
}
