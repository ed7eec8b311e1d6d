// Package engine decides and carries out: it turns a decoded configuration
// (package hcl) and a state snapshot (package state) into a plan, checks
// placement, and applies a plan: it records it, serves the lease
// coordinator (package coordinator, over package httpapi), launches
// workers through providers and supervises pools (package supervise).
//
// Planning is a pure function: NewPlan(cfg, snapshot, now, opts) reads
// nothing but its arguments and writes nothing, so `wdc plan` can never
// change the state (docs/design.md §3 invariant 8). Rendering a plan for people or
// machines belongs to the CLI (cmd/wdc), not here.
//
// Placement is claim-side label matching (package placement): a worker may
// run a task when its pool's labels contain every label the task's
// placement asks for, with the same value. There is no central
// bin-packing; for sizing only, each task counts toward the first pool, in
// declaration order, that can run it.
//
// Doctor checks a state file and what it records (a dead apply's lock and
// leftovers, stale workers holding leases, queued tasks no live worker can
// run) without writing anything; `wdc doctor` renders its report.
package engine
