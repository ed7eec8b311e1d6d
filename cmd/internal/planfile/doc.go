// Package planfile is the saved plan file: what `wdc plan --out FILE`
// writes and `wdc apply FILE` and `wdc show FILE` read. Its bytes are the
// plan document of package jsonplan, indented, with a final newline
// (docs/json.md says so: the file and `wdc plan --json` are one document).
//
// It owns: writing the file atomically and synced to disk (Write), reading
// it with its format version checked (Read), refusing a plan that went
// stale against the configuration and variable values at hand or was made
// by another wdc (CheckFresh), and rebuilding from it the engine Plan that
// apply carries out, with every recorded definition hash checked against
// the configuration (Rebuild).
//
// It does not own the document's types, its format version or the hashes
// that record what a plan was computed from (package jsonplan), nor the
// check against the state's lineage and serial, which needs the state
// under the apply's lock (package engine does it).
package planfile
