// Package demo holds wdc's demonstrations: self-contained stories that
// run the product's own code on a state of their own and check, step by
// step, the invariants they show (docs/design.md §3).
//
// # What it owns, and what it does not
//
// WorkerLeases is the story behind `wdc demo worker-leases`: two workers,
// one task, a lease that expires and is fenced. It owns only the script —
// the order of the steps, the fake clock that drives them, and the checks
// it makes on what the state records after each one. Everything that
// decides is apply's: the configuration is loaded by package hcl and
// planned by plan.New, recorded by apply.RecordPlan (apply's own
// recording), served by a coordinator.Coordinator on the listener httpapi.Listen
// opens (HTTP on 127.0.0.1, a free port), and the demo's two workers call
// it over worker protocol v1 with protocol.Client, registering with launch
// credentials from Coordinator.IssueLaunch as launched workers do. The
// sweep is Coordinator.Sweep, the pass apply's coordinator runs every
// 500 ms, called here at chosen moments of the fake clock.
//
// Each step reads its state back from the state store (state.Store), never
// from the demo's own variables, so a check fails when the product does
// something other than the story says. Rendering the report for people or
// machines belongs to the CLI (cmd/wdc).
package demo
