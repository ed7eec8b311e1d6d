package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestParseTestFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		src     string
		runs    int
		command string // of the first run
		asserts int    // of the first run
		// wantErr, when set, is a substring of an error's summary or
		// detail, and pos its subject's "line:column".
		wantErr, pos string
	}{
		{name: "empty", src: ``, runs: 0},
		{name: "defaults", src: "run \"a\" {\n}\n", runs: 1, command: "apply"},
		{name: "plan keyword", src: "run \"a\" {\n  command = plan\n}\n", runs: 1, command: "plan"},
		{name: "apply string", src: "run \"a\" {\n  command = \"apply\"\n}\n", runs: 1, command: "apply"},
		{name: "full", src: `run "a" {
  command = apply
  variables {
    shards = 3
    names  = ["x", "y"]
  }
  override_pool "gpu" {
    provider = "local"
  }
  assert {
    condition     = task.shard[1].status == "succeeded"
    error_message = "shard 1"
  }
  assert {
    condition     = pool.gpu.launched > 0 && length(proposals) == 0
    error_message = "pool"
  }
}
run "b" {
  command = plan
  assert {
    condition     = plan.changes == 3 && var.shards == 3
    error_message = "plan"
  }
}
`, runs: 2, command: "apply", asserts: 2},
		{name: "bad command", src: "run \"a\" {\n  command = destroy\n}\n", runs: 1, command: "apply", wantErr: "must be apply or plan", pos: "2:13"},
		{name: "duplicate run", src: "run \"a\" {\n}\nrun \"a\" {\n}\n", runs: 1, command: "apply", wantErr: `Duplicate run "a"`, pos: "3:1"},
		{name: "unknown block", src: "runs \"a\" {\n}\n", wantErr: "Unsupported block type", pos: "1:1"},
		{name: "unknown root", src: "run \"a\" {\n  assert {\n    condition     = foo.bar == 1\n    error_message = \"x\"\n  }\n}\n",
			runs: 1, command: "apply", asserts: 1, wantErr: `not to "foo"`, pos: "3:21"},
		{name: "missing message", src: "run \"a\" {\n  assert {\n    condition = true\n  }\n}\n", runs: 1, command: "apply", wantErr: "error_message", pos: "2:10"},
		{name: "fault without its target", src: "run \"a\" {\n  fault \"kill_worker\" {\n  }\n}\n", runs: 1, command: "apply", wantErr: `The argument "task" is required`, pos: "2:23"},
		{name: "fault in a plan run", src: "run \"a\" {\n  command = plan\n  fault \"late_result\" {\n    task = task.a\n  }\n}\n", runs: 1, command: "plan", wantErr: "faults need command = apply", pos: "3:3"},
		{name: "override without provider", src: "run \"a\" {\n  override_pool \"gpu\" {\n  }\n}\n", runs: 1, command: "apply", wantErr: "provider", pos: "2:23"},
		{name: "override empty provider", src: "run \"a\" {\n  override_pool \"gpu\" {\n    provider = \"\"\n  }\n}\n", runs: 1, command: "apply", wantErr: "a provider's name", pos: "3:16"},
		{name: "syntax error", src: "run \"a\" {\n  command = \n}\n", runs: 0, wantErr: "", pos: "2:13"},
		{name: "bad run name", src: "run \"a b\" {\n}\n", wantErr: "Invalid run name", pos: "1:5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tf, diags := ParseTestFile([]byte(tc.src), "x.wdctest.hcl")
			if tf == nil || tf.File == nil {
				t.Fatal("nil file")
			}
			if tc.pos == "" && diags.HasErrors() {
				t.Fatalf("unexpected errors: %s", diags.Error())
			}
			if tc.pos != "" {
				found := false
				for _, d := range diags {
					if d.Severity != hcl.DiagError || d.Subject == nil {
						continue
					}
					at := fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)
					if at == tc.pos && strings.Contains(d.Summary+" "+d.Detail, tc.wantErr) {
						found = true
					}
				}
				if !found {
					t.Fatalf("no error %q at %s; got: %s", tc.wantErr, tc.pos, diags.Error())
				}
			}
			if len(tf.Runs) != tc.runs {
				t.Fatalf("runs = %d, want %d", len(tf.Runs), tc.runs)
			}
			if tc.runs > 0 && tf.Runs[0].Command != tc.command {
				t.Fatalf("command = %q, want %q", tf.Runs[0].Command, tc.command)
			}
			if tc.runs > 0 && len(tf.Runs[0].Asserts) != tc.asserts {
				t.Fatalf("asserts = %d, want %d", len(tf.Runs[0].Asserts), tc.asserts)
			}
		})
	}
}

func TestLoadTestFilesFindsBothFolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.wdctest.hcl", "run \"b\" {\n}\n")
	write("a.wdctest.hcl", "run \"a\" {\n}\n")
	write("tests/c.wdctest.hcl", "run \"c\" {\n}\n")
	write("tests/.hidden.wdctest.hcl", "not hcl {")
	write("tests/deeper/d.wdctest.hcl", "run \"d\" {\n}\n")
	write("main.wdc.hcl", "")
	files, diags := LoadTestFiles(dir)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	if want := "a.wdctest.hcl b.wdctest.hcl tests/c.wdctest.hcl"; strings.Join(got, " ") != want {
		t.Fatalf("files = %v, want %s", got, want)
	}
}

func TestCheckTestFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgSrc := `variable "shards" {
  default = 2
}

pool "cpu" {
  provider = "local"
}

task "shard" {
  count   = var.shards
  command = ["true"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(cfgSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, withProviders(Inputs{}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	cases := []struct {
		name, src, want string
	}{
		{"ok", `run "a" {
  variables {
    shards = 3
  }
  override_pool "cpu" {
    provider = "local"
  }
  assert {
    condition     = task.shard[0].status == "succeeded" && pool.cpu.launched == 1 && var.shards == 3
    error_message = "x"
  }
}
`, ""},
		{"unknown task", "run \"a\" {\n  assert {\n    condition     = task.shrad[0].status == \"x\"\n    error_message = \"x\"\n  }\n}\n", `Did you mean "shard"?`},
		{"no runs", "# nothing yet\n", "has no run block, so it tests nothing"},
		{"unknown task attribute", "run \"a\" {\n  assert {\n    condition     = task.shard[1].statuz == \"x\"\n    error_message = \"x\"\n  }\n}\n", `no attribute "statuz"; it has status, attempts, lost, failed, outputs, pool, action. Did you mean "status"?`},
		{"unknown pool attribute", "run \"a\" {\n  assert {\n    condition     = pool.cpu.lanched == 1\n    error_message = \"x\"\n  }\n}\n", `Did you mean "launched"?`},
		{"output by key", "run \"a\" {\n  assert {\n    condition     = task.shard[0].outputs[\"f\"] == \"x\"\n    error_message = \"${task.shard[0].pool}\"\n  }\n}\n", ""},
		{"unknown pool", "run \"a\" {\n  assert {\n    condition     = pool.gpu.launched == 0\n    error_message = \"x\"\n  }\n}\n", "no pool \"gpu\""},
		{"unknown variable", "run \"a\" {\n  variables {\n    shard = 1\n  }\n}\n", "no variable \"shard\" is declared"},
		{"override unknown pool", "run \"a\" {\n  override_pool \"gpu\" {\n    provider = \"local\"\n  }\n}\n", "does not declare"},
		{"override unknown provider", "run \"a\" {\n  override_pool \"cpu\" {\n    provider = \"locl\"\n  }\n}\n", "which wdc does not know"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tf, diags := ParseTestFile([]byte(tc.src), "t.wdctest.hcl")
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			diags = CheckTestFile(tf, cfg, testProviders)
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatal(diags.Error())
				}
				return
			}
			if !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("want %q in: %s", tc.want, diags.Error())
			}
			for _, d := range diags {
				if d.Subject == nil || d.Subject.Filename != "t.wdctest.hcl" {
					t.Fatalf("diagnostic without a subject in the test file: %s", d.Error())
				}
			}
		})
	}
}

func TestTestInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgSrc := `variable "shards" {
  type    = number
  default = 2
}

pool "gpu" {
  provider = "kubernetes"
  labels   = { gpu = "yes" }
}

