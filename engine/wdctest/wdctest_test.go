package wdctest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

const testConfig = `variable "shards" {
  type    = number
  default = 2
}

pool "cpu" {
  provider = "local"
  labels   = { kind = "cpu" }
}

pool "gpu" {
  provider = "local"
  labels   = { kind = "gpu" }
}

task "shard" {
  count     = var.shards
  command   = ["true"]
  placement = { kind = "cpu" }
}

task "train" {
  command   = ["true"]
  placement = { kind = "gpu" }
}
`

// writeConfig writes files (name to content) into a new folder.
func writeConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadConfig(t *testing.T, dir string) *wdchcl.Config {
	t.Helper()
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return cfg
}

// observed is what a run of testConfig might have left.
func observed() *Observed {
	return &Observed{
		Tasks: map[string]state.Task{
			"task.shard[0]": {Address: "task.shard[0]", Status: state.TaskSucceeded, Attempts: 1},
			"task.shard[1]": {Address: "task.shard[1]", Status: state.TaskSucceeded, Attempts: 3},
			"task.train":    {Address: "task.train", Status: state.TaskFailed, Attempts: 1},
		},
		Attempts: map[string][]state.Attempt{
			"task.shard[0]": {{Number: 1, WorkerID: "w-1"}},
			"task.shard[1]": {{Number: 1, WorkerID: "w-1", FailureClass: state.FailureClassLost}, {Number: 2, WorkerID: "w-1", FailureClass: state.FailureClassFailure}, {Number: 3, WorkerID: "w-2"}},
			"task.train":    {{Number: 1, WorkerID: "w-3", FailureClass: state.FailureClassFailure}},
		},
		WorkerPools: map[string]string{"w-1": "cpu", "w-2": "cpu", "w-3": "gpu"},
		Outputs:     map[string]map[string]string{"task.shard[0]": {"out.txt": "hello\n"}},
		Launched:    map[string]int{"cpu": 2, "gpu": 1},
		Proposals:   []state.Proposal{{ID: 1, Edge: "rerun", Propose: "task.train", Status: state.ProposalPending}},
		Plan: &plan.Plan{Tasks: []plan.TaskChange{
			{Address: "task.shard[0]", Action: plan.ActionRun}, {Address: "task.shard[1]", Action: plan.ActionRun}, {Address: "task.train", Action: plan.ActionRun},
		}},
	}
}

func TestAssert(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, writeConfig(t, map[string]string{"main.wdc.hcl": testConfig}))
	ctx := EvalContext(cfg, observed())
	cases := []struct {
		cond string
		pass bool
		// refs is the references and values a failure lists ("ref=value;…").
		refs string
		// err, when set, is in the failure's diagnostics.
		err string
	}{
		{cond: `task.shard[0].status == "succeeded"`, pass: true},
		{cond: `task.shard[1].attempts == 3 && task.shard[1].lost == 1 && task.shard[1].failed == 1`, pass: true},
		{cond: `task.shard[1].pool == "cpu" && task.train.pool == "gpu"`, pass: true},
		{cond: `task.shard[0].outputs["out.txt"] == "hello\n"`, pass: true},
		{cond: `length(task.shard) == 2 && var.shards == 2`, pass: true},
		{cond: `pool.cpu.launched == 2 && pool.gpu.provider == "local"`, pass: true},
		{cond: `plan.changes == 3 && plan.exit_code == 2 && task.train.action == "run"`, pass: true},
		{cond: `length(proposals) == 1 && proposals[0].status == "pending" && proposals[0].edge == "rerun"`, pass: true},
		{cond: `task.train.status == "succeeded"`, refs: `task.train.status="failed"`},
		{cond: `task.shard[1].lost == 0 && task.shard[1].lost < pool.cpu.launched`, refs: `task.shard[1].lost=1;pool.cpu.launched=2`},
		{cond: `task.shard[0].outputs == {}`, refs: `task.shard[0].outputs={ "out.txt" = "hello\n" }`},
		{cond: `task.shard[5].status == "succeeded"`, refs: `task.shard[5].status=(error: `, err: "Invalid index"},
		{cond: `task.shard[0].attempts`, err: "not a bool"},
		{cond: `null`, err: "is null"},
	}
	for _, tc := range cases {
		t.Run(tc.cond, func(t *testing.T) {
			t.Parallel()
			src := "run \"a\" {\n  assert {\n    condition     = " + tc.cond + "\n    error_message = \"must hold: ${plan.changes}\"\n  }\n}\n"
			tf, diags := wdchcl.ParseTestFile([]byte(src), "a.wdctest.hcl")
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			f := Assert(tf.Runs[0].Asserts[0], ctx, tf.File.Bytes)
			if tc.pass {
				if f != nil {
					t.Fatalf("failed: %+v %s", f.Values, f.Diags.Error())
				}
				return
			}
			if f == nil {
				t.Fatal("passed")
			}
			if f.Message != "must hold: 3" {
				t.Errorf("message = %q", f.Message)
			}
			if f.Range.Start.Line != 3 {
				t.Errorf("range = %s, want line 3", f.Range)
			}
			var got []string
			for _, r := range f.Values {
				got = append(got, r.Ref+"="+r.Value)
			}
			if tc.refs != "" && !strings.HasPrefix(strings.Join(got, ";"), tc.refs) {
				t.Errorf("references = %q, want %q", strings.Join(got, ";"), tc.refs)
			}
			if tc.err != "" && !strings.Contains(f.Diags.Error(), tc.err) {
				t.Errorf("diagnostics = %q, want %q", f.Diags.Error(), tc.err)
			}
			if tc.err == "" && f.Diags.HasErrors() {
				t.Errorf("unexpected diagnostics: %s", f.Diags.Error())
			}
		})
	}
}

