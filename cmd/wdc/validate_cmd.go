package main

import (
	"fmt"

	"github.com/wdc-dev/wdc/engine"
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
	diags := engine.Validate(cfg)
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	extra := ""
	if n := len(cfg.ProposedTasks); n > 0 {
		extra += ", " + count(n, "proposed task", "proposed tasks")
	}
	if n := len(cfg.Edges); n > 0 {
		extra += ", " + count(n, "edge", "edges")
	}
	_, err = fmt.Fprintf(e.stdout, "Success! The configuration is valid: %s, %s%s.\n",
		count(len(cfg.Pools), "pool", "pools"), count(len(cfg.Tasks), "task", "tasks"), extra)
	return err
}

// count renders "1 pool" or "3 pools".
func count(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
