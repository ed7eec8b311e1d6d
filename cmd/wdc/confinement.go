package main

import (
	"fmt"
	"path/filepath"

	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// warnUnconfined prints, as a warning on stderr, which tasks of cfg's
// local pools will run unconfined on this machine and what to do
// (plan.ConfinementOf), if any; statePath's folder is the work folder.
func (e *env) warnUnconfined(cfg *wdchcl.Config, statePath string) {
	c := plan.ConfinementOf(cfg, filepath.Dir(statePath))
	switch {
	case c.Unconfined == "":
	case c.Fix == "":
		fmt.Fprintf(e.stderr, "Warning: %s.\n", c.Unconfined)
	default:
		fmt.Fprintf(e.stderr, "Warning: %s. %s.\n", c.Unconfined, c.Fix)
	}
}