func TestCopyConfigLeavesOutState(t *testing.T) {
	t.Parallel()
	src := writeConfig(t, map[string]string{
		"main.wdc.hcl":        "",
		"data/a.txt":          "a",
		".wdc/state.db":       "state",
		"other/state.db":      "state",
		"tests/x.wdctest.hcl": "",
	})
	if err := os.Symlink("data/a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := CopyConfig(src, dst, []string{filepath.Join(src, "other", "state.db")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"main.wdc.hcl", "data/a.txt", "tests/x.wdctest.hcl", "link"} {
		if _, err := os.Lstat(filepath.Join(dst, want)); err != nil {
			t.Errorf("%s not copied: %v", want, err)
		}
	}
	for _, left := range []string{".wdc", "other/state.db"} {
		if _, err := os.Lstat(filepath.Join(dst, left)); err == nil {
			t.Errorf("%s copied", left)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, "link")); err != nil || string(b) != "a" {
		t.Errorf("link reads %q, %v", b, err)
	}
}

// recordingView keeps what Run tells.
type recordingView struct {
	started, finished []string
	plans             int
}

func (v *recordingView) RunStarted(f *wdchcl.TestFile, r *wdchcl.TestRun) {
	v.started = append(v.started, f.Path+"/"+r.Name)
}

func (v *recordingView) Planned(*wdchcl.Config, *plan.Plan, hcl.Diagnostics) { v.plans++ }
func (v *recordingView) Event(coordinator.Event)                             {}
func (v *recordingView) RunFinished(f *wdchcl.TestFile, r *RunResult) {
	v.finished = append(v.finished, string(r.Status))
}

