package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// StatusCmd prints one screen of where things stand: the apply holding
// the lock, each pool's workers and supervisor, the tasks.
type StatusCmd struct {
	JSON bool `name:"json" help:"Print the status document (docs/json.md) instead of text."`
}

// statusFormatVersion is the status document's format_version.
const statusFormatVersion = "1.1"

type statusDoc struct {
	FormatVersion string         `json:"format_version"`
	Path          string         `json:"path"`
	Exists        bool           `json:"exists"`
	At            time.Time      `json:"at"`
	Apply         *statusApply   `json:"apply"`
	Pools         []statusPool   `json:"pools"`
	Tasks         map[string]int `json:"tasks"`
	OldestQueued  *statusOldest  `json:"oldest_queued"`
}

type statusApply struct {
	ID             string    `json:"id"`
	Holder         string    `json:"holder"`
	Host           string    `json:"host"`
	PID            int       `json:"pid"`
	Since          time.Time `json:"since"`
	ExpiresAt      time.Time `json:"expires_at"`
	CoordinatorURL string    `json:"coordinator_url"`
	// HolderState is how the apply is judged, as doctor and apply judge
	// it (engine.JudgeHolder): "live", "dead" (its pid no longer runs on
	// this host) or "stalled" (it stopped renewing the lock). Format 1.1.
	HolderState string `json:"holder_state"`
	// Answered is whether the coordinator answered the status call;
	// Error says why not.
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
}

type statusPool struct {
	Name     string         `json:"name"`
	Provider string         `json:"provider"`
	Min      int            `json:"min"`
	Max      int            `json:"max"`
	Workers  map[string]int `json:"workers"`
	Busy     int            `json:"busy"`
	Idle     int            `json:"idle"`
	// Queued and Pending come from the running apply's coordinator (nil
	// without one).
	Queued     *int                         `json:"queued"`
	Pending    *int                         `json:"pending_launches"`
	Supervisor *protocol.SupervisorDecision `json:"supervisor"`
}

type statusOldest struct {
	Task       string    `json:"task"`
	Since      time.Time `json:"since"`
	AgeSeconds float64   `json:"age_seconds"`
}

// Run reads the state (read-only) and, when an apply runs, asks its
// coordinator for what only it knows (pending launches, the supervisor's
// last step); a coordinator that does not answer is said, not fatal.
func (c *StatusCmd) Run(e *env) error {
	snap, path, err := e.readStateSnapshot()
	if err != nil {
		return err
	}
	now := e.now()
	doc := statusDoc{FormatVersion: statusFormatVersion, Path: path, Exists: snap.Lineage != "", At: now,
		Pools: []statusPool{}, Tasks: map[string]int{}}
	var sup map[string]protocol.PoolSupervision
	if l := snap.Lock; l != nil {
		host, _ := os.Hostname()
		holder := apply.JudgeHolder(*l, host, 0, now, nil)
		doc.Apply = &statusApply{ID: l.ID, Holder: l.Holder, Host: l.Host, PID: l.PID, Since: l.StartedAt, ExpiresAt: l.ExpiresAt, CoordinatorURL: l.CoordinatorURL,
			HolderState: holder.String()}
		if holder == apply.HolderDead {
			// Nothing to ask: its process is gone.
			doc.Apply.Error = "the apply is gone: its pid no longer runs on this host"
		} else if resp, err := e.coordinatorStatus(); err != nil {
			doc.Apply.Error = err.Error()
		} else {
			doc.Apply.Answered = true
			sup = map[string]protocol.PoolSupervision{}
			for _, p := range resp.Pools {
				sup[p.Pool] = p
			}
		}
	}
	for _, p := range snap.Pools {
		sp := statusPool{Name: p.Name, Provider: p.Provider, Min: p.Min, Max: p.Max, Workers: map[string]int{}}
		for _, w := range snap.Workers {
			if w.Pool != p.Name || w.Status == state.WorkerGone {
				continue
			}
			sp.Workers[string(w.Status)]++
			if w.Status == state.WorkerActive {
				if w.LeasesHeld > 0 {
					sp.Busy++
				} else {
					sp.Idle++
				}
			}
		}
		if s, ok := sup[p.Name]; ok {
			queued, pending := s.Queued, s.Pending
			sp.Queued, sp.Pending, sp.Supervisor = &queued, &pending, s.Decision
		}
		doc.Pools = append(doc.Pools, sp)
	}
	for _, t := range snap.Tasks {
		doc.Tasks[string(t.Status)]++
		if t.Status == state.TaskQueued && (doc.OldestQueued == nil || t.UpdatedAt.Before(doc.OldestQueued.Since)) {
			doc.OldestQueued = &statusOldest{Task: t.Address, Since: t.UpdatedAt}
		}
	}
	if o := doc.OldestQueued; o != nil {
		o.AgeSeconds = max(now.Sub(o.Since), 0).Seconds()
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, doc)
	}
	return renderStatus(e, doc, len(snap.Tasks))
}

