package main

import (
	"testing"

	"github.com/wdc-dev/wdc/state"
)

// TestAttemptNumbered: --attempt N picks the attempt numbered N, not the
// Nth recorded: a prefetched lease handed back before its attempt started
// used a number and recorded no attempt, so numbers can have gaps.
func TestAttemptNumbered(t *testing.T) {
	t.Parallel()
	gap := []state.Attempt{{Number: 2}, {Number: 3}, {Number: 5}}
	for _, c := range []struct {
		name     string
		attempts []state.Attempt
		n        int
		want     int    // the attempt's number; 0 for an error
		err      string // the error's text
	}{
		{name: "first of a gapless history", attempts: []state.Attempt{{Number: 1}, {Number: 2}}, n: 1, want: 1},
		{name: "after a gap", attempts: gap, n: 3, want: 3},
		{name: "the last", attempts: gap, n: 5, want: 5},
		{name: "a number handed back", attempts: gap, n: 1, err: "task.x has no attempt 1; its attempts: 2, 3, 5"},
		{name: "past the last", attempts: gap, n: 6, err: "task.x has no attempt 6; its attempts: 2, 3, 5"},
		{name: "negative", attempts: gap, n: -1, err: "task.x has no attempt -1; its attempts: 2, 3, 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, err := attemptNumbered("task.x", c.attempts, c.n)
			switch {
			case c.err != "" && (err == nil || err.Error() != c.err):
				t.Errorf("error %v, want %q", err, c.err)
			case c.err == "" && (err != nil || a.Number != c.want):
				t.Errorf("attempt %d, %v; want attempt %d", a.Number, err, c.want)
			}
		})
	}
}

// TestRecoveredMessage: what apply says of the leases an earlier apply
// left tells lost attempts from prefetched leases that go back at no cost.
func TestRecoveredMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lost, unstarted int
		want            string
	}{
		{1, 0, "Revoked 1 lease left by an earlier apply; their tasks are retried as lost."},
		{3, 0, "Revoked 3 leases left by an earlier apply; their tasks are retried as lost."},
		{0, 1, "Revoked 1 lease left by an earlier apply: it was a prefetched lease whose start no worker reported, queued again at no cost."},
		{0, 2, "Revoked 2 leases left by an earlier apply: they were prefetched leases whose start no worker reported, queued again at no cost."},
		{2, 2, "Revoked 4 leases left by an earlier apply: 2 tasks are retried as lost; 2 were prefetched leases whose start no worker reported, queued again at no cost."},
		{1, 1, "Revoked 2 leases left by an earlier apply: 1 task is retried as lost; 1 was a prefetched lease whose start no worker reported, queued again at no cost."},
	} {
		if got := recoveredMessage(c.lost, c.unstarted); got != c.want {
			t.Errorf("recoveredMessage(%d, %d)\n = %q\nwant %q", c.lost, c.unstarted, got, c.want)
		}
	}
}
