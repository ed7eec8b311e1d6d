package plan

import (
	"fmt"
	"strings"

	"github.com/wdc-dev/wdc/agent/confine"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/folder"
	"github.com/wdc-dev/wdc/internal/plural"
)

// Confinement is what this machine gives the attempts of cfg's local pools
// (confine.Probe), as plan, apply and doctor say it.
type Confinement struct {
	// Unconfined says which tasks will run unconfined and why, in one
	// sentence: all of them, when this machine cannot confine; those whose
	// dir holds the work folder, when it confines by Landlock rules alone
	// (no mount namespace to hide the work folder by). "" when every task
	// of a local pool will be confined, or there is no local pool (pools
	// that say confine = false are shown by the plan itself).
	Unconfined string
	// Fix says what to do about Unconfined; "" when nothing can be done
	// from the configuration.
	Fix string
	// Limits is confine.Status.Limits when local pools will confine (what
	// a confined attempt cannot do here); "" otherwise.
	Limits string
	// Mechanism is confine.Status.Mechanism, or "" when nothing confines.
	Mechanism string
}

// ConfinementOf judges cfg's local pools on this machine, with workDir the
// work folder of the state (the state file's folder).
func ConfinementOf(cfg *wdchcl.Config, workDir string) Confinement {
	local := false
	for _, p := range cfg.Pools {
		local = local || (p.Provider == "local" && !p.Unconfined)
	}
	st := confine.Probe()
	switch {
	case !local:
		return Confinement{}
	case !st.Confined:
		return Confinement{Unconfined: "the tasks of local pools will not be confined on this machine: " + st.Missing}
	}
	c := Confinement{Mechanism: st.Mechanism, Limits: st.Limits}
	if st.Limits == "" {
		return c
	}
	var held []string
	for _, t := range cfg.Tasks {
		if dir := localDir(cfg, t); dir != "" && folder.Holds(dir, workDir) {
			held = append(held, t.Address())
		}
	}
	if len(held) == 0 {
		return c
	}
	shown := held[:min(len(held), 3)]
	more := ""
	if len(held) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(held)-len(shown))
	}
	c.Unconfined = fmt.Sprintf("%s (%s%s) will not be confined on this machine: %s the work folder %s, "+
		"and without a mount namespace (this process lacks CAP_SYS_ADMIN) Landlock rules cannot hide a folder below one a task writes in",
		plural.Count(len(held), "task", "tasks"), strings.Join(shown, ", "), more, plural.Word(len(held), "its dir holds", "their dirs hold"), workDir)
	c.Fix = "Keep the state outside the tasks' dirs (--state or WDC_STATE, e.g. /var/lib/wdc/state.db), or run apply as root with CAP_SYS_ADMIN: a mount namespace hides the work folder wherever it is"
	return c
}

// localDir is the folder t's command runs in on a local worker, or "" for
// its attempt's own folder.
func localDir(cfg *wdchcl.Config, t *wdchcl.Task) string {
	switch {
	case t.DirSet:
		return t.Dir
	case len(t.Inputs) > 0 || len(t.Outputs) > 0 || len(t.Mounts) > 0:
		return ""
	}
	return cfg.Dir
}