task "shard" {
  count   = var.shards
  command = ["true"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(cfgSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	attrs := func(src string) []*hcl.Attribute {
		f, diags := hclsyntax.ParseConfig([]byte(src), "v.wdctest.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		m, _ := f.Body.JustAttributes()
		var out []*hcl.Attribute
		for _, a := range m {
			out = append(out, a)
		}
		return out
	}
	cfg, diags := Load(dir, withProviders(Inputs{Vars: []string{"shards=5"}, TestVariables: attrs("shards = 3\n"),
		PoolProviders: map[string]string{"gpu": "local"}}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(cfg.Tasks) != 3 {
		t.Fatalf("tasks = %d, want 3 (the run's variables win over --var)", len(cfg.Tasks))
	}
	if p := cfg.Pools[0]; p.Provider != "local" || p.LaunchTimeout != testProviders["local"].LaunchTimeout || p.Labels["gpu"] != "yes" {
		t.Fatalf("pool = %+v, want the local provider with its defaults and the pool's labels", p)
	}
	_, diags = Load(dir, withProviders(Inputs{TestVariables: attrs("shards = \"many\"\n")}))
	if !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Filename != "v.wdctest.hcl" {
		t.Fatalf("want an error in the test file, got %v", diags)
	}
}

// TestParseTestFault: each fault kind with its defaults, and the errors
// of a bad fault block with their positions.
func TestParseTestFault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       TestFault // Kind, Task, Attempt, Pool, Count, Duration
		wantErr    string
		pos        string // "line:column" of the error's subject
	}{
		{name: "kill_worker, attempt 1 by default", body: `fault "kill_worker" {
    task = task.shard[1]
  }`, want: TestFault{Kind: FaultKillWorker, Task: "task.shard[1]", Attempt: 1, Count: 1, Duration: DefaultSilence}},
		{name: "silence_worker with a duration", body: `fault "silence_worker" {
    task     = task.train
    attempt  = 2
    duration = "90s"
  }`, want: TestFault{Kind: FaultSilenceWorker, Task: "task.train", Attempt: 2, Count: 1, Duration: 90 * time.Second}},
		{name: "late_result", body: `fault "late_result" {
    task = task.a
  }`, want: TestFault{Kind: FaultLateResult, Task: "task.a", Attempt: 1, Count: 1, Duration: DefaultSilence}},
		{name: "fail_launch", body: `fault "fail_launch" {
    pool  = pool.gpu
    count = 3
  }`, want: TestFault{Kind: FaultFailLaunch, Pool: "gpu", Attempt: 1, Count: 3, Duration: DefaultSilence}},
		{name: "unknown kind", body: `fault "kill_pool" {
  }`, wantErr: `the fault kinds are kill_worker`, pos: "2:9"},
		{name: "disk_full", body: `fault "disk_full" {
    after = 40
  }`, want: TestFault{Kind: FaultDiskFull, Attempt: 1, Count: 1, Writes: 40, Duration: DefaultSilence}},
		{name: "disk_full needs after", body: `fault "disk_full" {
  }`, wantErr: `The argument "after" is required`, pos: "2:21"},
		{name: "a string, not a reference", body: `fault "late_result" {
    task = "task.a"
  }`, wantErr: "must be a reference such as task.NAME", pos: "3:12"},
		{name: "a pool for a task", body: `fault "kill_worker" {
    task = pool.cpu
  }`, wantErr: "must be a reference such as task.NAME", pos: "3:12"},
		{name: "an index for a pool", body: `fault "fail_launch" {
    pool = pool.cpu[0]
  }`, wantErr: "must be a reference such as pool.NAME", pos: "3:12"},
		{name: "attempt 0", body: `fault "kill_worker" {
    task    = task.a
    attempt = 0
  }`, wantErr: "whole number of at least 1", pos: "4:15"},
		{name: "a bad duration", body: `fault "silence_worker" {
    task     = task.a
    duration = "soon"
  }`, wantErr: "must be a duration greater than zero", pos: "4:16"},
		{name: "an argument of another kind", body: `fault "kill_worker" {
    task  = task.a
    count = 2
  }`, wantErr: `An argument named "count" is not expected here`, pos: "4:5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "run \"r\" {\n  " + tc.body + "\n}\n"
			tf, diags := ParseTestFile([]byte(src), "x.wdctest.hcl")
			if tc.wantErr == "" {
				if diags.HasErrors() {
					t.Fatalf("errors: %v", diags)
				}
				if len(tf.Runs) != 1 || len(tf.Runs[0].Faults) != 1 {
					t.Fatalf("runs %d, want one run with one fault", len(tf.Runs))
				}
				got := *tf.Runs[0].Faults[0]
				got.TargetRange, got.DeclRange = hcl.Range{}, hcl.Range{}
				if got != tc.want {
					t.Fatalf("fault %+v, want %+v", got, tc.want)
				}
				return
			}
			for _, d := range diags {
				if d.Severity == hcl.DiagError && strings.Contains(d.Summary+" "+d.Detail, tc.wantErr) && d.Subject != nil &&
					fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column) == tc.pos {
					return
				}
			}
			t.Fatalf("no error %q at %s; got: %v", tc.wantErr, tc.pos, diags)
		})
	}
}
