package hcl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// FuzzLoad writes the input as main.wdc.hcl and loads it: Load must never
// panic (its recover turns a panic into an "Internal error" diagnostic,
// which fails the target too) and must always return a usable Config.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*/*.wdc.hcl")
	for _, s := range seeds {
		src, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := Load(dir, withProviders(Inputs{Vars: []string{"x=1"}, Environ: []string{"WDC_VAR_y=[1]"}}))
		if cfg == nil || cfg.Files == nil || cfg.Variables == nil || cfg.Locals == nil {
			t.Fatal("Load returned an unusable Config")
		}
		for _, d := range diags {
			if strings.HasPrefix(d.Summary, "Internal error") {
				t.Fatalf("%s\n%s", d.Summary, d.Detail)
			}
		}
		for _, tk := range cfg.Tasks {
			_ = tk.Address()
			if tk.Env == nil || tk.Placement == nil {
				t.Fatalf("%s: nil map", tk.Address())
			}
		}
		for _, p := range cfg.Pools {
			if p.Labels == nil {
				t.Fatalf("%s: nil labels", p.Address())
			}
		}
	})
}

// FuzzEdgeConvertInput converts arbitrary bytes with edges of each kind
// of input type: ConvertInput must never panic, and what it accepts is a
// known, non-null value of the edge's type that a proposal renders with.
func FuzzEdgeConvertInput(f *testing.F) {
	for _, s := range []string{
		`{"run": "1"}`, `{"run": 1, "n": 2}`, `{}`, `[]`, `null`, `"x"`, `{"run": null}`,
		`{"run": "1", "run": "2"}`, `{"a": {"b": [1, {"c": 1e400}]}}`, `{"n": -0.0000001e-999999}`,
		`{"run": "\u0000\ud800"}`, `{"job": {"ids": [1, 2]}}`, `  {"run":"x"}  `, `{`,
	} {
		f.Add([]byte(s))
	}
	cfg, diags := Load("testdata/valid/edges", withProviders(Inputs{}))
	if diags.HasErrors() {
		f.Fatal(diags.Error())
	}
	edges := append([]*Edge{}, cfg.Edges...)
	for _, input := range []string{"any", "object({ run = string, n = optional(number, 7) })", "object({ job = object({ ids = list(number) }) })", "map(number)"} {
		dir := f.TempDir()
		src := `task "a" {
  command = ["true"]
}
task "p" {
  proposed_only = true
  command       = ["echo", jsonencode(proposal.input), proposal.source.task]
}
edge "e" {
  from    = task.a
  type    = "t"
  propose = task.p
  input   = ` + input + `
}
`
		if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
			f.Fatal(err)
		}
		c, diags := Load(dir, withProviders(Inputs{}))
		if diags.HasErrors() {
			f.Fatal(diags.Error())
		}
		edges = append(edges, c.Edges...)
		cfg.ProposedTasks = append(cfg.ProposedTasks, c.ProposedTasks...)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, e := range edges {
			v, err := e.ConvertInput(raw)
			if err != nil {
				if strings.Contains(err.Error(), "cannot be read: ") && strings.Contains(err.Error(), "runtime error") {
					t.Fatalf("%s: %v", e.Address(), err)
				}
				continue
			}
			if v.IsNull() || !v.IsWhollyKnown() {
				t.Fatalf("%s: ConvertInput(%q) = %#v", e.Address(), raw, v)
			}
			if e.Input != cty.DynamicPseudoType {
				if errs := v.Type().TestConformance(e.Input.WithoutOptionalAttributesDeep()); len(errs) > 0 {
					t.Fatalf("%s: ConvertInput(%q) has type %#v: %v", e.Address(), raw, v.Type(), errs)
				}
			}
			// Rendering may fail (a null where a string is needed) but
			// never panics.
			_, diags := cfg.RenderProposal(e, v, ProposalSource{Task: "task.a", Attempt: 1})
			for _, d := range diags {
				if strings.HasPrefix(d.Summary, "Internal error") {
					t.Fatalf("%s: %s\n%s", e.Address(), d.Summary, d.Detail)
				}
			}
		}
	})
}

// FuzzParseTestFile parses arbitrary bytes as a test file: ParseTestFile
// must never panic (its recover turns a panic into an "Internal error"
// diagnostic, which fails the target too), must return a file, and every
// run it returns has a command and expressions for its asserts.
func FuzzParseTestFile(f *testing.F) {
	for _, s := range []string{
		"run \"a\" {\n}\n",
		"run \"a\" {\n  command = plan\n  variables {\n    n = 1\n  }\n}\n",
		"run \"a\" {\n  override_pool \"gpu\" {\n    provider = \"local\"\n  }\n  assert {\n    condition     = task.x[0].status == \"succeeded\"\n    error_message = \"x\"\n  }\n}\n",
		"run \"a\" {\n  fault \"kill_worker\" {\n    task = task.x\n  }\n}\n",
		"run \"a\" {\n  fault \"silence_worker\" {\n    task = task.x[2]\n    attempt = 2\n    duration = \"1m\"\n  }\n}\n",
		"run \"a\" {\n  fault \"fail_launch\" {\n    pool = pool.gpu\n    count = 2\n  }\n  fault \"late_result\" {\n    task = task.x\n  }\n}\n",
		"run {\n}\n", "run \"a\" \"b\" {}", "run \"a\" {\n  command = 1\n}\n", "{", "run \"\u0000\" {\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		tf, diags := ParseTestFile(src, "fuzz.wdctest.hcl")
		if tf == nil || tf.File == nil {
			t.Fatal("ParseTestFile returned no file")
		}
		for _, d := range diags {
			if strings.HasPrefix(d.Summary, "Internal error") {
				t.Fatalf("%s\n%s", d.Summary, d.Detail)
			}
		}
		for _, r := range tf.Runs {
			if r.Command != TestCommandApply && r.Command != TestCommandPlan {
				t.Fatalf("run %q has command %q", r.Name, r.Command)
			}
			for _, a := range r.Asserts {
				if a.Condition == nil || a.ErrorMessage == nil {
					t.Fatalf("run %q has an assert without expressions", r.Name)
				}
			}
		}
	})
}
