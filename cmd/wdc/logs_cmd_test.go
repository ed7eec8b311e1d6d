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
