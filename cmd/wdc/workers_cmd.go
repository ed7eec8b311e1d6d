package main

import (
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/state"
)

// WorkersListCmd lists the workers recorded in the state.
type WorkersListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

type workerJSON struct {
	ID                string            `json:"id"`
	Pool              string            `json:"pool"`
	Labels            map[string]string `json:"labels"`
	Capacity          int               `json:"capacity"`
	Status            string            `json:"status"`
	Host              string            `json:"host"`
	PID               int               `json:"pid"`
	Version           string            `json:"version,omitempty"`
	RegisteredAt      *time.Time        `json:"registered_at,omitempty"`
	LastHeartbeatAt   *time.Time        `json:"last_heartbeat_at,omitempty"`
	HeartbeatInterval float64           `json:"heartbeat_interval_seconds"`
	TTL               float64           `json:"ttl_seconds"`
	LeasesHeld        int               `json:"leases_held"`
	ApplyID           string            `json:"apply_id,omitempty"`
	LaunchSeq         int               `json:"launch_seq,omitempty"`
	JoinTokenID       string            `json:"join_token_id,omitempty"`
}

// Run prints one row per worker: id, pool, labels, status, host, pid, last
// heartbeat and active leases held.
func (c *WorkersListCmd) Run(e *env) error {
	snap, path, err := e.readStateSnapshot()
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]workerJSON, 0, len(snap.Workers))
		for _, w := range snap.Workers {
			out = append(out, newWorkerJSON(w))
		}
		return views.WriteJSON(e.stdout, out)
	}
	if len(snap.Workers) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No workers in the state"+noStateHint(snap.Lineage != "", path)+".")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "ID\tPOOL\tLABELS\tSTATUS\tHOST\tPID\tLAST HEARTBEAT\tLEASES")
	for _, w := range snap.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", w.ID, w.Pool, views.FormatLabels(w.Labels), w.Status, views.OrDash(views.Printable(w.Host)), w.PID, views.FormatTime(w.LastHeartbeatAt), w.LeasesHeld)
	}
	return tw.Flush()
}

func newWorkerJSON(w state.Worker) workerJSON {
	labels := w.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return workerJSON{ID: w.ID, Pool: w.Pool, Labels: labels, Capacity: w.Capacity, Status: string(w.Status),
		Host: w.Host, PID: w.PID, Version: w.Version, RegisteredAt: views.JSONTime(w.RegisteredAt), LastHeartbeatAt: views.JSONTime(w.LastHeartbeatAt),
		HeartbeatInterval: w.HeartbeatInterval.Seconds(), TTL: w.TTL.Seconds(), LeasesHeld: w.LeasesHeld,
		ApplyID: w.ApplyID, LaunchSeq: w.LaunchSeq, JoinTokenID: w.JoinTokenID}
}
