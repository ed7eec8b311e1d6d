package main

import (
	"strings"
	"testing"
)

// TestAgentWorkAfterParse: the agent's Run only hands its work over
// (env.then); run does it, and reports what it returns like any command's
// error.
func TestAgentWorkAfterParse(t *testing.T) {
	t.Parallel()
	e := &env{environ: []string{}}
	if err := (&AgentCmd{Server: "http://127.0.0.1:1", WorkDir: t.TempDir()}).Run(e); err != nil || e.then == nil {
		t.Fatalf("AgentCmd.Run = %v (work handed over: %v); want nil and the work handed over", err, e.then != nil)
	}
	if err := e.then(); err == nil || !strings.HasPrefix(err.Error(), "no credential") {
		t.Errorf("the agent's work without a credential: %v; want the no credential error", err)
	}

	_, stderr, code := runWDC(t, "agent", "--server", "http://127.0.0.1:1", "--work-dir", t.TempDir())
	if want := "wdc: error: no credential: give a join file with --join-file, or set WDC_LAUNCH_CREDENTIAL"; code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("wdc agent without a credential: exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
}
