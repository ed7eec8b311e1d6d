package main

import (
	"context"
	"fmt"
	"os"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/planfile"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/internal/plural"
)

// PlanCmd computes and prints a plan. It opens the state read-only and
// never creates it (docs/design.md §3 invariant 8); with a backend it
// reads a copy pulled from the store.
type PlanCmd struct {
	Replace          []string `name:"replace" sep:"none" placeholder:"ADDR" predictor:"address" help:"Run this succeeded task again, and the tasks downstream of it (repeatable; task.NAME, task.NAME[INDEX] or NAME)."`
	DetailedExitcode bool     `name:"detailed-exitcode" help:"Exit 0 when there are no changes, 2 when there are changes, 1 on error."`
	Out              string   `name:"out" placeholder:"FILE" predictor:"file" help:"Also save the plan to FILE (relative to the configuration directory), for wdc apply FILE to carry out exactly (refused if the state, configuration or variables change in between)."`
	JSON             bool     `name:"json" help:"Print the plan as one JSON document (docs/json.md) instead of text."`
	NoClusterCheck   bool     `name:"no-cluster-check" help:"Do not submit the rendered launches of cluster pools (kubernetes) to their cluster with a server-side dry run (for a plan without cluster credentials)."`
}

// Run prints the plan. Exit codes: 0 success, 1 error, and with
// --detailed-exitcode 0 for no changes and 2 for changes.
func (c *PlanCmd) Run(e *env) error {
	ctx := context.Background()
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	// With a backend, a copy pulled from it (the plan reads; it never
	// writes, nor takes the lock).
	path, backendRef, backendLock, err := e.planningState(ctx, cfg)
	if err != nil {
		return err
	}
	snap, err := readCheckedSnapshot(ctx, path)
	if err != nil {
		return err
	}
	if backendLock != nil {
		snap.Lock = backendLock
	}
	if l := snap.Lock; l != nil && l.ExpiresAt.After(e.now()) {
		if host, _ := os.Hostname(); l.Host == host && !apply.ProcessAlive(l.PID) {
			fmt.Fprintf(e.stderr, "Warning: the state lock is held by an apply that is gone (%s, host %s, pid %d, since %s): "+
				"the next wdc apply takes it over and retries what it left running.\n", l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt))
		} else {
			fmt.Fprintf(e.stderr, "Warning: an apply is running (lock held by %s, host %s, pid %d, since %s): "+
				"the tasks it runs show as retries here; plan again when it has finished.\n",
				l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt))
		}
	}
	if n := unjudgedRecommendations(ctx, path); n > 0 {
		fmt.Fprintf(e.stderr, "Note: %s of accepted results %s not judged yet (an apply stopped before it judged them): "+
			"the next apply judges them first, and runs what their edges approve by themselves.\n",
			plural.Count(n, "recommendation", "recommendations"), map[bool]string{true: "is", false: "are"}[n == 1])
	}
	e.warnUnconfined(cfg, path)
	planned, diags := plan.New(cfg, snap, e.now(), plan.Options{Replace: c.Replace})
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	// After the plan, which is a pure computation: what the launches of
	// cluster pools would create, and whether their cluster accepts it
	// (a dry run creates nothing).
	previews, pdiags := plan.PreviewLaunches(ctx, cfg, planned, plan.PreviewOptions{ClusterCheck: !c.NoClusterCheck})
	e.printDiags(cfg, pdiags)
	if pdiags.HasErrors() {
		return errExit{1}
	}
	doc, err := jsonplan.New(cfg, planned, c.Replace, Version)
	if err != nil {
		return err
	}
	doc.AddLaunchPreviews(previews)
	doc.State.Backend = backendRef
	if c.Out != "" {
		dir, err := e.configDir()
		if err != nil {
			return err
		}
		if err := planfile.Write(resolve(dir, c.Out), doc); err != nil {
			return err
		}
	}
	if c.JSON {
		if err := views.WriteJSON(e.stdout, doc); err != nil {
			return err
		}
	} else {
		if err := views.PlanText(e.stdout, doc, e.color(e.stdout)); err != nil {
			return err
		}
		if c.Out != "" {
			fmt.Fprintf(e.stdout, "\nSaved the plan to %s. To carry out exactly these actions, run:\n  wdc apply %s\n", c.Out, c.Out)
		}
	}
	if c.DetailedExitcode && planned.HasChanges() {
		return errExit{2}
	}
	return nil
}
