// Package doctor checks a state file and what it records without writing
// anything: the file itself (integrity, schema), a dead apply's lock and
// the unfinished tasks behind it, stale workers holding leases, leases
// with no apply, queued tasks no live worker can run, and what earlier
// applies left running (providers' FindLeftovers). Run returns a Report
// of Findings with stable check ids (Checks); `wdc doctor` renders it.
//
// It owns the checks and their words. Who is dead is apply's JudgeHolder,
// what was left running apply's FindLeftovers, placement the placement
// package's: doctor asks them, so doctor and apply judge alike.
package doctor
