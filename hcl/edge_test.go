package hcl

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

func TestEdges(t *testing.T) {
	cfg, diags := Load("testdata/valid/edges", withProviders(Inputs{}))
	if len(diags) > 0 {
		t.Fatalf("Load: %s", diags.Error())
	}
	want := []*Edge{
		{Name: "flake_rerun", From: "ci_doctor", Type: "flake", Propose: "ci_rerun",
			Input: cty.Object(map[string]cty.Type{"run": cty.String}), Approval: ApprovalEarned, EarnAfter: 3},
		{Name: "tell", From: "ci_doctor", Type: "notify", Propose: "notify", Input: cty.Map(cty.String), Approval: ApprovalAlways},
		{Name: "chain", From: "ci_rerun", Type: "still_flaky", Propose: "notify", Input: cty.DynamicPseudoType, Approval: ApprovalEarned, EarnAfter: DefaultEarnAfter},
	}
	if diff := cmp.Diff(want, cfg.Edges, cmpOpts, cmpopts.IgnoreUnexported(Edge{})); diff != "" {
		t.Errorf("Edges (-want +got):\n%s", diff)
	}
	for _, tk := range cfg.Tasks {
		if tk.Name != "ci_doctor" {
			t.Errorf("Tasks holds %s; proposed_only tasks must not be planned", tk.Address())
		}
	}
	if len(cfg.Tasks) != 3 {
		t.Errorf("len(Tasks) = %d, want 3", len(cfg.Tasks))
	}
	var names []string
	for _, p := range cfg.ProposedTasks {
		names = append(names, p.Address())
	}
	if got := strings.Join(names, " "); got != "task.ci_rerun task.notify" {
		t.Errorf("ProposedTasks = %s", got)
	}
	if p := cfg.ProposedTask("ci_rerun"); p == nil || p.DeclRange.Start.Line != 16 {
		t.Errorf("ProposedTask(ci_rerun) = %+v", p)
	}
	if cfg.ProposedTask("ci_doctor") != nil || cfg.ProposedTask("nope") != nil {
		t.Error("ProposedTask finds a task that is not proposed_only")
	}
	if e := cfg.EdgeFor("ci_doctor", "flake"); e == nil || e.Name != "flake_rerun" {
		t.Errorf("EdgeFor(ci_doctor, flake) = %v", e)
	}
	if e := cfg.EdgeFor("ci_doctor", "still_flaky"); e != nil {
		t.Errorf("EdgeFor(ci_doctor, still_flaky) = %v, want nil", e)
	}
	if e := cfg.EdgeFor("ci_doctor[0]", "flake"); e != nil {
		t.Errorf("EdgeFor takes a block name, not an address; got %v", e)
	}
	if a := cfg.Edges[0].Address(); a != "edge.flake_rerun" {
		t.Errorf("Address = %q", a)
	}
	if r := cfg.Edges[0].DeclRange; r.Start.Line != 34 {
		t.Errorf("DeclRange = %v", r)
	}
}

func TestEdgeHash(t *testing.T) {
	base := Edge{Name: "e", From: "a", Type: "flake", Propose: "p", Input: cty.DynamicPseudoType, Approval: ApprovalAlways}
	h := base.Hash()
	if len(h) != 64 || strings.ToLower(h) != h {
		t.Fatalf("Hash = %q, want 64 lowercase hex digits", h)
	}
	same := base
	same.Name, same.DeclRange = "renamed", hcl.Range{Filename: "x", Start: hcl.Pos{Line: 9}}
	if same.Hash() != h {
		t.Error("the name or the range changed the hash")
	}
	for name, change := range map[string]func(*Edge){
		"from":       func(e *Edge) { e.From = "b" },
		"type":       func(e *Edge) { e.Type = "other" },
		"propose":    func(e *Edge) { e.Propose = "q" },
		"input":      func(e *Edge) { e.Input = cty.Map(cty.String) },
		"approval":   func(e *Edge) { e.Approval, e.EarnAfter = ApprovalEarned, 5 },
		"earn_after": func(e *Edge) { e.Approval, e.EarnAfter = ApprovalEarned, 6 },
	} {
		e := base
		if name == "earn_after" {
			e.Approval, e.EarnAfter = ApprovalEarned, 5
		}
		before := e.Hash()
		change(&e)
		if e.Hash() == before {
			t.Errorf("changing %s kept the hash", name)
		}
	}
	// The same edge loaded twice hashes alike; defaults count.
	a := loadEdges(t, `input = object({ run = optional(string, "x") })`)
	b := loadEdges(t, `input = object({ run = optional(string, "x") })`)
	c := loadEdges(t, `input = object({ run = optional(string, "y") })`)
	d := loadEdges(t, `input = object({ run = string })`)
	e := loadEdges(t, `input = object({ run = optional(string) })`)
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() || d.Hash() == e.Hash() || a.Hash() == e.Hash() {
		t.Errorf("hashes with optional attributes and defaults: %s %s %s %s %s", a.Hash(), b.Hash(), c.Hash(), d.Hash(), e.Hash())
	}
}

