package hcl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

const inputsConfig = `
variable "s" {
  type    = string
  default = "def"
}
variable "n" {
  type    = number
  default = 1
}
variable "l" {
  type    = list(string)
  default = []
}
variable "m" {
  type    = map(string)
  default = {}
}
variable "b" {
  type    = bool
  default = false
}
variable "any" {
  default = "def"
}
variable "req" {
  type = string
}
`

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestInputs(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.wdc.hcl": inputsConfig,
		"a.vars":       "s = \"file-a\"\nn = 10\nl = [\"fa\"]\n",
		"b.vars":       "n = 20\n",
	})
	a, b := filepath.Join(dir, "a.vars"), filepath.Join(dir, "b.vars")
	req := []string{"req=r"}
	cases := []struct {
		name string
		in   Inputs
		want map[string]cty.Value
	}{
		{
			name: "defaults",
			in:   Inputs{Vars: req},
			want: map[string]cty.Value{"s": cty.StringVal("def"), "n": cty.NumberIntVal(1), "req": cty.StringVal("r")},
		},
		{
			name: "string literal with commas, quotes and equals",
			in:   Inputs{Vars: []string{`s=a,b "c" = d`, "req=x=y"}},
			want: map[string]cty.Value{"s": cty.StringVal(`a,b "c" = d`), "req": cty.StringVal("x=y")},
		},
		{
			name: "empty string",
			in:   Inputs{Vars: []string{"s=", "req="}},
			want: map[string]cty.Value{"s": cty.StringVal(""), "req": cty.StringVal("")},
		},
		{
			name: "list with commas",
			in:   Inputs{Vars: []string{`l=["a","b,c"]`, "req=r"}},
			want: map[string]cty.Value{"l": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b,c")})},
		},
		{
			name: "map, number and bool parsed as HCL",
			in:   Inputs{Vars: []string{`m={k = "v", "x y" = 2}`, "n=2.5", "b=true", "req=r"}},
			want: map[string]cty.Value{
				"m": cty.MapVal(map[string]cty.Value{"k": cty.StringVal("v"), "x y": cty.StringVal("2")}),
				"n": cty.NumberFloatVal(2.5),
				"b": cty.True,
			},
		},
		{
			name: "untyped: HCL literal or else the text",
			in:   Inputs{Vars: []string{"any=hello world", "req=r"}},
			want: map[string]cty.Value{"any": cty.StringVal("hello world")},
		},
		{
			name: "untyped: number",
			in:   Inputs{Vars: []string{"any=8", "req=r"}},
			want: map[string]cty.Value{"any": cty.NumberIntVal(8)},
		},
		{
			name: "untyped: list",
			in:   Inputs{Vars: []string{`any=["x"]`, "req=r"}},
			want: map[string]cty.Value{"any": cty.TupleVal([]cty.Value{cty.StringVal("x")})},
		},
		{
			name: "env",
			in:   Inputs{Environ: []string{"WDC_VAR_s=env", "WDC_VAR_n=7", "WDC_VAR_req=e", "WDC_VAR_nope=1", "WDC_VAR_=x", "WDC_VAR_l"}},
			want: map[string]cty.Value{"s": cty.StringVal("env"), "n": cty.NumberIntVal(7), "req": cty.StringVal("e")},
		},
		{
			name: "var files in order over env",
			in:   Inputs{Environ: []string{"WDC_VAR_s=env", "WDC_VAR_n=7", "WDC_VAR_req=e"}, VarFiles: []string{a, b}},
			want: map[string]cty.Value{"s": cty.StringVal("file-a"), "n": cty.NumberIntVal(20), "l": cty.ListVal([]cty.Value{cty.StringVal("fa")})},
		},
		{
			name: "flags over files, last flag wins",
			in:   Inputs{VarFiles: []string{b, a}, Vars: []string{"n=30", "req=r", "n=40"}},
			want: map[string]cty.Value{"s": cty.StringVal("file-a"), "n": cty.NumberIntVal(40)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, dir, c.in)
			for name, want := range c.want {
				if diff := cmp.Diff(want, cfg.Variables[name].Value, cmpOpts); diff != "" {
					t.Errorf("var.%s (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestInputErrors(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.wdc.hcl": inputsConfig,
		"bad.vars":     "s = \"ok\"\nnope = 1\nn = \"x\"\n",
		"syntax.vars":  "s = = 1\n",
		"ref.vars":     "s = var.n\n",
	})
	cases := []struct {
		name    string
		in      Inputs
		summary string
		detail  string
		file    string // expected Subject file ("" = no subject), base name
		line    int
	}{
		{name: "undeclared --var", in: Inputs{Vars: []string{"req=r", "nope=1"}}, summary: "Value for undeclared variable", detail: `no variable "nope" is declared`},
		{name: "--var without =", in: Inputs{Vars: []string{"req=r", "s"}}, summary: "Invalid --var option", detail: "NAME=VALUE"},
		{name: "--var wrong type", in: Inputs{Vars: []string{"req=r", "n=abc"}}, summary: "Variables not allowed", detail: "not a valid number value", file: "<value for --var n #2>", line: 1},
		{name: "--var unconvertible", in: Inputs{Vars: []string{"req=r", `l={a=1}`}}, summary: "Invalid value for variable", detail: "list of string required", file: "<value for --var l #2>", line: 1},
		{name: "--var syntax", in: Inputs{Vars: []string{`l=["a"`, "req=r"}}, summary: "", detail: "not a valid list(string) value", file: "<value for --var l>", line: 1},
		{name: "env wrong type", in: Inputs{Vars: []string{"req=r"}, Environ: []string{"WDC_VAR_b=maybe"}}, summary: "", detail: "from WDC_VAR_b", file: "<value for WDC_VAR_b>", line: 1},
		{name: "required", in: Inputs{}, summary: "No value for required variable", detail: "--var req=VALUE", file: "main.wdc.hcl", line: 25},
		{name: "undeclared in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "bad.vars")}}, summary: "Value for undeclared variable", detail: `"nope"`, file: "bad.vars", line: 2},
		{name: "wrong type in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "bad.vars")}}, summary: "Invalid value for variable", detail: "a number is required", file: "bad.vars", line: 3},
		{name: "syntax in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "syntax.vars")}}, summary: "Invalid expression", file: "syntax.vars", line: 1},
		{name: "reference in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "ref.vars")}}, summary: "Variables not allowed", file: "ref.vars", line: 1},
		{name: "missing var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "missing.vars")}}, summary: "Failed to read file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, diags := Load(dir, c.in)
			var found bool
			for _, d := range diags {
				if d.Severity != hcl.DiagError || !strings.Contains(d.Summary, c.summary) || !strings.Contains(d.Detail, c.detail) {
					continue
				}
				if c.file == "" {
					found = true
					break
				}
				if d.Subject != nil && filepath.Base(d.Subject.Filename) == c.file && d.Subject.Start.Line == c.line {
					found = true
					if _, ok := cfg.Files[d.Subject.Filename]; !ok {
						t.Errorf("Files lacks %q, so no snippet can be printed", d.Subject.Filename)
					}
					break
				}
			}
			if !found {
				var buf bytes.Buffer
				_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
				t.Errorf("no error %q / %q at %s:%d; got:\n%s", c.summary, c.detail, c.file, c.line, buf.String())
			}
		})
	}
}

func TestLoadDirErrors(t *testing.T) {
	for name, dir := range map[string]string{
		"empty":   t.TempDir(),
		"missing": filepath.Join(t.TempDir(), "nope"),
		"other":   writeDir(t, map[string]string{"main.hcl": "", "x.wdc.hcl.bak": ""}),
	} {
		t.Run(name, func(t *testing.T) {
			cfg, diags := Load(dir, Inputs{})
			if cfg == nil || cfg.Files == nil || cfg.Variables == nil {
				t.Fatal("Load must return a usable Config")
			}
			if !diags.HasErrors() {
				t.Fatal("want an error")
			}
		})
	}
}

func TestFilesIncludeEveryConfigFile(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.wdc.hcl": "pool \"p\" {\n  provider = \"local\"\n}\n",
		"b.wdc.hcl": "task \"t\" {\n  command = [\"x\"]\n}\n",
		"c.wdc.hcl": "task \"t\" {\n  command = [\"y\"]\n}\n",
	})
	cfg, diags := Load(dir, Inputs{})
	if len(cfg.Files) != 3 {
		t.Errorf("Files has %d entries, want 3", len(cfg.Files))
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "b.wdc.hcl:1") || !strings.HasSuffix(diags[0].Subject.Filename, "c.wdc.hcl") {
		t.Errorf("want one duplicate error in c.wdc.hcl naming b.wdc.hcl:1, got %v", diags)
	}
}
