package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/wdc-dev/wdc/state"
)

// TestKubernetesScripts runs the end-to-end scripts in
// testdata/k8s-scripts against a real cluster with a real node (CI brings
// one up with scripts/test-kubernetes.sh). It needs two variables, and is
// skipped without them:
//
//	WDC_TEST_KUBECONFIG  the cluster's kubeconfig (cluster-admin)
//	WDC_TEST_K8S_IMAGE   an image the node has, holding /wdc (a static build
//	                     of this command) and /busybox, run with
//	                     imagePullPolicy Never
//
// The node also has local/wdc-agent:1 (wdc-agent alone, its entrypoint)
// and local/busybox:1 (busybox alone): the scripts of agent_image use
// them by name.
//
// Scripts get, besides what TestScripts gives them, $KUBECONFIG (so
// kubectl and wdc use the cluster: HOME is the script's own), $K8S_IMAGE,
// and $NAMESPACE, a namespace name unique to the run of the script; a
// script creates and deletes it itself, and a script that fails before
// deleting it gets it deleted (without waiting) when it ends. The same
// values are the input variables namespace and image (WDC_VAR_namespace,
// WDC_VAR_image), for configurations that declare them. The pods use
// the host's network and reach the apply's coordinator on 127.0.0.1.
func TestKubernetesScripts(t *testing.T) {
	kubeconfig, image := os.Getenv("WDC_TEST_KUBECONFIG"), os.Getenv("WDC_TEST_K8S_IMAGE")
	if kubeconfig == "" || image == "" {
		t.Skip("no cluster: set WDC_TEST_KUBECONFIG and WDC_TEST_K8S_IMAGE (scripts/test-kubernetes.sh brings up a testbed and sets both)")
	}
	kubeconfig, err := filepath.Abs(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p := scriptParams("k8s-scripts")
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		ns := scriptNamespace(filepath.Base(env.WorkDir))
		env.Setenv("KUBECONFIG", kubeconfig)
		env.Setenv("K8S_IMAGE", image)
		env.Setenv("NAMESPACE", ns)
		env.Setenv("WDC_VAR_namespace", ns)
		env.Setenv("WDC_VAR_image", image)
		env.Defer(func() {
			// The safety net of a script that failed half-way: its
			// namespace takes whatever it left with it.
			cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
			cmd.Run() //nolint:errcheck // best effort
		})
		return nil
	}
	testscript.Run(t, p)
}

// scriptNamespace returns a namespace name for the script whose work
// folder is named base ("script-k8s_apply"): "wdc-k8s-apply-" and five
// random hex digits, a DNS-1123 label of at most 63 characters.
func scriptNamespace(base string) string {
	name := dnsName(strings.TrimPrefix(base, "script-"))
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	b := make([]byte, 3)
	rand.Read(b) //nolint:errcheck // never fails
	return "wdc-" + name + "-" + hex.EncodeToString(b)[:5]
}

// dnsName lowercases s and turns what a DNS-1123 label cannot hold into
// "-".
func dnsName(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s), "-")
}

// cmdWaitLease waits until TASK has an active lease in the default state
// file of the current directory (.wdc/state.db), reading it read-only
// while an apply runs, polling every 100 ms for up to TIMEOUT (a Go
// duration, default 90s), then sets LEASE_WORKER to the id of the worker
// holding it and LEASE_ATTEMPT to its attempt:
//
//	wait-lease TASK [TIMEOUT]
func cmdWaitLease(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: wait-lease TASK [TIMEOUT]")
	}
	timeout := 90 * time.Second
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d <= 0 {
			ts.Fatalf("wait-lease: %q is not a duration", args[1])
		}
		timeout = d
	}
	task := normalizeAddress(args[0])
	path := filepath.Join(ts.MkAbs("."), defaultStatePath)
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if l, err := activeLease(path, task); err == nil && l != nil {
			ts.Setenv("LEASE_WORKER", l.WorkerID)
			ts.Setenv("LEASE_ATTEMPT", strconv.Itoa(l.Attempt))
			ts.Logf("%s: attempt %d leased to %s (token %d)", task, l.Attempt, l.WorkerID, l.Token)
			return
		} else if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-lease %s: no active lease after %s (last error: %v)", task, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// activeLease returns the task's active lease in the state at path, or nil
// when it has none.
func activeLease(path, task string) (*state.Lease, error) {
	ctx := context.Background()
	st, err := state.OpenReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	leases, err := st.Leases(ctx, task)
	if err != nil {
		return nil, err
	}
	for i := range leases {
		if leases[i].Status == state.LeaseActive {
			return &leases[i], nil
		}
	}
	return nil, nil
}
