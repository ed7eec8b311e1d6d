package main

import (
	"context"
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/planfile"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/protocol"
)

// ShowCmd renders a saved plan as `wdc plan` would, or with no file the
// state: pools, workers, tasks and leases.
type ShowCmd struct {
	PlanFile string `arg:"" optional:"" name:"plan-file" predictor:"file" help:"A plan saved with wdc plan --out (relative to the configuration directory). Without it, show the state."`
	JSON     bool   `name:"json" help:"Print one JSON document (docs/json.md) instead of text."`
}

// stateDoc is the document `wdc show --json` prints for the state.
type stateDoc struct {
	FormatVersion string            `json:"format_version"`
	Path          string            `json:"path"`
	Exists        bool              `json:"exists"`
	State         jsonplan.StateRef `json:"state"`
	Lock          *lockDoc          `json:"lock"`
	Pools         []poolState       `json:"pools"`
	Workers       []workerJSON      `json:"workers"`
	Tasks         []views.TaskJSON  `json:"tasks"`
	Leases        []leaseJSON       `json:"leases"`
}

type lockDoc struct {
	ID        string    `json:"id"`
	Holder    string    `json:"holder"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// CoordinatorURL and CASHA256 name the holder's coordinator once it
	// serves (format 1.1).
	CoordinatorURL string `json:"coordinator_url,omitempty"`
	CASHA256       string `json:"ca_sha256,omitempty"`
}

type poolState struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Min      int               `json:"min"`
	Max      int               `json:"max"`
	Capacity int               `json:"capacity"`
	Labels   map[string]string `json:"labels"`
}

// Run prints the plan file or the state.
func (c *ShowCmd) Run(e *env) error {
	if c.PlanFile != "" {
		dir, err := e.configDir()
		if err != nil {
			return err
		}
		doc, err := planfile.Read(resolve(dir, c.PlanFile))
		if err != nil {
			return err
		}
		if c.JSON {
			return views.WriteJSON(e.stdout, doc)
		}
		return views.PlanText(e.stdout, doc, e.color(e.stdout))
	}

	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	doc := &stateDoc{FormatVersion: jsonplan.FormatVersion, Path: path, Pools: []poolState{}, Workers: []workerJSON{}, Tasks: []views.TaskJSON{}, Leases: []leaseJSON{}}
	ctx := context.Background()
	st, err := openForReading(ctx, path)
	switch {
	case err != nil:
		return err
	case st != nil:
		defer st.Close()
		snap, err := st.Snapshot(ctx)
		if err != nil {
			return err
		}
		leases, err := st.Leases(ctx, "")
		if err != nil {
			return err
		}
		doc.Exists = true
		doc.State = jsonplan.StateRef{Lineage: snap.Lineage, Serial: snap.Serial}
		if l := snap.Lock; l != nil {
			doc.Lock = &lockDoc{ID: l.ID, Holder: l.Holder, Host: l.Host, PID: l.PID, StartedAt: l.StartedAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
				CoordinatorURL: l.CoordinatorURL, CASHA256: l.CASHA256}
		}
		for _, p := range snap.Pools {
			labels := p.Labels
			if labels == nil {
				labels = map[string]string{}
			}
			doc.Pools = append(doc.Pools, poolState{Name: p.Name, Provider: p.Provider, Min: p.Min, Max: p.Max, Capacity: p.Capacity, Labels: labels})
		}
		for _, w := range snap.Workers {
			doc.Workers = append(doc.Workers, newWorkerJSON(w))
		}
		for _, t := range snap.Tasks {
			doc.Tasks = append(doc.Tasks, views.NewTaskJSON(t))
		}
		for _, l := range leases {
			doc.Leases = append(doc.Leases, newLeaseJSON(l))
		}
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, doc)
	}
	return renderState(e, doc)
}

func renderState(e *env, doc *stateDoc) error {
	w := e.stdout
	if !doc.Exists {
		_, err := fmt.Fprintf(w, "There is no state file at %s yet: wdc apply creates it.\n", doc.Path)
		return err
	}
	fmt.Fprintf(w, "State %s (lineage %s, serial %d)\n", doc.Path, doc.State.Lineage, doc.State.Serial)
	if l := doc.Lock; l != nil {
		fmt.Fprintf(w, "Locked by %s (host %s, pid %d) since %s, until %s; lock ID %s\n", l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt), views.FormatTime(l.ExpiresAt), l.ID)
		if l.CoordinatorURL != "" {
			fmt.Fprintf(w, "Coordinator: %s", l.CoordinatorURL)
			if l.CASHA256 != "" {
				fmt.Fprintf(w, " (CA sha256 %s)", l.CASHA256)
			}
			fmt.Fprintln(w)
		}
	}
	section := func(title string, n int) {
		fmt.Fprintf(w, "\n%s (%d):\n", title, n)
	}
	section("Pools", len(doc.Pools))
	tw := views.NewTable(w)
	for _, p := range doc.Pools {
		fmt.Fprintf(tw, "  pool.%s\t%s\tmin %d\tmax %d\tcapacity %d\t%s\n", p.Name, p.Provider, p.Min, p.Max, p.Capacity, views.FormatLabels(p.Labels))
	}
	tw.Flush()
	section("Workers", len(doc.Workers))
	tw = views.NewTable(w)
	for _, wk := range doc.Workers {
		fmt.Fprintf(tw, "  %s\tpool.%s\t%s\t%s\tpid %d\tleases %d\n", wk.ID, wk.Pool, wk.Status, views.OrDash(views.Printable(wk.Host)), wk.PID, wk.LeasesHeld)
	}
	tw.Flush()
	section("Tasks", len(doc.Tasks))
	tw = views.NewTable(w)
	for _, t := range doc.Tasks {
		fmt.Fprintf(tw, "  %s\t%s\tattempts %d\t%s\t%s\n", t.Address, t.Status, t.Attempts, protocol.ShortHash(t.DefHash), views.OrDash(views.OneLine(t.LastError)))
	}
	tw.Flush()
	section("Leases", len(doc.Leases))
	tw = views.NewTable(w)
	for _, l := range doc.Leases {
		fmt.Fprintf(tw, "  token %d\t%s\tattempt %d\t%s\t%s\n", l.FencingToken, l.Task, l.Attempt, l.WorkerID, l.Status)
	}
	return tw.Flush()
}
