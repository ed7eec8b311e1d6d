package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: wdc-agent links the worker runtime and its protocol
// client only: no Kubernetes client, no configuration language, no state
// (docs/design.md's layout; that is what keeps it small).
func TestDependencies(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"k8s.io/", "github.com/hashicorp/hcl", "github.com/wdc-dev/wdc/hcl", "github.com/wdc-dev/wdc/state",
		"github.com/wdc-dev/wdc/engine", "github.com/wdc-dev/wdc/providers", "gorm.io/", "github.com/glebarez/",
		"github.com/google/go-containerregistry"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("wdc-agent depends on %s", pkg)
			}
		}
	}
}
