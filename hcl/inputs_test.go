package hcl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
		"typo.vars":    "anyy = 1\n",
		"syntax.vars":  "s = = 1\n",
		"ref.vars":     "s = var.n\n",
		"empty.vars":   "req = \n",
		"dup.vars":     "req = \"a\"\nreq = \"b\"\n",
		"bad.json":     `{"req": "a",}`,
		"dup.json":     `{"req": "a", "req": "b"}`,
		"n.json":       `{"n": "x"}`,
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.vars"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.vars"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.vars"), make([]byte, MaxVarFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	const required = "No value for required variable"
	cases := []struct {
		name    string
		in      Inputs
		summary string
		detail  string
		file    string // expected Subject file ("" = no subject), base name
		line    int
		absent  []string // summaries no error may have
	}{
		{name: "undeclared --var", in: Inputs{Vars: []string{"req=r", "nope=1"}}, summary: "Value for undeclared variable", detail: `no variable "nope" is declared`},
		{name: "mistyped --var", in: Inputs{Vars: []string{"req=r", "reqq=1"}}, summary: "Value for undeclared variable", detail: `no variable "reqq" is declared in the configuration. Did you mean "req"?`},
		{name: "mistyped name in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "typo.vars")}}, summary: "Value for undeclared variable", detail: `Did you mean "any"?`, file: "typo.vars", line: 1},
		{name: "--var without =", in: Inputs{Vars: []string{"req=r", "s"}}, summary: "Invalid --var option", detail: "NAME=VALUE"},
		{name: "--var wrong type", in: Inputs{Vars: []string{"req=r", "n=abc"}}, summary: `Invalid value for variable "n"`, detail: `--var n is invalid: "abc" is not a number`, file: "<value of --var n>", line: 1,
			absent: []string{"Variables not allowed"}},
		{name: "--var wrong type, second time", in: Inputs{Vars: []string{"req=r", "n=1", "n=abc"}}, summary: `Invalid value for variable "n"`, detail: `"abc" is not a number`, file: "<value of --var n, occurrence 2>", line: 1},
		{name: "--var bool", in: Inputs{Vars: []string{"req=r", "b=yes"}}, summary: `Invalid value for variable "b"`, detail: `"yes" is not a bool (write true or false)`, file: "<value of --var b>", line: 1},
		{name: "--var unconvertible", in: Inputs{Vars: []string{"req=r", `l={a=1}`}}, summary: `Invalid value for variable "l"`, detail: `"{a=1}" is not a list(string): list of string required`, file: "<value of --var l>", line: 1},
		{name: "--var syntax", in: Inputs{Vars: []string{`l=["a"`, "req=r"}}, summary: `Invalid value for variable "l"`, detail: "is not a valid list(string) value: Unterminated tuple", file: "<value of --var l>", line: 1},
		{name: "--var reference in a list", in: Inputs{Vars: []string{`l=[a]`, "req=r"}}, summary: `Invalid value for variable "l"`, detail: "without references or function calls; quote strings", file: "<value of --var l>", line: 1,
			absent: []string{"Variables not allowed"}},
		{name: "env wrong type", in: Inputs{Vars: []string{"req=r"}, Environ: []string{"WDC_VAR_b=maybe"}}, summary: `Invalid value for variable "b"`, detail: `WDC_VAR_b is invalid: "maybe" is not a bool`, file: "<value of WDC_VAR_b>", line: 1},
		{name: "env number", in: Inputs{Vars: []string{"req=r"}, Environ: []string{"WDC_VAR_n=abc"}}, summary: `Invalid value for variable "n"`, detail: `"abc" is not a number`, file: "<value of WDC_VAR_n>", line: 1,
			absent: []string{"Variables not allowed"}},
		{name: "required", in: Inputs{}, summary: required, detail: "--var req=VALUE", file: "main.wdc.hcl", line: 25},
		{name: "undeclared in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "bad.vars")}}, summary: "Value for undeclared variable", detail: `The variables file`, file: "bad.vars", line: 2},
		{name: "wrong type in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "bad.vars")}}, summary: `Invalid value for variable "n"`, detail: "is not a number: a number is required", file: "bad.vars", line: 3},
		{name: "wrong type in JSON var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "n.json")}}, summary: `Invalid value for variable "n"`, detail: "is not a number: a number is required", file: "n.json", line: 1},
		{name: "required still reported after an unrelated var file error", in: Inputs{VarFiles: []string{filepath.Join(dir, "bad.vars")}}, summary: required, file: "main.wdc.hcl", line: 25},
		{name: "syntax in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "syntax.vars")}}, summary: "Invalid expression", file: "syntax.vars", line: 1},
		{name: "reference in var file", in: Inputs{Vars: []string{"req=r"}, VarFiles: []string{filepath.Join(dir, "ref.vars")}}, summary: "Variables not allowed", file: "ref.vars", line: 1},
		{name: "missing var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "missing.vars")}}, summary: "Cannot read variables file", detail: "missing.vars could not be read: no such file or directory",
			absent: []string{required, "configuration file"}},
		{name: "missing JSON var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "missing.json")}}, summary: "Cannot read variables file", detail: "missing.json could not be read: no such file or directory",
			absent: []string{required, "Failed to read file"}},
		{name: "directory as var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "sub.vars")}}, summary: "Cannot read variables file", detail: "could not be read: it is a directory, not a regular file",
			absent: []string{required}},
		{name: "FIFO as var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "fifo.vars")}}, summary: "Cannot read variables file", detail: "could not be read: it is a FIFO (named pipe), not a regular file",
			absent: []string{required}},
		{name: "var file over the limit", in: Inputs{VarFiles: []string{filepath.Join(dir, "big.vars")}}, summary: "Cannot read variables file",
			detail: "could not be read: it is 8,388,609 bytes, more than the 8 MiB (8,388,608 bytes) allowed", absent: []string{required}},
		{name: "empty value in var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "empty.vars")}}, summary: "Invalid expression", file: "empty.vars", line: 1,
			absent: []string{required}},
		{name: "duplicate name in var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "dup.vars")}}, summary: "", detail: `"req" was already set`, file: "dup.vars", line: 2,
			absent: []string{required}},
		{name: "malformed JSON var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "bad.json")}}, summary: "", file: "bad.json", line: 1,
			absent: []string{required}},
		{name: "duplicate name in JSON var file", in: Inputs{VarFiles: []string{filepath.Join(dir, "dup.json")}}, summary: "", detail: `"req" was already set`, file: "dup.json", line: 1,
			absent: []string{required}},
		{name: "--var for a required variable without =", in: Inputs{Vars: []string{"req"}}, summary: "Invalid --var option", detail: `"req"`,
			absent: []string{required}},
		{name: "--var with an empty name", in: Inputs{Vars: []string{"=x"}}, summary: "Invalid --var option",
			absent: []string{required}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, diags := Load(dir, withProviders(c.in))
			var found bool
			for _, d := range diags {
				for _, a := range c.absent {
					if strings.Contains(d.Summary, a) || strings.Contains(d.Detail, a) {
						t.Errorf("unwanted error %q: %s", d.Summary, d.Detail)
					}
				}
				if d.Severity != hcl.DiagError || !strings.Contains(d.Summary, c.summary) || !strings.Contains(d.Detail, c.detail) {
					continue
				}
				if c.file == "" {
					found = true
					continue
				}
				if d.Subject != nil && filepath.Base(d.Subject.Filename) == c.file && d.Subject.Start.Line == c.line {
					found = true
					if _, ok := cfg.Files[d.Subject.Filename]; !ok {
						t.Errorf("Files lacks %q, so no snippet can be printed", d.Subject.Filename)
					}
				}
			}
			if !found || t.Failed() {
				var buf bytes.Buffer
				_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
				t.Errorf("want error %q / %q at %s:%d; got:\n%s", c.summary, c.detail, c.file, c.line, buf.String())
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
			cfg, diags := Load(dir, withProviders(Inputs{}))
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
	cfg, diags := Load(dir, withProviders(Inputs{}))
	if len(cfg.Files) != 3 {
		t.Errorf("Files has %d entries, want 3", len(cfg.Files))
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "b.wdc.hcl:1") || !strings.HasSuffix(diags[0].Subject.Filename, "c.wdc.hcl") {
		t.Errorf("want one duplicate error in c.wdc.hcl naming b.wdc.hcl:1, got %v", diags)
	}
}

func TestListen(t *testing.T) {
	cases := []struct {
		listen string
		err    string // "" = valid
	}{
		{listen: "localhost"},
		{listen: "127.0.0.1"},
		{listen: "::1"},
		{listen: "0.0.0.0:7070"},
		{listen: ":7070"},
		{listen: "[::1]:0"},
		{listen: "host:65535"},
		{listen: "", err: "listen must not be empty; remove the attribute to use the default"},
		{listen: "host:65536", err: `the port "65536" must be a number from 0 to 65535`},
		{listen: "host:-1", err: `the port "-1" must be a number`},
		{listen: "host:http", err: `the port "http" must be a number`},
		{listen: "host:", err: `the port "" must be a number`},
		{listen: "[::1]", err: "a bracketed IPv6 address needs a port"},
		{listen: "a:b:c", err: `"a:b:c" is not a listen address: too many colons`},
		{listen: "[a:b]:1", err: `"a:b" is not an IPv6 address`},
		{listen: "local host", err: "holds a space or a slash"},
		{listen: "http://host:80", err: "holds a space or a slash"},
	}
	for _, c := range cases {
		t.Run(c.listen, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"main.wdc.hcl": fmt.Sprintf("wdc {\n  listen = %q\n}\n", c.listen)})
			cfg, diags := Load(dir, withProviders(Inputs{}))
			if c.err == "" {
				if diags.HasErrors() {
					t.Fatalf("unexpected errors: %v", diags)
				}
				if cfg.Settings.Listen != c.listen {
					t.Errorf("Listen = %q, want %q", cfg.Settings.Listen, c.listen)
				}
				return
			}
			if len(diags) != 1 || !strings.Contains(diags[0].Detail, c.err) || diags[0].Subject == nil || diags[0].Subject.Start.Line != 2 {
				t.Fatalf("want one error at line 2 containing %q, got %v", c.err, diags)
			}
			if cfg.Settings.Listen != "" {
				t.Errorf("Listen = %q after an error, want \"\"", cfg.Settings.Listen)
			}
		})
	}
}

// TestSkipsEditorFiles: hidden and editor files are not configuration
// files, even when they end in .wdc.hcl (an Emacs lock file is a dangling
// symbolic link named .#main.wdc.hcl).
func TestSkipsEditorFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.wdc.hcl":        "task \"t\" {\n  command = [\"true\"]\n}\n",
		".hidden.wdc.hcl":     "not hcl {",
		"#main.wdc.hcl#":      "not hcl {",
		"#auto.wdc.hcl":       "not hcl {",
		"backup.wdc.hcl~":     "not hcl {",
		"also.wdc.hcl#":       "not hcl {",
		"main.wdc.hcl.orig~":  "not hcl {",
		".#other.wdc.hcl.tmp": "not hcl {",
	})
	if err := os.Symlink("user@host.1234:1700000000", filepath.Join(dir, ".#main.wdc.hcl")); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, dir, Inputs{})
	if len(cfg.Files) != 1 || len(cfg.Tasks) != 1 {
		t.Errorf("want only main.wdc.hcl loaded, got files %v", cfg.Files)
	}

	only := writeDir(t, map[string]string{".x.wdc.hcl": "task \"t\" {\n  command = [\"true\"]\n}\n"})
	if _, diags := Load(only, withProviders(Inputs{})); !diags.HasErrors() || diags[0].Summary != "No configuration files" {
		t.Errorf("a directory with only hidden files: want No configuration files, got %v", diags)
	}
}

