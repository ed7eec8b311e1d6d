package main

import (
	"strings"
	"testing"

	"github.com/wdc-dev/wdc/engine/apply"
)

// TestUnknownCommand: a word where a command belongs is an unknown
// command, listing the commands there; other stray arguments keep kong's
// message.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `wdc: error: unknown command "frobnicate" for wdc; the commands are: validate, fmt, plan, apply, test, force-unlock, `},
		{[]string{"--no-color", "frobnicate"}, `wdc: error: unknown command "frobnicate" for wdc; the commands are: validate, `},
		{[]string{"tasks", "frob"}, `wdc: error: unknown command "frob" for wdc tasks; the commands are: list, show` + "\n"},
		{[]string{"version", "extra"}, "wdc: error: unexpected argument extra\n"},
	} {
		_, stderr, code := runWDC(t, tt.args...)
		if code != 1 || !strings.HasPrefix(stderr, tt.want) {
			t.Errorf("wdc %s: exit %d, stderr %q; want exit 1 and stderr starting %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}

func TestReclaimedText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rec  apply.ReclaimResult
		want string
	}{
		{apply.ReclaimResult{}, ""},
		{apply.ReclaimResult{Stopped: 2}, "2 workers"},
		{apply.ReclaimResult{OrphanAttempts: 1}, "1 orphaned attempt"},
		{apply.ReclaimResult{Stopped: 2, OrphanAttempts: 2}, "2 workers and 2 orphaned attempts"},
		{apply.ReclaimResult{Stopped: 1, OrphanWorkers: 1, OrphanAttempts: 3}, "1 worker, 1 unrecorded worker and 3 orphaned attempts"},
		{apply.ReclaimResult{OrphanWorkers: 2}, "2 unrecorded workers"},
	} {
		if got := reclaimedText(tc.rec); got != tc.want {
			t.Errorf("reclaimedText(%+v) = %q, want %q", tc.rec, got, tc.want)
		}
	}
}
