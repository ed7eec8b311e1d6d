// Package supervise is the pool supervisor's decision: every tick apply
// observes each pool (Observation: its queued and unfinished tasks, its
// idle, busy, draining and pending workers, its bounds), asks Decide for
// one step (launch, drain one idle worker, or hold) and carries it out.
//
// It owns the decision only, a pure function of the counts, so it is
// tested as a table and with properties, and every step it takes is
// explained, in its Reason, by the counts it saw. It does not own the
// observing (apply reads the coordinator's PoolView) or the acting
// (apply launches through providers and drains through the coordinator),
// and it reads no clock: the idle delay is applied by whoever counts
// Drainable.
package supervise