func TestUnreadableConfigFile(t *testing.T) {
	dir := writeDir(t, map[string]string{"a.wdc.hcl": "task \"t\" {\n  command = [\"true\"]\n}\n"})
	if err := os.Symlink("nowhere", filepath.Join(dir, "b.wdc.hcl")); err != nil {
		t.Fatal(err)
	}
	_, diags := Load(dir, withProviders(Inputs{}))
	if len(diags) != 1 || diags[0].Summary != "Cannot read configuration file" || !strings.Contains(diags[0].Detail, "b.wdc.hcl could not be read: no such file or directory") {
		t.Errorf("want one read error giving the reason, got %v", diags)
	}
}

func TestSensitiveInputErrorsDoNotEchoTheValue(t *testing.T) {
	dir := t.TempDir()
	src := "variable \"pin\" {\n  type      = number\n  sensitive = true\n}\n\npool \"p\" {\n  provider = \"local\"\n}\n\ntask \"t\" {\n  command = [\"echo\", var.pin]\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []Inputs{{Vars: []string{"pin=SECRETPIN"}}, {Environ: []string{"WDC_VAR_pin=SECRETPIN"}}} {
		cfg, diags := Load(dir, withProviders(in))
		if !diags.HasErrors() {
			t.Fatalf("%+v: want an error", in)
		}
		var buf strings.Builder
		w := hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false)
		_ = w.WriteDiagnostics(diags)
		if strings.Contains(buf.String(), "SECRETPIN") || !strings.Contains(buf.String(), "(sensitive)") {
			t.Errorf("%+v: diagnostics echo the sensitive value or do not say it is hidden:\n%s", in, buf.String())
		}
	}
}

