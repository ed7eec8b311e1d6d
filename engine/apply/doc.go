// Package apply carries a plan out: `wdc apply` as an operation, as
// Terraform's local backend runs one.
//
// # What it owns, and what it does not
//
// Operation is one apply from the state file to the result: it opens and
// checks the state, takes the apply lock (AcquireLock; taking over a dead
// apply's, judged by JudgeHolder), refuses a saved plan whose state moved
// (CheckStateFresh), stops what an earlier apply left running
// (ReclaimStrays) and recovers its leases (RecoverState), plans (package
// plan) or takes the saved plan, asks for confirmation, and runs the plan.
// It tells an OperationView what happens and writes to no terminal.
//
// Run carries a plan out under the lock: it records the plan's pools and
// tasks (RecordPlan), stores their input files, serves a coordinator
// (package coordinator, over httpapi), then loops — observe, decide
// (decidePool, a pure function; the supervisor's supervise.Decide), act —
// launching workers through providers (the launcher), replacing workers it
// loses while their pool has work, failing pools whose workers never come,
// until every task is finished; then it takes the shutdown ladder (drain,
// stop, kill) and settles the leases left. Every decision reads one clock,
// Options.Now; the lock alone runs on the wall clock.
//
// It does not decide what to change (package plan), grant leases or judge
// results (package coordinator), decide pool sizes (package supervise),
// know how a provider launches (package providers), or write SQL (package
// state). Rendering is the CLI's.
package apply
