// Package engine is the home of what decides and carries out; it holds no
// code of its own, only its subsystems, one package each:
//
//   - engine/plan: the pure plan, New(config, snapshot, now, options) →
//     changes and diagnostics, with placement checks, validation and the
//     launch preview;
//   - engine/apply: the apply operation (Operation: lock, takeover,
//     reclaim, recovery, plan, confirm) and the run that carries a plan
//     out (Run: record, serve the coordinator, launch, supervise, drain),
//     observe → decide → act on one clock;
//   - engine/coordinator: the lease server — memory, grant, heartbeat,
//     sweep, accept, the judge of recommendations — whose operations
//     return domain errors; engine/coordinator/httpapi is its HTTP face
//     (routes, authentication, decoding, streaming, the listener);
//   - engine/supervise: the pool supervisor's pure decision;
//   - engine/placement: claim-side label matching;
//   - engine/doctor: status and doctor checks of a state file;
//   - engine/operator: what an operator asks of a state (gc, join tokens,
//     approve and reject), written locally or through the running apply;
//   - engine/wdctest: `wdc test`, the runs of a configuration's test
//     files, each a plan or an apply operation on a copy of the
//     configuration with a fresh state, and their assertions.
//
// Dependencies flow one way: cmd → engine/wdctest → engine/apply,
// engine/doctor, engine/operator → engine/plan → engine/coordinator/httpapi →
// engine/coordinator → engine/supervise, engine/placement, and all of them
// → (hcl, state, providers, protocol, artifact). docs/design.md draws it.
package engine
