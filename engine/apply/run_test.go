package apply

import (
	"testing"
	"time"
)

func TestDecidePool(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	timeout := time.Minute
	tests := []struct {
		name  string
		facts poolFacts
		want  poolStep
	}{
		{name: "a failed pool is left alone", facts: poolFacts{Failed: true, Planned: 2, FailedInRow: 5, SuperviseDue: true, Now: t0},
			want: poolStep{}},
		{name: "a pool with no work is left alone", facts: poolFacts{Planned: 0, SuperviseDue: true, Now: t0},
			want: poolStep{}},
		{name: "supervised when due", facts: poolFacts{Planned: 2, SuperviseDue: true, Now: t0},
			want: poolStep{Kind: poolSupervise}},
		{name: "not supervised between ticks", facts: poolFacts{Planned: 2, Now: t0},
			want: poolStep{}},
		{name: "two launches in a row that never registered: still supervised",
			facts: poolFacts{Planned: 2, FailedInRow: neverRegisteredLimit - 1, SuperviseDue: true, Now: t0},
			want:  poolStep{Kind: poolSupervise}},
		{name: "the limit of launches that never registered fails it",
			facts: poolFacts{Planned: 2, FailedInRow: neverRegisteredLimit, SuperviseDue: true, Now: t0},
			want:  poolStep{Kind: poolFail, NeverRegistered: true}},
		{name: "external: starts waiting for a worker",
			facts: poolFacts{External: true, Planned: 1, Unfinished: 1, Now: t0},
			want:  poolStep{WaitingSince: t0}},
		{name: "external: waits within launch_timeout",
			facts: poolFacts{External: true, Planned: 1, Unfinished: 1, WaitingSince: t0, Now: t0.Add(timeout)},
			want:  poolStep{WaitingSince: t0}},
		{name: "external: fails past launch_timeout",
			facts: poolFacts{External: true, Planned: 1, Unfinished: 1, WaitingSince: t0, Now: t0.Add(timeout + time.Millisecond)},
			want:  poolStep{Kind: poolFail, TimedOut: true, WaitingSince: t0}},
		{name: "external: a live worker ends the wait",
			facts: poolFacts{External: true, Planned: 1, Unfinished: 1, Live: 1, WaitingSince: t0, Now: t0.Add(2 * timeout)},
			want:  poolStep{}},
		{name: "external: no work left ends the wait",
			facts: poolFacts{External: true, Planned: 1, WaitingSince: t0, Now: t0.Add(2 * timeout)},
			want:  poolStep{}},
		{name: "external: never supervised, never failed for launches",
			facts: poolFacts{External: true, Planned: 1, Unfinished: 1, Live: 1, FailedInRow: 9, SuperviseDue: true, Now: t0},
			want:  poolStep{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decidePool(tt.facts, timeout); got != tt.want {
				t.Errorf("decidePool = %+v, want %+v", got, tt.want)
			}
		})
	}
}
