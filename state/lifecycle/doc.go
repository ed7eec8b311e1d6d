// Package lifecycle decides what the end of an attempt means for its task:
// whether it is retried, which budget the attempt spent, when the retry may
// start, whether the task fails for good, whether its dependants are queued
// or cancelled, and the words that say so.
//
// # What it owns, and what it does not
//
// It owns the rules of docs/design.md §2's failure classes: a failure
// spends one of the task's max_attempts, a lost attempt one of its
// max_lost, a refused attempt fails the task at once; a failure's retry
// waits the task's backoff, doubling with each failure up to max_backoff,
// while a lost attempt runs again at once. It owns the texts that record
// the decision (the task's event, its last error, the retry directive's
// reason, the reason a dependant is cancelled or queued); scripts and
// tests compare them, so they change only on purpose.
//
// Decide is a pure function of the facts it is given (the task's retry
// settings, the budgets spent so far, how the attempt ended, now): it
// reads no clock, no state and no configuration. It knows nothing of SQL:
// package state reads the facts in the transaction that ends the attempt,
// asks Decide, and writes the decision (the task's row, the retry
// directive, the dependants, the events) in that same transaction. Which
// dependants are ready or still cancellable is the state's to find out;
// the decision only says whether to look.
//
// It imports nothing of wdc, so state (and anything above it) may import
// it.
package lifecycle