// writeMain writes src as main.wdc.hcl of a new directory.
func writeMain(t *testing.T, src string) string {
	t.Helper()
	return writeDir(t, map[string]string{"main.wdc.hcl": src})
}

// loadEdges loads a configuration with one edge e from task.a to task.p
// (which echoes its input) with the extra attributes attrs.
func loadEdges(t *testing.T, attrs string) *Edge {
	t.Helper()
	cfg := mustLoad(t, writeMain(t, `
task "a" {
  command = ["true"]
}
task "p" {
  proposed_only = true
  command       = ["echo", jsonencode(proposal.input)]
}
edge "e" {
  from    = task.a
  type    = "t"
  propose = task.p
  `+attrs+`
}
`), withProviders(Inputs{}))
	return cfg.Edges[0]
}

func TestConvertInput(t *testing.T) {
	object := loadEdges(t, `input = object({ run = string, n = optional(number, 7) })`)
	nested := loadEdges(t, `input = object({ job = object({ ids = list(number) }) })`)
	strs := loadEdges(t, `input = map(string)`)
	anything := loadEdges(t, ``)
	cases := []struct {
		name string
		edge *Edge
		raw  string
		want cty.Value
		err  string
	}{
		{name: "object", edge: object, raw: `{"run": "42", "n": 1}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("42"), "n": cty.NumberIntVal(1)})},
		{name: "default", edge: object, raw: `{"run": "42"}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("42"), "n": cty.NumberIntVal(7)})},
		{name: "number to string", edge: object, raw: `{"run": 42}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("42"), "n": cty.NumberIntVal(7)})},
		{name: "extra attributes dropped", edge: object, raw: `{"run": "1", "extra": true}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("1"), "n": cty.NumberIntVal(7)})},
		{name: "missing attribute", edge: object, raw: `{}`, err: `attribute "run" is required`},
		{name: "null attribute", edge: object, raw: `{"run": null}`, err: `attribute "run" is null, and it is required`},
		{name: "null optional attribute", edge: object, raw: `{"run": "1", "n": null}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("1"), "n": cty.NumberIntVal(7)})},
		{name: "wrong type", edge: object, raw: `{"run": ["a"]}`, err: `attribute "run": string required`},
		{name: "nested wrong type", edge: nested, raw: `{"job": {"ids": [1, "x"]}}`, err: `at .job.ids[1]: a number is required`},
		{name: "map", edge: strs, raw: `{"a": "x", "b": 2, "c": true}`,
			want: cty.MapVal(map[string]cty.Value{"a": cty.StringVal("x"), "b": cty.StringVal("2"), "c": cty.StringVal("true")})},
		{name: "map wrong type", edge: strs, raw: `{"a": {"b": 1}}`, err: `string required`},
		{name: "empty map", edge: strs, raw: `{}`, want: cty.MapValEmpty(cty.String)},
		{name: "any keeps everything", edge: anything, raw: `{"a": [1, "x"], "b": {"c": null}}`,
			want: cty.ObjectVal(map[string]cty.Value{
				"a": cty.TupleVal([]cty.Value{cty.NumberIntVal(1), cty.StringVal("x")}),
				"b": cty.ObjectVal(map[string]cty.Value{"c": cty.NullVal(cty.DynamicPseudoType)}),
			})},
		{name: "huge number", edge: anything, raw: `{"n": 1e400}`,
			want: cty.ObjectVal(map[string]cty.Value{"n": cty.MustParseNumberVal("1e400")})},
		{name: "huge number as string", edge: object, raw: `{"run": 123456789012345678901234567890}`,
			want: cty.ObjectVal(map[string]cty.Value{"run": cty.StringVal("123456789012345678901234567890"), "n": cty.NumberIntVal(7)})},
		{name: "number too large", edge: anything, raw: `{"n": 1e1001}`, err: "beyond 1e1000"},
		{name: "number too small", edge: anything, raw: `{"a": [{"n": -0.0000001e-999999}]}`, err: "closer to zero than 1e-1000"},
		{name: "number overflowing", edge: object, raw: `{"run": 1e99999999999999999999}`, err: "too large to read"},
		{name: "number too long", edge: anything, raw: `{"n": 1` + strings.Repeat("0", 1000) + `}`, err: "at most 1000"},
		{name: "zero with a huge exponent", edge: anything, raw: `{"n": 0e99999}`, want: cty.ObjectVal(map[string]cty.Value{"n": cty.Zero})},
		{name: "array", edge: anything, raw: `[1]`, err: "the input is not a JSON object"},
		{name: "string", edge: object, raw: `"x"`, err: "the input is not a JSON object"},
		{name: "null", edge: anything, raw: `null`, err: "the input is not a JSON object"},
		{name: "empty", edge: anything, raw: ``, err: "not valid JSON"},
		{name: "invalid JSON", edge: anything, raw: `{"a": }`, err: "not valid JSON"},
		{name: "trailing data", edge: anything, raw: `{} {}`, err: "not valid JSON"},
		{name: "duplicate key", edge: anything, raw: `{"a": 1, "a": 2}`, err: `the key "a" twice`},
		{name: "nested duplicate key", edge: anything, raw: `{"a": [{"b": 1}, {"b": 2, "c": {"d": [], "d": 1}}]}`, err: `the key "d" twice`},
		{name: "same key in two objects", edge: anything, raw: `{"a": {"b": 1}, "c": {"b": 2}, "b": [{"b": 3}]}`,
			want: cty.ObjectVal(map[string]cty.Value{
				"a": cty.ObjectVal(map[string]cty.Value{"b": cty.NumberIntVal(1)}),
				"c": cty.ObjectVal(map[string]cty.Value{"b": cty.NumberIntVal(2)}),
				"b": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"b": cty.NumberIntVal(3)})}),
			})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.edge.ConvertInput([]byte(c.raw))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ConvertInput(%s) = %#v, %v; want an error containing %q", c.raw, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ConvertInput(%s): %v", c.raw, err)
			}
			if !got.RawEquals(c.want) {
				t.Errorf("ConvertInput(%s) = %#v, want %#v", c.raw, got, c.want)
			}
		})
	}
}

func TestRenderProposal(t *testing.T) {
	cfg := mustLoad(t, "testdata/valid/edges", Inputs{})
	dir := abs(t, "testdata/valid/edges")
	flake := cfg.EdgeFor("ci_doctor", "flake")
	input, err := flake.ConvertInput([]byte(`{"run": "1234"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, diags := cfg.RenderProposal(flake, input, ProposalSource{Task: "task.ci_doctor[2]", Attempt: 3})
	if len(diags) > 0 {
		t.Fatalf("RenderProposal: %s", diags.Error())
	}
	want := task(filepath.Join(dir, "work"), "ci_rerun", -1, "sh", "-c", "echo rerun 1234 from task.ci_doctor[2] attempt 3")
	want.Env = map[string]string{"RUN": "1234", "TOKEN": "s3cr3t"}
	want.Outputs = []string{"report.txt"}
	want.Placement = map[string]string{"pool": "p"}
	want.Timeout = 10 * time.Minute
	want.Retry.MaxAttempts = 2
	want.Sensitive.EnvKeys = map[string]bool{"TOKEN": true}
	want.Sensitive.From = map[string][]string{"env.TOKEN": {"var.token"}}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
	if got.Address() != "task.ci_rerun" || got.DeclRange.Start.Line != 16 {
		t.Errorf("Address %s, DeclRange %v", got.Address(), got.DeclRange)
	}

	tell := cfg.EdgeFor("ci_doctor", "notify")
	chain := cfg.EdgeFor("ci_rerun", "still_flaky")
	errCases := []struct {
		name  string
		edge  *Edge
		input cty.Value
		err   string
	}{
		{name: "missing key", edge: tell, input: cty.MapValEmpty(cty.String), err: `The given key does not identify an element`},
		{name: "wrong input type", edge: flake, input: cty.ObjectVal(map[string]cty.Value{"other": cty.True}), err: `attribute "run" is required`},
		{name: "null command element", edge: chain, input: cty.ObjectVal(map[string]cty.Value{"who": cty.NullVal(cty.String)}), err: "must not be null"},
		{name: "list for a string", edge: chain, input: cty.ObjectVal(map[string]cty.Value{"who": cty.ListValEmpty(cty.String)}), err: "string required"},
		{name: "unknown input", edge: chain, input: cty.DynamicVal, err: "not known"},
		{name: "nil edge", edge: nil, err: "needs the edge"},
		{name: "edge of another configuration", edge: &Edge{Name: "x", Propose: "nope", Input: cty.DynamicPseudoType}, input: cty.EmptyObjectVal, err: "not a proposed_only task"},
	}
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			got, diags := cfg.RenderProposal(c.edge, c.input, ProposalSource{Task: "task.ci_doctor[0]", Attempt: 1})
			if got != nil || !diags.HasErrors() || !strings.Contains(diags.Error(), c.err) {
				t.Errorf("RenderProposal = %v, %v; want no task and an error containing %q", got, diags, c.err)
			}
		})
	}
}

