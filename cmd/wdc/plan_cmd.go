package main

import (
	"context"

	"github.com/wdc-dev/wdc/engine"
)

// PlanCmd computes and prints a plan. It opens the state read-only and
// never creates it (DESIGN §3 invariant 8).
type PlanCmd struct {
	Replace          []string `name:"replace" sep:"none" placeholder:"ADDR" help:"Run this succeeded task again, and the tasks downstream of it (repeatable; task.NAME, task.NAME[INDEX] or NAME)."`
	DetailedExitcode bool     `name:"detailed-exitcode" help:"Exit 0 when there are no changes, 2 when there are changes, 1 on error."`
}

// Run prints the plan. Exit codes: 0 success, 1 error, and with
// --detailed-exitcode 0 for no changes and 2 for changes.
func (c *PlanCmd) Run(e *env) error {
	ctx := context.Background()
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	path, err := e.statePath(cfg)
	if err != nil {
		return err
	}
	snap, err := readSnapshot(ctx, path)
	if err != nil {
		return err
	}
	plan, diags := engine.NewPlan(cfg, snap, e.now(), engine.PlanOptions{Replace: c.Replace})
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	if err := renderPlan(e.stdout, plan, e.color(e.stdout)); err != nil {
		return err
	}
	if c.DetailedExitcode && plan.HasChanges() {
		return errExit{2}
	}
	return nil
}
