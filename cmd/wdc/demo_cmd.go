package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/demo"
)

// DemoCmd groups the demonstrations: stories that run wdc's own code on a
// state of their own and check what they show.
type DemoCmd struct {
	WorkerLeases DemoWorkerLeasesCmd `cmd:"" name:"worker-leases" help:"Show fenced leases step by step: two workers, one task, an expired lease and a stale result, on a temporary state with a fake clock. Exits 1 if an invariant did not hold."`
}

// DemoWorkerLeasesCmd runs the worker-leases story (package demo) and
// prints it. It never reads the configuration directory or its state.
type DemoWorkerLeasesCmd struct {
	JSON      bool   `name:"json" help:"Print the story as one JSON document: steps with their state and checks (docs/json.md)."`
	KeepState string `name:"keep-state" placeholder:"DIR" predictor:"dir" help:"Run in DIR (new or empty) instead of a temporary folder, and keep its configuration and state there (inspect it with wdc --chdir DIR tasks show build)."`
}

// Run plays the story and prints each step with the state it produced and
// its checks. Exit codes: 0 when every check held, 1 when one did not, the
// story could not go on, or it could not be set up (an error).
func (c *DemoWorkerLeasesCmd) Run(e *env) error {
	dir := c.KeepState
	if dir != "" && !filepath.IsAbs(dir) && e.flags.Chdir != "" {
		base, err := e.configDir()
		if err != nil {
			return err
		}
		dir = resolve(base, dir)
	}
	report, err := demo.WorkerLeases(context.Background(), demo.Options{Dir: dir, Version: Version})
	if err != nil {
		return err
	}
	if c.JSON {
		err = views.WriteJSON(e.stdout, views.NewDemoDoc(report))
	} else {
		err = views.DemoText(e.stdout, report)
	}
	if err != nil {
		return err
	}
	if dir != "" {
		abs, _ := filepath.Abs(dir)
		fmt.Fprintf(e.stderr, "The demo's configuration and state are kept in %s: try wdc --chdir %s tasks show build, or leases list.\n", abs, abs)
	}
	if !report.OK() {
		return errExit{1}
	}
	return nil
}
