package main

import (
	"fmt"

	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/providers"
)

// ValidateCmd checks the configuration and its test files. It never
// opens the state.
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
	// The test files (wdc test's) too: their syntax and the names they
	// use.
	tests, tdiags := wdchcl.LoadTestFiles(e.displayDir())
	for _, tf := range tests {
		tdiags = append(tdiags, wdchcl.CheckTestFile(tf, cfg, providers.Schemas())...)
	}
	e.printDiagFiles(testFileMap(tests), tdiags)
	if tdiags.HasErrors() {
		return errExit{1}
	}
	extra := ""
	if n := len(cfg.ProposedTasks); n > 0 {
		extra += ", " + plural.Count(n, "proposed task", "proposed tasks")
	}
	if n := len(cfg.Edges); n > 0 {
		extra += ", " + plural.Count(n, "edge", "edges")
	}
	if n := len(tests); n > 0 {
		runs := 0
		for _, tf := range tests {
			runs += len(tf.Runs)
		}
		extra += fmt.Sprintf(", %s (%s)", plural.Count(n, "test file", "test files"), plural.Count(runs, "run", "runs"))
	}
	_, err = fmt.Fprintf(e.stdout, "Success! The configuration is valid: %s, %s%s.\n",
		plural.Count(len(cfg.Pools), "pool", "pools"), plural.Count(len(cfg.Tasks), "task", "tasks"), extra)
	return err
}
