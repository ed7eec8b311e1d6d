// Package wdctest runs a configuration's test files: `wdc test`, as
// Terraform's `terraform test` runs its run blocks.
//
// # What it owns, and what it does not
//
// Run takes the test files (parsed by package hcl: hcl.LoadTestFiles) and
// carries out each run block in order, each on its own: it copies the
// configuration directory into a temporary folder (so tasks that write
// into it never touch the user's checkout), loads the copy with the run's
// variables and pool overrides (hcl.Inputs.TestVariables,
// hcl.Inputs.PoolProviders), and then plans (command = plan: package plan,
// against an empty state) or applies (command = apply: an apply.Operation
// on a fresh state file in a temporary work folder, listening on loopback,
// whatever the configuration's wdc block says of its state, backend or
// listen address). The user's own state is never opened.
//
// After the run it observes what happened — the state's tasks, attempts,
// workers, outputs and proposals, the launches apply reported and the
// plan (an Observed) — and evaluates each assertion's condition in an
// hcl.EvalContext built from it (Assert, EvalContext): task.NAME / task.NAME[i]
// with status, attempts, lost, failed, outputs, pool and action;
// pool.NAME.launched; plan.changes and plan.exit_code; proposals; var.NAME.
// An assertion that is not true is a Failure that carries its condition's range, its
// error message and the value of every reference its condition makes.
//
// It does not parse test files (package hcl), plan or apply by itself
// (packages plan and apply), or render results: the CLI prints the lines,
// the JUnit file and the JSON document from the Result it returns, and
// is told as runs start and end through a View.
package wdctest
