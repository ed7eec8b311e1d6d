package main

import (
	"context"
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// LeasesListCmd lists the leases recorded in the state.
type LeasesListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

type leaseJSON struct {
	FencingToken  int64      `json:"fencing_token"`
	Task          string     `json:"task"`
	Attempt       int        `json:"attempt"`
	WorkerID      string     `json:"worker_id"`
	DefHash       string     `json:"def_hash"`
	Status        string     `json:"status"`
	GrantedAt     *time.Time `json:"granted_at,omitempty"`
	RenewedAt     *time.Time `json:"renewed_at,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	HardExpiresAt *time.Time `json:"hard_expires_at,omitempty"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
	// Unstarted: a prefetched lease whose attempt has not started (1.10).
	Unstarted bool `json:"unstarted,omitempty"`
}

// Run prints one row per lease ever granted (every status), by fencing token: task, attempt, worker,
// status, grant time and expiry.
func (c *LeasesListCmd) Run(e *env) error {
	leases, path, exists, err := e.readLeases()
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]leaseJSON, 0, len(leases))
		for _, l := range leases {
			out = append(out, newLeaseJSON(l))
		}
		return views.WriteJSON(e.stdout, out)
	}
	if len(leases) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No leases in the state"+noStateHint(exists, path)+".")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "TOKEN\tTASK\tATTEMPT\tWORKER\tSTATUS\tDEF_HASH\tGRANTED\tEXPIRES")
	for _, l := range leases {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.Token, l.Task, l.Attempt, l.WorkerID, l.Status, protocol.ShortHash(l.DefHash), views.FormatTime(l.GrantedAt), views.FormatTime(l.ExpiresAt))
	}
	return tw.Flush()
}

// readLeases returns every lease in the state, of every status, by fencing
// token, the state's path, and whether the file exists (an absent state
// file has no leases).
func (e *env) readLeases() (leases []state.Lease, path string, exists bool, err error) {
	if path, err = e.statePathForReading(); err != nil {
		return nil, "", false, err
	}
	ctx := context.Background()
	st, err := openForReading(ctx, path)
	if err != nil || st == nil {
		return nil, path, false, err
	}
	defer st.Close()
	leases, err = st.Leases(ctx, "")
	return leases, path, true, err
}

func newLeaseJSON(l state.Lease) leaseJSON {
	return leaseJSON{FencingToken: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: l.WorkerID, DefHash: l.DefHash,
		Status: string(l.Status), GrantedAt: views.JSONTime(l.GrantedAt), RenewedAt: views.JSONTime(l.RenewedAt), ExpiresAt: views.JSONTime(l.ExpiresAt),
		HardExpiresAt: views.JSONTime(l.HardExpiresAt), EndedAt: views.JSONTime(l.EndedAt), Unstarted: l.Unstarted}
}
