// Package jsonplan is the plan document: what `wdc plan --json`, `wdc show
// FILE --json` and the "plan" line of `wdc apply --json` print, and, byte
// for byte, what a saved plan file holds (docs/json.md,
// docs/schema/plan.schema.json).
//
// It owns: the document's types and format version (FormatVersion), how an
// engine Plan and the configuration it was computed from become one (New,
// AddLaunchPreviews), the hashes that record what the plan was computed
// from (ConfigHash over the configuration files, VariablesHash over the
// variable values, salted, and SensitiveVariables, the keyed hashes of the
// sensitive ones), and how sensitive variable values are hidden,
// as "(sensitive)" (Sensitive, Redactor), wherever the CLI shows what the
// configuration holds.
//
// It does not own the plan (package engine computes it), the saved file
// (package planfile writes, reads and checks it, and rebuilds an engine Plan
// from it), nor the text a person reads (package views renders the document
// as text).
package jsonplan
