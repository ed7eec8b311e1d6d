// Package views renders what wdc's commands have to say, for people and for
// machines; the commands in cmd/wdc parse flags, call the engine and hand
// what comes back to a view.
//
// It owns:
//   - the text plan (PlanText), in the Terraform-like grammar of
//     docs/design.md §6, colored on a terminal;
//   - apply's report (Apply): live progress, one line per event, the
//     summary line for people (ApplyText), and the NDJSON lines of `wdc
//     apply --json` (ApplyJSON);
//   - the task detail of `wdc tasks show`, as text and as JSON
//     (TaskDetail), and the task and artifact entries the listings and
//     the state document share (TaskJSON, ArtifactJSON);
//   - the worker-leases demo, as text (DemoText) and as its JSON document
//     (DemoDoc);
//   - the formatting every command's output shares: indented JSON
//     documents (WriteJSON), column tables (NewTable), times (FormatTime,
//     JSONTime), labels, HCL literals and one-line texts.
//
// It does not own the plan document's types or how a plan becomes one
// (package jsonplan), the saved plan file (package planfile), nor what is
// rendered: it reads no state, configuration or file and decides nothing.
// The JSON documents' shapes are a contract (docs/json.md, docs/schema).
// Other commands' tables and documents (workers, leases, proposals, status,
// doctor, providers, the state document) are still written by cmd/wdc, with
// this package's helpers.
package views
