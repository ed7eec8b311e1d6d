package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/wdc-dev/wdc/engine"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"wdc": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())) },
	})
}

// TestScripts runs the end-to-end scripts in testdata/scripts. Set
// WDC_UPDATE_SCRIPTS=1 to rewrite their expected output sections.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "scripts"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("WDC_UPDATE_SCRIPTS") != "",
		Setup: func(env *testscript.Env) error {
			root, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			env.Setenv("REPO", root)
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("NO_COLOR", "1")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"seed-state": cmdSeedState,
			"wait-file":  cmdWaitFile,
		},
	})
}

// cmdSeedState records tasks of the configuration in the current directory
// into its default state file, as an apply would have left them:
//
//	seed-state STATUS [ADDR...]
//
// STATUS is a task status (succeeded, failed, …); with no ADDR every task of
// the configuration is recorded. Failed and cancelled tasks get the last
// error "exit status 1".
func cmdSeedState(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("seed-state does not support !")
	}
	if len(args) < 1 {
		ts.Fatalf("usage: seed-state STATUS [ADDR...]")
	}
	status := state.TaskStatus(args[0])
	dir := ts.MkAbs(".")
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{})
	if diags.HasErrors() {
		ts.Fatalf("loading configuration: %s", diags.Error())
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[normalizeAddress(a)] = true
	}
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(dir, defaultStatePath))
	ts.Check(err)
	defer st.Close()
	defs := engine.Definitions(cfg)
	now := time.Now()
	seeded := 0
	for _, t := range cfg.Tasks {
		if len(want) > 0 && !want[t.Address()] {
			continue
		}
		d := defs[t.Address()]
		ts.Check(st.UpsertTask(ctx, state.TaskDef{Address: t.Address(), Name: t.Name, Index: t.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: t.Retry.MaxAttempts, MaxLost: t.Retry.MaxLost}, now))
		switch status {
		case state.TaskFailed, state.TaskCancelled:
			ts.Check(st.FinishTask(ctx, t.Address(), status, "exit status 1", now))
		case state.TaskSucceeded:
			ts.Check(st.FinishTask(ctx, t.Address(), status, "", now))
		case state.TaskQueued:
		default:
			ts.Fatalf("seed-state: cannot seed status %q", status)
		}
		seeded++
	}
	if seeded != len(want) && len(want) > 0 {
		ts.Fatalf("seed-state: %d of the %d addresses are in the configuration", seeded, len(want))
	}
	fmt.Fprintf(ts.Stdout(), "seeded %d tasks as %s\n", seeded, status)
}

// cmdWaitFile waits until a file exists (and, with a second argument, until
// its content matches a regular expression), polling with a deadline:
//
//	wait-file PATH [REGEXP]
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: wait-file PATH [REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && (re == nil || re.Match(b)) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-file %s: not there (or not matching) after 90s", args[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
