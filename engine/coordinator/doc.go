// Package coordinator is the lease server of a running apply: the only
// writer of lease state while the apply runs. It keeps the apply's tasks,
// pools, workers, credentials and active leases in memory, in step with
// the state; grants fenced leases to claims, renews them on heartbeats,
// accepts results only from the current lease holder, sweeps expired
// leases and silent workers, retries, judges the recommendations of
// accepted results against the configuration's edges, counts its metrics,
// and keeps what apply's supervisor needs to see (PoolView). README.md
// draws its pipeline.
//
// Its operations (Register, Heartbeat, Claim, Result, …) take and return
// protocol values and refuse with *Error, a code and reason of the
// protocol; they know nothing of HTTP. Writes go through the state's group
// commit (state.Store.Write); each write's after function updates memory
// in commit order and queues the write's events, which one goroutine
// delivers, in order, to Options.OnEvent (events.go).
//
// It does not own the HTTP face (routes, bearer parsing, decoding,
// streaming, statuses: package httpapi), the SQL and the settlement of
// attempts (package state), where it listens, the launching of workers and
// the supervisor's loop (apply, in package engine), or the supervisor's
// decision (package supervise).
package coordinator