// coordinatorStatus asks the running apply's coordinator for its view.
func (e *env) coordinatorStatus() (protocol.StatusResponse, error) {
	cl, _, err := e.operatorClient("wdc status")
	if err != nil {
		return protocol.StatusResponse{}, err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	resp, err := cl.Status(ctx)
	if err != nil {
		return resp, describeAPIError(err)
	}
	return resp, nil
}

func renderStatus(e *env, d statusDoc, total int) error {
	w := e.stdout
	ago := func(t time.Time) string { return d.At.Sub(t).Round(time.Second).String() + " ago" }
	if a := d.Apply; a != nil {
		// Recorded by another process: printed as what they are.
		shown := *a
		shown.Holder, shown.Host, shown.Error = views.Printable(a.Holder), views.Printable(a.Host), views.Printable(a.Error)
		d.Apply = &shown
	}
	switch a := d.Apply; {
	case !d.Exists:
		fmt.Fprintf(w, "No state file at %s yet: wdc apply creates it.\n", d.Path)
		return nil
	case a == nil:
		fmt.Fprintf(w, "No apply is running (state %s).\n", d.Path)
	case a.HolderState == apply.HolderDead.String():
		fmt.Fprintf(w, "Apply %s is gone: it holds the state lock since %s (%s) as %s on %s, but pid %d no longer runs on this host\n",
			a.ID, views.FormatTime(a.Since), ago(a.Since), a.Holder, a.Host, a.PID)
		fmt.Fprintln(w, "  The next wdc apply takes the lock over and continues its unfinished tasks; wdc doctor says what it left.")
	case a.HolderState == apply.HolderStalled.String():
		fmt.Fprintf(w, "Apply %s is not answering: it stopped renewing the state lock (expired %s, %s); held since %s by %s on %s (pid %d)\n",
			a.ID, views.FormatTime(a.ExpiresAt), ago(a.ExpiresAt), views.FormatTime(a.Since), a.Holder, a.Host, a.PID)
		renderCoordinator(w, a)
		fmt.Fprintln(w, "  The next wdc apply takes the lock over; wdc doctor says more.")
	default:
		fmt.Fprintf(w, "Apply %s running since %s (%s), held by %s on %s (pid %d)\n", a.ID, views.FormatTime(a.Since), ago(a.Since), a.Holder, a.Host, a.PID)
		renderCoordinator(w, a)
	}
	fmt.Fprintln(w)
	if len(d.Pools) > 0 {
		tw := views.NewTable(w)
		fmt.Fprintln(tw, "POOL\tPROVIDER\tACTIVE\tBUSY\tIDLE\tDRAINING\tSTALE\tPENDING\tQUEUED\tSUPERVISOR")
		for _, p := range d.Pools {
			optional := func(n *int) string {
				if n == nil {
					return "-"
				}
				return fmt.Sprint(*n)
			}
			supervisor := "-"
			if s := p.Supervisor; s != nil {
				supervisor = s.Action
				if s.Count > 1 {
					supervisor += fmt.Sprintf(" %d", s.Count)
				}
				supervisor += ": " + s.Reason + " (" + ago(s.At) + ")"
			}
			fmt.Fprintf(tw, "pool.%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.Provider, p.Workers[string(state.WorkerActive)], p.Busy, p.Idle,
				p.Workers[string(state.WorkerDraining)], p.Workers[string(state.WorkerStale)], optional(p.Pending), optional(p.Queued), supervisor)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	var parts []string
	for _, st := range []state.TaskStatus{state.TaskPending, state.TaskQueued, state.TaskRunning, state.TaskSucceeded, state.TaskFailed, state.TaskCancelled} {
		if n := d.Tasks[string(st)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	line := fmt.Sprintf("Tasks: %s", plural.Count(total, "task", "tasks"))
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if o := d.OldestQueued; o != nil {
		line += fmt.Sprintf(". Oldest queued: %s, for %s", o.Task, time.Duration(o.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	_, err := fmt.Fprintln(w, line+".")
	return err
}

// renderCoordinator prints the apply's coordinator line: its URL, and why
// it did not answer.
func renderCoordinator(w io.Writer, a *statusApply) {
	fmt.Fprintf(w, "  coordinator: %s", views.OrDash(a.CoordinatorURL))
	if !a.Answered {
		fmt.Fprintf(w, " (did not answer: %s)", a.Error)
	}
	fmt.Fprintln(w)
}
