package main

import (
	"context"
	"fmt"

	"github.com/wdc-dev/wdc/state"
)

// ForceUnlockCmd removes the apply lock by hand, for a lock whose holder is
// gone on another host (a dead holder on this host is taken over
// automatically).
type ForceUnlockCmd struct {
	ID string `arg:"" name:"id" help:"The lock ID, as the locked-state error prints it."`
}

// Run removes the lock if its ID matches. Errors: no lock, or another ID.
func (c *ForceUnlockCmd) Run(e *env) error {
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	ctx := context.Background()
	st, err := state.Open(ctx, path)
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := st.ForceUnlock(ctx, c.ID, e.now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "Removed the state lock %s held by %s (host %s, pid %d) since %s.\n",
		l.ID, l.Holder, l.Host, l.PID, formatTime(l.StartedAt))
	return err
}
