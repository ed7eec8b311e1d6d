package main

import (
	"context"
	"fmt"
	"os"

	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"

	"github.com/wdc-dev/wdc/state"
)

// ForceUnlockCmd removes the apply lock by hand, for a lock whose holder is
// gone on another host (a dead holder on this host is taken over
// automatically). A holder alive on this host is refused without --force.
type ForceUnlockCmd struct {
	ID    string `arg:"" name:"id" help:"The lock ID, as the locked-state error prints it."`
	Force bool   `name:"force" help:"Remove the lock even though the apply holding it runs on this host (it stops at its next renewal); without it, such a lock is refused."`
}

// Run removes the lock if its ID matches. Errors: no lock, another ID, or
// (without --force) a holder alive on this host.
func (c *ForceUnlockCmd) Run(e *env) error {
	b, err := e.stateBackend(e.quietConfig())
	if err != nil {
		return err
	}
	if b != nil {
		return c.unlockBackend(e, b)
	}
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
	host, _ := os.Hostname()
	l, err := apply.ForceUnlock(ctx, st, c.ID, host, c.Force, e.now(), nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "Removed the state lock %s held by %s (host %s, pid %d) since %s.\n",
		l.ID, l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt))
	return err
}

// unlockBackend marks the backend's lock released, with the same check
// of a holder alive on this host; the holder finds out at its next
// renewal and stops.
func (c *ForceUnlockCmd) unlockBackend(e *env, b *backend.S3) error {
	ctx := context.Background()
	holder, host, _ := lockHolder(e)
	l, err := b.ForceUnlock(ctx, c.ID, holder, func(l backend.Lock) error {
		if !c.Force && l.Host == host && apply.ProcessAlive(l.PID) {
			return &apply.HolderAliveError{Lock: *asStateLock(l)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "Removed the lock %s of backend %s held by %s (host %s, pid %d) since %s.\n",
		l.ID, b.Name(), l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt))
	return err
}
