package main

import (
	"strings"
	"testing"
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
		{[]string{"frobnicate"}, `wdc: error: unknown command "frobnicate" for wdc; the commands are: validate, fmt, plan, apply, force-unlock, `},
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
