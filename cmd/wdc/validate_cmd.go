package main

import (
	"fmt"

	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/internal/plural"
)

// ValidateCmd checks the configuration. It never opens the state.
type ValidateCmd struct{}

// Run loads and checks the configuration, printing every diagnostic with
// file:line:column and a snippet. It returns errExit{1} when any is an error.
func (c *ValidateCmd) Run(e *env) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	diags := plan.Validate(cfg)
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	extra := ""
	if n := len(cfg.ProposedTasks); n > 0 {
		extra += ", " + plural.Count(n, "proposed task", "proposed tasks")
	}
	if n := len(cfg.Edges); n > 0 {
		extra += ", " + plural.Count(n, "edge", "edges")
	}
	_, err = fmt.Fprintf(e.stdout, "Success! The configuration is valid: %s, %s%s.\n",
		plural.Count(len(cfg.Pools), "pool", "pools"), plural.Count(len(cfg.Tasks), "task", "tasks"), extra)
	return err
}
