// Package procgroup owns the process groups of attempts on a worker's
// machine: the record an agent keeps of each running attempt's group in its
// work folder (<work>/groups/<agent pid>.<pgid>, an empty file that lives as
// long as the attempt), the listing of the groups whose agent is gone, and
// the signals that end a group (SIGTERM, a grace period, SIGKILL).
//
// It is what the agent (which records and ends its attempts' groups) and
// the local provider (which kills what a dead agent left running, and lists
// it for `wdc doctor`) share, so that neither imports the other: the local
// provider links this package, not the worker runtime.
//
// It does not own starting processes or deciding when a group must end
// (package agent does), nor which environment variables a process may
// inherit (protocol.IsSecretEnv names the credentials, next to the wire
// names of those variables).
package procgroup
