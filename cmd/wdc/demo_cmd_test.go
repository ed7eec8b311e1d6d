package main

import (
	"strings"
	"testing"
)

// TestDemoIgnoresTheConfiguration: the demo runs anywhere, with any
// --state, and never reads the configuration directory.
func TestDemoIgnoresTheConfiguration(t *testing.T) {
	dir := writeConfig(t, "this is not HCL {")
	stdout, stderr, code := runWDC(t, "--chdir", dir, "--state", "elsewhere.db", "demo", "worker-leases")
	if code != 0 || !strings.Contains(stdout, "Every invariant held") || stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}
