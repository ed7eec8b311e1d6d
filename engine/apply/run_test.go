package apply

import (
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
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
		{name: "a worker that cannot start fails it at once",
			facts: poolFacts{Planned: 2, FailedInRow: 1, CannotStart: true, SuperviseDue: true, Now: t0},
			want:  poolStep{Kind: poolFail, CannotStart: true}},
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

// TestJoinHint: the hint apply prints for an external pool says what is
// true of where the coordinator listens and what it advertises.
func TestJoinHint(t *testing.T) {
	t.Parallel()
	pool := &Pool{Runtime: coordinator.PoolRuntime{Name: "edge"}, Max: 2, LaunchTimeout: time.Minute}
	const loopbackNote = "(the coordinator listens on loopback: only this machine can join; set listen in the wdc block for others)"
	tests := []struct {
		name, listen, url string
		want, not         string
	}{
		{"loopback", "127.0.0.1:47071", "http://127.0.0.1:47071", loopbackNote, ""},
		{"localhost", "localhost:47071", "http://localhost:47071", loopbackNote, ""},
		{"every interface, advertised as loopback", "0.0.0.0:47071", "https://127.0.0.1:47071",
			"(the coordinator listens on all interfaces (0.0.0.0:47071) and advertises https://127.0.0.1:47071, which only this machine reaches: " +
				"for workers elsewhere, set advertise in the wdc block to an address they reach)", "listens on loopback"},
		{"every interface, no host", ":47071", "https://127.0.0.1:47071", "listens on all interfaces (:47071) and advertises", "listens on loopback"},
		{"an interface, advertised as loopback", "10.1.2.3:47071", "https://localhost:47071",
			"(the coordinator listens on 10.1.2.3:47071 and advertises https://localhost:47071, which only this machine reaches", "listens on loopback"},
		{"every interface, advertised as an address others reach", "0.0.0.0:47071", "https://10.1.2.3:47071", "", "(the coordinator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := joinHint(pool, &httpapi.Endpoint{Listen: tt.listen, URL: tt.url})
			if !strings.HasPrefix(got, "waiting up to 1m0s for workers to join pool edge (up to 2): with a join file from `wdc join-token create edge -o FILE`, run `wdc agent --server "+tt.url+" --pool edge --join-file FILE`") {
				t.Errorf("joinHint = %q", got)
			}
			if tt.want != "" && !strings.Contains(got, " "+tt.want) {
				t.Errorf("joinHint = %q\nwant it to say %q", got, tt.want)
			}
			if tt.not != "" && strings.Contains(got, tt.not) {
				t.Errorf("joinHint = %q\nwant no %q", got, tt.not)
			}
		})
	}
}