func TestRenderProposalSensitive(t *testing.T) {
	cfg := mustLoad(t, writeMain(t, `
variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-value"
}
task "a" {
  command = ["true"]
}
task "p" {
  proposed_only = true
  command       = ["sh", "-c", "use ${var.token} for ${proposal.input.run}"]
  env           = { T = var.token, RUN = proposal.input.run }
}
edge "e" {
  from    = task.a
  type    = "t"
  propose = task.p
}
`), withProviders(Inputs{}))
	e := cfg.Edges[0]
	in, _ := e.ConvertInput([]byte(`{"run": "7"}`))
	tk, diags := cfg.RenderProposal(e, in, ProposalSource{Task: "task.a", Attempt: 1})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if !tk.Sensitive.Command || tk.Sensitive.Env || !tk.Sensitive.EnvKeys["T"] || tk.Sensitive.EnvKeys["RUN"] {
		t.Errorf("Sensitive = %+v", tk.Sensitive)
	}
	// An error about an expression with a sensitive value does not show it.
	in, _ = e.ConvertInput([]byte(`{"run": ["x"]}`))
	_, diags = cfg.RenderProposal(e, in, ProposalSource{Task: "task.a", Attempt: 1})
	if !diags.HasErrors() {
		t.Fatal("no error for a list in a template")
	}
	var buf bytes.Buffer
	_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
	if strings.Contains(buf.String(), "s3cr3t") {
		t.Errorf("diagnostics show the secret:\n%s", buf.String())
	}
}