func TestSensitiveFieldsFollowReferences(t *testing.T) {
	dir := t.TempDir()
	src := `variable "token" {
  type      = string
  default   = "abc-def"
  sensitive = true
}

variable "plain" {
  default = "x"
}

locals {
  derived = upper(var.token)
  twice   = "${local.derived}-2"
  open    = var.plain
}

pool "p" {
  provider = "local"
  labels   = { k = local.twice }
}

task "secret" {
  command   = concat(["echo"], split("-", var.token))
  env       = { T = local.twice }
  dir       = path.root
  placement = { k = local.twice }
}

task "open" {
  command = ["echo", local.open]
  env     = { P = var.plain }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, withProviders(Inputs{}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := map[string]SensitiveFields{
		"task.secret": {Command: true, EnvKeys: map[string]bool{"T": true}, PlacementKeys: map[string]bool{"k": true},
			From: map[string][]string{"command": {"var.token"}, "env.T": {"local.twice"}}},
		"task.open": {},
	}
	for _, tk := range cfg.Tasks {
		if diff := cmp.Diff(want[tk.Address()], tk.Sensitive, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Sensitive (-want +got):\n%s", tk.Address(), diff)
		}
	}
	if p := cfg.Pools[0]; p.SensitiveLabels || !p.SensitiveLabelKeys["k"] {
		t.Errorf("pool label k computed from a sensitive variable: whole %v, keys %v; want only k flagged", p.SensitiveLabels, p.SensitiveLabelKeys)
	}
}

func TestExpressionErrorsDoNotShowSensitiveValues(t *testing.T) {
	dir := t.TempDir()
	src := `variable "tok" {
  type      = string
  sensitive = true
}

locals {
  l = upper(var.tok)
  n = tonumber(local.l)
  m = local.l + 1
}

pool "p" {
  provider = "local"
}

task "t" {
  command = ["echo", format("%d", var.tok)]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, withProviders(Inputs{Vars: []string{"tok=zzsecretaa-bbqq77"}}))
	if !diags.HasErrors() {
		t.Fatal("want errors")
	}
	var buf strings.Builder
	_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
	out := strings.ToLower(buf.String())
	if strings.Contains(out, "zzsecretaa") || strings.Contains(out, "bbqq77") {
		t.Errorf("diagnostics show the sensitive value:\n%s", buf.String())
	}
}

