// Package agent is the worker runtime behind `wdc agent --server URL --pool
// NAME` and `wdc-agent agent …` (the same command, cmd/internal/agentcli):
// one process that registers with a coordinator, heartbeats, claims
// assignments and runs them as child processes. It speaks only worker
// protocol v1 through protocol.Client (docs/protocol.md) and never opens the
// state; the coordinator (package engine) decides everything about leases.
//
// It owns: the agent's loops, each attempt's files and environment, running
// and stopping its command, the failure class of how it ended, the result
// and its delivery (the spool), inputs and outputs. It does not own the
// command line (flags, credentials from a join file or the environment,
// signals: cmd/internal/agentcli), the wire types and the client (package
// protocol, which also names the credential variables kept from a task:
// protocol.IsSecretEnv), nor the records of its attempts' process groups
// and the signals that end a group (package agent/procgroup, which the
// local provider uses too). It imports nothing of the configuration
// language, the state, the engine or the providers, so wdc-agent stays small.
//
// A running agent has three kinds of goroutines:
//
//   - the heartbeat loop, on its own timer (never in the task loop),
//     reports the fencing tokens the worker holds, acts on "drain" and
//     "cancel_leases", and decides when the coordinator has been
//     unreachable for longer than the worker's ttl;
//   - the claim loop long-polls for up to (capacity − running) assignments;
//   - one goroutine per attempt runs the command and posts its result.
//
// Each attempt's command is a direct child of the agent in its own process
// group, with stdin /dev/null, stdout and stderr in
// <work>/logs/<task>/<attempt>/{stdout,stderr} (task.x[2] is task.x.2 there,
// with the address in logs/<task>/address), a fresh scratch folder
// <work>/scratch/<task>/<attempt>/, and the agent's environment minus the
// variables that hold credentials (protocol.IsSecretEnv) plus the task's env and WDC_TASK, WDC_ATTEMPT, WDC_WORKER_ID,
// WDC_FENCING_TOKEN and WDC_ATTEMPT_DIR. While it runs its group is recorded
// in <work>/groups/ (procgroup.Record; a confined command's before its
// program runs, since it has no parent-death signal), so that whoever sees the agent die
// kills what it left (procgroup.KillOrphans; an agent starting in the same
// work folder does so too). On timeout, cancellation or drain
// timeout the whole group gets SIGTERM, then SIGKILL after a grace period
// (procgroup.Terminate); when the command ends, whatever is left of its
// group gets SIGKILL. Once the attempt's result is accepted, what it left
// that holds nothing goes (tidyAttempt): its empty logs (named in the
// result as the empty blob, with no file), the log folders and address
// file they leave empty, and the scratch folder of an attempt that
// succeeded; a failed attempt's scratch folder stays unless it is empty.
//
// How an attempt ended maps to a failure class: exit 0 is success; a
// non-zero exit, a signal the command caused, or a timeout ("timed out after
// 1m0s") is "failure"; a command that cannot start (no command, not found,
// bad directory) is "refused"; an attempt the agent itself stopped (lease
// cancelled, drain timeout, agent shutting down) or could not set up (log or
// scratch folder) is "lost". The result is always posted, with an
// idempotency key "<worker>-<token>" and retries on network errors and 5xx
// answers, even for a lease the coordinator said is gone: it decides.
//
// The agent stops on a drain (Run's context cancelled, Drain called, or the
// coordinator asked): it stops claiming, gives running attempts up to the
// drain timeout, kills the rest, posts every result and returns nil. It
// fails — kills its attempts and returns an error — on a 401 (bad token), a
// 404 for its worker id, or when every call has failed for longer than the
// ttl, counted from the first failed call after the last success and not
// counting time the process was paused (SIGSTOP).
package agent