// TestRenderProposalConcurrent renders proposals from 8 goroutines at once;
// run with -race.
func TestRenderProposalConcurrent(t *testing.T) {
	cfg := mustLoad(t, "testdata/valid/edges", Inputs{})
	flake := cfg.EdgeFor("ci_doctor", "flake")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				run := strings.Repeat("x", g) + string(rune('a'+i%26))
				in, err := flake.ConvertInput([]byte(`{"run": "` + run + `"}`))
				if err != nil {
					t.Error(err)
					return
				}
				tk, diags := cfg.RenderProposal(flake, in, ProposalSource{Task: "task.ci_doctor[1]", Attempt: i})
				if diags.HasErrors() {
					t.Error(diags.Error())
					return
				}
				if tk.Env["RUN"] != run {
					t.Errorf("RUN = %q, want %q", tk.Env["RUN"], run)
				}
			}
		}()
	}
	wg.Wait()
}

// TestProposedChecks: a proposed_only task is checked at load time with
// the input type of every edge that proposes it; one no edge proposes is
// a warning, which does not make the configuration invalid.
func TestProposedChecks(t *testing.T) {
	cfg, diags := Load(writeMain(t, `
task "a" {
  command = ["true"]
}
task "alone" {
  proposed_only = true
  command       = ["echo", proposal.input.anything, proposal.source.task]
  timeout       = proposal.input.t
}
`), withProviders(Inputs{}))
	if diags.HasErrors() {
		t.Fatalf("errors: %s", diags.Error())
	}
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || !strings.Contains(diags[0].Detail, "no edge block has propose = task.alone") {
		t.Errorf("diags = %v, want one warning", diags)
	}
	if len(cfg.ProposedTasks) != 1 || len(cfg.Tasks) != 1 {
		t.Errorf("Tasks %d, ProposedTasks %d", len(cfg.Tasks), len(cfg.ProposedTasks))
	}

	_, diags = Load(writeMain(t, `
task "a" {
  command = ["true"]
}
task "p" {
  proposed_only = true
  command       = ["echo", proposal.input.run]
}
edge "good" {
  from    = task.a
  type    = "one"
  propose = task.p
  input   = object({ run = string })
}
edge "other" {
  from    = task.a
  type    = "two"
  propose = task.p
  input   = object({ job = string })
}
`), withProviders(Inputs{}))
	if len(diags) != 1 || diags[0].Summary != "Unsupported attribute" || !strings.Contains(diags[0].Detail, "edge.other") {
		t.Errorf("diags = %v, want one error naming edge.other", diags)
	}
}
