// Package plan computes what an apply would change, as a pure value:
// New(cfg, snapshot, now, options) reads nothing but its arguments and
// writes nothing, so `wdc plan` can never change the state
// (docs/design.md §3 invariant 8).
//
// # What it owns, and what it does not
//
// It owns the plan's model — Action, TaskChange, PoolChange, Plan and its
// Summary — and how one is computed: each configured task's change and its
// reason (taskChange), the runs of approved proposals, cancellations of
// tasks no longer configured, the sizing of every pool (WorkersFor), the
// canonical definitions and their hashes (Definitions), and the checks
// that need no state: placement that no pool can satisfy, contradictory
// coordinator settings (Validate), cluster writes a pool did not allow
// (ClusterWriteDiags), and the launch preview each provider renders
// (PreviewLaunches).
//
// It does not carry a plan out (package apply records and runs it), read
// or write the state file (it is given a state.Snapshot), or render a plan
// for people or machines (the CLI's views do). Placement matching itself
// is package placement; the coordinator's task runtimes are package
// coordinator's.
package plan