func TestRunPlanCommands(t *testing.T) {
	t.Parallel()
	tests := `run "counts" {
  command = plan
  variables {
    shards = 3
  }
  assert {
    condition     = plan.changes == 4 && plan.exit_code == 2 && length(task.shard) == 3
    error_message = "three shards and a train"
  }
}

run "fails" {
  command = plan
  assert {
    condition     = plan.changes == 0
    error_message = "there are changes"
  }
}

run "unplaceable" {
  command = plan
  override_pool "gpu" {
    provider = "local"
  }
  variables {
    shards = 0
  }
  assert {
    condition     = task.train.status == ""
    error_message = "a plan runs nothing"
  }
}

run "bad_variable" {
  command = plan
  variables {
    shards = "many"
  }
}
`
	dir := writeConfig(t, map[string]string{"main.wdc.hcl": testConfig, "tests/plan.wdctest.hcl": tests})
	files, diags := wdchcl.LoadTestFiles(dir)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	v := &recordingView{}
	res, err := Run(context.Background(), Options{Dir: dir, DisplayDir: ".", Files: files, View: v, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(v.finished, " "); got != "pass fail pass error" {
		t.Fatalf("statuses = %s", got)
	}
	if res.Passed != 2 || res.Failed != 1 || res.Errored != 1 || res.Status() != StatusError || res.Files[0].Status() != StatusError {
		t.Fatalf("result = %+v", res)
	}
	fail := res.Files[0].Runs[1].Failures[0]
	if fail.Message != "there are changes" || len(fail.Values) != 1 || fail.Values[0].Ref != "plan.changes" || fail.Values[0].Value != "3" {
		t.Fatalf("failure = %+v", fail)
	}
	bad := res.Files[0].Runs[3]
	if !bad.Diags.HasErrors() || bad.Diags[0].Subject == nil || bad.Diags[0].Subject.Filename != filepath.Join(dir, "tests", "plan.wdctest.hcl") {
		t.Fatalf("bad variable: %v", bad.Diags)
	}
	if _, ok := bad.Files[bad.Diags[0].Subject.Filename]; !ok {
		t.Fatal("the test file is not among the run's files")
	}
	// The filters choose runs by name, file and file/name.
	for _, tc := range []struct {
		filters []string
		want    int
	}{{[]string{"counts"}, 1}, {[]string{"tests/plan.wdctest.hcl"}, 4}, {[]string{"tests/plan.wdctest.hcl/fails", "counts"}, 2}} {
		res, err := Run(context.Background(), Options{Dir: dir, Files: files, Filters: tc.filters, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if n := res.Passed + res.Failed + res.Errored; n != tc.want {
			t.Errorf("filters %v ran %d, want %d", tc.filters, n, tc.want)
		}
	}
	if _, err := Run(context.Background(), Options{Dir: dir, Files: files, Filters: []string{"nope"}}); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("err = %v, want ErrNoMatch", err)
	}
	// The user's directory holds what it held: no state, no folder.
	if _, err := os.Stat(filepath.Join(dir, ".wdc")); err == nil {
		t.Fatal("a run wrote into the configuration directory")
	}
}

// TestCopyConfigLinks: a link that leads inside the configuration
// directory leads to the same place in the copy, however it is written,
// so writes through it stay in the copy; one that leads outside leads
// there.
func TestCopyConfigLinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	src := writeConfig(t, map[string]string{"main.wdc.hcl": "", "data/f": "orig", "sub/x": ""})
	cases := []struct {
		name, link string
		wantIn     string // the path the copy's link leads to, inside the copy
		wantOut    string // or outside it
	}{
		{name: "absolute_inside", link: filepath.Join(src, "data"), wantIn: "data"},
		{name: "relative_inside", link: "data", wantIn: "data"},
		{name: "sub/relative_up", link: "../data/f", wantIn: "data/f"},
		{name: "absolute_outside", link: outside, wantOut: outside},
		{name: "sub/relative_outside", link: filepath.Join("..", "..", filepath.Base(outside)), wantOut: filepath.Join(filepath.Dir(src), filepath.Base(outside))},
	}
	for _, c := range cases {
		if err := os.Symlink(c.link, filepath.Join(src, c.name)); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := CopyConfig(src, dst, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := filepath.Join(dst, c.name)
			link, err := os.Readlink(at)
			if err != nil {
				t.Fatal(err)
			}
			to := link
			if !filepath.IsAbs(to) {
				to = filepath.Join(filepath.Dir(at), to)
			}
			want := c.wantOut
			if c.wantIn != "" {
				want = filepath.Join(dst, c.wantIn)
			}
			if filepath.Clean(to) != want {
				t.Errorf("the copy's link %s -> %s leads to %s, want %s", c.name, link, to, want)
			}
		})
	}
	// A write through the absolute link stays in the copy.
	if err := os.WriteFile(filepath.Join(dst, "absolute_inside", "f"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "data", "f")); string(b) != "orig" {
		t.Errorf("the checkout's data/f reads %q after a write through the copy's link", b)
	}
}

// The attributes wdc validate accepts in an assertion
// (wdchcl.TestTaskAttributes, TestPoolAttributes) are those the
// evaluation context has.
func TestAssertionAttributesMatchValidate(t *testing.T) {
	t.Parallel()
	var task []string
	for name := range taskType.AttributeTypes() {
		task = append(task, name)
	}
	if !sameSet(task, wdchcl.TestTaskAttributes) {
		t.Errorf("a task's attributes are %v; wdc validate accepts %v", task, wdchcl.TestTaskAttributes)
	}
	cfg := loadConfig(t, writeConfig(t, map[string]string{"main.wdc.hcl": "pool \"p\" {\n  provider = \"local\"\n}\n"}))
	pool := EvalContext(cfg, observed()).Variables["pool"].GetAttr("p")
	var attrs []string
	for name := range pool.Type().AttributeTypes() {
		attrs = append(attrs, name)
	}
	if !sameSet(attrs, wdchcl.TestPoolAttributes) {
		t.Errorf("a pool's attributes are %v; wdc validate accepts %v", attrs, wdchcl.TestPoolAttributes)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
