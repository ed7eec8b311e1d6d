// Command wdc runs work on pools of workers with fenced task leases, driven
// by a declarative plan/apply workflow. See the README and docs/ for the
// configuration language and the commands.
//
// This package owns the command line only: kong command structs (one file
// per command, *_cmd.go), the resolution of settings (flag > environment >
// wdc block > default), and the tables and documents of the commands that
// have no view of their own yet (workers, leases, proposals, status,
// doctor, providers, the state). A command parses its flags, calls the
// engine and hands what comes back to a view: the text plan, apply's
// progress and NDJSON lines, `tasks show` and the demo are rendered by
// cmd/internal/views; the plan document is cmd/internal/jsonplan's, the
// saved plan file cmd/internal/planfile's. Decisions live in engine,
// configuration in hcl, SQL in state. The agent and version commands are
// cmd/internal/agentcli's, which wdc-agent (cmd/wdc-agent, the worker
// alone) is made of too.
package main
