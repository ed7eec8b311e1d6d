// Package statetest is test support for the state file: what tests and
// benchmarks run beside a state.Store, never part of wdc itself.
//
// # What it owns, and what it does not
//
// It owns RawClaimer, the bare claim transaction docs/sqlite.md measures
// the state file's limit with ("Throughput limits"), which BenchmarkClaim
// runs beside the coordinator to compare the two in one run. RawClaimer
// opens a connection of its own to a state file that a state.Store
// created and migrated, with the connection string the Store uses
// (state.DSN), and writes only what a bare claim writes.
//
// It does not own the schema, the migrations or any write wdc makes:
// those are package state's, and nothing here is called by wdc.
package statetest
