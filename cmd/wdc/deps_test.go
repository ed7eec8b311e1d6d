package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBuildToolsNotLinked: the libraries of the build tools (./release,
// which writes the agent's OCI image with go-containerregistry) are not
// linked into wdc: they would only make it larger.
func TestBuildToolsNotLinked(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/google/go-containerregistry") || strings.HasPrefix(pkg, "github.com/wdc-dev/wdc/release") {
			t.Errorf("wdc depends on %s", pkg)
		}
	}
}