// TestInputNotARegularFile: an input pattern that matches a FIFO (or a
// device behind a link) is an error saying what it is.
func TestInputNotARegularFile(t *testing.T) {
	dir := writeMain(t, `
task "t" {
  command = ["true"]
  inputs  = ["data/*"]
}
`)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "data", "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "data", "zero")); err != nil {
		t.Fatal(err)
	}
	_, diags := Load(dir, Inputs{})
	var got string
	for _, d := range diags {
		got += d.Detail + "\n"
	}
	for _, want := range []string{
		`Input "data/*" matches data/pipe, which is a FIFO (named pipe), not a regular file.`,
		`Input "data/*": data/zero is a symbolic link to /dev/zero, outside the configuration directory`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics %q\nlack %q", got, want)
		}
	}
}

// TestInputFileNameMustTravel: an inputs pattern that matches a file whose
// name would read otherwise where the task runs (a backslash is a
// separator on Windows) is an error at the attribute, not a refusal when
// the attempt starts.
func TestInputFileNameMustTravel(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.wdc.hcl": "pool \"p\" {\n  provider = \"local\"\n}\n\ntask \"t\" {\n  command = [\"true\"]\n  inputs  = [\"*.txt\"]\n}\n",
		`a\b.txt`:      "x",
	})
	_, diags := Load(dir, withProviders(Inputs{}))
	if !diags.HasErrors() {
		t.Fatal("an input file named a\\b.txt was accepted")
	}
	d := diags[0]
	if d.Summary != "Invalid input file name" || !strings.Contains(d.Detail, "holds a backslash") || d.Subject == nil || d.Subject.Start.Line != 7 {
		t.Errorf("diagnostic %s: %s at %v; want Invalid input file name saying it holds a backslash, at line 7", d.Summary, d.Detail, d.Subject)
	}
}
