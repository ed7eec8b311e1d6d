package main

import (
	"fmt"

	"github.com/wdc-dev/wdc/agent/confine"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// unconfinedNote is what plan, apply and doctor say when the local pools of
// cfg will run their tasks unconfined because this machine cannot confine
// them (confine.Probe), or "" when they will be confined or there are none.
// Pools that said confine = false are shown by the plan itself.
func unconfinedNote(cfg *wdchcl.Config) string {
	var local []string
	for _, p := range cfg.Pools {
		if p.Provider == "local" && !p.Unconfined {
			local = append(local, p.Name)
		}
	}
	st := confine.Probe()
	if len(local) == 0 || st.Confined {
		return ""
	}
	return fmt.Sprintf("the tasks of local pools will not be confined on this machine: %s", st.Missing)
}

// warnUnconfined prints unconfinedNote, if any, as a warning on stderr.
func (e *env) warnUnconfined(cfg *wdchcl.Config) {
	if note := unconfinedNote(cfg); note != "" {
		fmt.Fprintf(e.stderr, "Warning: %s.\n", note)
	}
}
