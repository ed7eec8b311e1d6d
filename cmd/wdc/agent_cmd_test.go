package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/wdc-dev/wdc/cmd/internal/agentcli"
)

// TestAgentWithoutCredential: wdc agent reports the agent's errors as any
// command's, with exit 1.
func TestAgentWithoutCredential(t *testing.T) {
	t.Parallel()
	_, stderr, code := runWDC(t, "agent", "--server", "http://127.0.0.1:1", "--work-dir", t.TempDir())
	if want := "wdc: error: no credential: give a join file with --join-file, or set WDC_LAUNCH_CREDENTIAL"; code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("wdc agent without a credential: exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
}

// TestAgentFlagsSameInBothBinaries: `wdc agent` and `wdc-agent agent` take
// the same flags (names, types, defaults, placeholders, help, required),
// and `version` too, so that a launch's `<command> agent …` runs on either
// binary.
func TestAgentFlagsSameInBothBinaries(t *testing.T) {
	t.Parallel()
	wdc, err := kong.New(&CLI{}, kong.Name("wdc"), kong.Writers(io.Discard, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	alone, err := agentcli.NewParser(&agentcli.CLI{}, agentcli.Build{Name: "wdc-agent"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"agent", "version"} {
		got, want := commandFlags(t, alone, cmd), commandFlags(t, wdc, cmd)
		if len(want) == 0 {
			t.Fatalf("wdc %s has no flags: the comparison proves nothing", cmd)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("wdc-agent %s's flags differ from wdc %s's:\n got  %s\n want %s", cmd, cmd, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
	}
}

// commandFlags describes the flags of the command name at the parser's
// root, one line each, in their order.
func commandFlags(t *testing.T, k *kong.Kong, name string) []string {
	t.Helper()
	for _, c := range k.Model.Children {
		if c.Name != name {
			continue
		}
		var out []string
		for _, f := range c.Flags {
			out = append(out, fmt.Sprintf("--%s type=%s default=%q placeholder=%q required=%v short=%q env=%q hidden=%v help=%q",
				f.Name, f.Target.Type(), f.Default, f.PlaceHolder, f.Required, f.Short, f.Envs, f.Hidden, f.Help))
		}
		return out
	}
	t.Fatalf("%s has no %s command", k.Model.Name, name)
	return nil
}
