// Command wdc runs work on pools of workers with fenced task leases, driven
// by a declarative plan/apply workflow. See the README and docs/ for the
// configuration language and the commands.
//
// This package owns the command line only: kong command structs (one file
// per command, *_cmd.go), the resolution of settings (flag > environment >
// wdc block > default), and rendering for people and machines (plan text,
// JSON documents, tables, apply progress). Decisions live in engine,
// configuration in hcl, SQL in state. The agent and version commands are
// cmd/internal/agentcli's, which wdc-agent (cmd/wdc-agent, the worker
// alone) is made of too.
package main
