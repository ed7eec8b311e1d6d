// Package local is the "local" provider: it runs each worker as a process
// on this machine,
//
//	<wdc> agent --server URL --pool NAME --work-dir DIR [--ca-sha256 HEX] [--drain-timeout D]
//
// with its one-time launch credential only in its environment
// (WDC_LAUNCH_CREDENTIAL), in its
// own process group, stdin /dev/null, and stdout and stderr appended to the
// worker's log file — never the caller's terminal or pipes, so neither a
// test harness nor a terminal hangs on a worker and Ctrl-C in the caller's
// terminal does not reach workers (apply stops them itself). Before it
// starts the agent, Launch writes and syncs a first line naming the launch
// into the log, so a log that cannot be written (a full disk) fails the
// launch at once with the cause instead of starting a worker that never
// registers. The provider reaps the processes it launched, so Status
// reports their exit codes.
//
// A pool's local { } block (Schema) holds env, extra environment for its
// workers; it decodes into *Settings, which Launch and RenderLaunch read
// from the request.
//
// RenderLaunch shows what Launch would start, starting nothing: the command
// line and the names (not the values) of the environment variables it
// sets. The local provider has nothing to dry-run a launch against, so it
// is no providers.DryRunner, and it writes to no cluster (its Info).
//
// Reclaim stops what a dead apply left on this host (by its launch
// records, and the groups/ records of attempts whose agent is gone);
// FindLeftovers lists the same without stopping anything (`wdc doctor`).
//
// Stop without Kill sends SIGTERM to the agent, which drains: it stops
// claiming, gives its attempts up to its drain timeout, posts their results
// and exits 0. Stop with Kill sends SIGKILL to the agent's process group;
// the agent's attempts, each in its own process group, are direct children
// of the agent that get SIGKILL when it dies (Linux parent-death signal).
//
// IDs are "pid:<pid>". A provider instance that did not launch a worker
// (a later apply) can still Stop it and ask its Status by pid, but cannot
// know its exit code, and a reused pid can fool it.
package local
