package jsonplan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	_ "github.com/wdc-dev/wdc/providers/local" // the configuration's pool is local
	"github.com/wdc-dev/wdc/state"
)

const config = `
variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t"
}

variable "port" {
  sensitive = true
  default   = 8443
}

pool "p" {
  provider = "local"
}

task "t" {
  command = ["curl", "-H", "Authorization: ${var.token}", "https://example.com:${var.port}"]
  env     = { TOKEN = var.token, UPPER = upper(var.token), PLAIN = "x" }
}
`

// A sensitive value is hidden wherever its text appears, and a value
// computed from one is hidden whole; nothing of it reaches the document.
func TestNewHidesSensitiveValues(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	p, diags := plan.New(cfg, state.EmptySnapshot(), time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), plan.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	doc, err := New(cfg, p, nil, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cr3t", "S3CR3T", "8443"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the document holds %q:\n%s", secret, b)
		}
	}
	if v := doc.Variables["token"]; !v.Sensitive || string(v.Value) != `"(sensitive)"` {
		t.Errorf("variable token = %s (sensitive %v)", v.Value, v.Sensitive)
	}
	if len(doc.Changes) != 1 || doc.Changes[0].After == nil {
		t.Fatalf("changes %+v", doc.Changes)
	}
	a := doc.Changes[0].After
	if a.Env["PLAIN"] != "x" || a.Env["TOKEN"] != Sensitive || a.Env["UPPER"] != Sensitive {
		t.Errorf("env = %v, want PLAIN shown and TOKEN, UPPER hidden", a.Env)
	}
	if doc.FormatVersion != FormatVersion || doc.WDCVersion != "1.0.0" || doc.Configuration.VariablesSalt == "" {
		t.Errorf("format %q, wdc %q, salt %q", doc.FormatVersion, doc.WDCVersion, doc.Configuration.VariablesSalt)
	}
	if hash, err := VariablesHash(cfg, doc.Configuration.VariablesSalt, nil); err != nil || hash != doc.Configuration.VariablesHash {
		t.Errorf("VariablesHash = %s, %v; the document recorded %s", hash, err, doc.Configuration.VariablesHash)
	}
	if files, hash := ConfigHash(cfg); hash != doc.Configuration.Hash || strings.Join(files, ",") != "main.wdc.hcl" {
		t.Errorf("ConfigHash = %v, %s; the document recorded %s", files, hash, doc.Configuration.Hash)
	}
}

// The longest secret is replaced first, so one that contains another is
// hidden whole; numbers and bools inside a sensitive value are secrets too.
func TestRedactorLongestFirst(t *testing.T) {
	dir := t.TempDir()
	src := "variable \"v\" {\n  sensitive = true\n  default   = { a = \"ab\", b = \"abcd\", n = 12, on = true }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := NewRedactor(cfg).Text("x abcd ab 12 true"); got != "x (sensitive) (sensitive) (sensitive) (sensitive)" {
		t.Errorf("Text = %q", got)
	}
	if got := (&Redactor{}).Text("abcd"); got != "abcd" {
		t.Errorf("the zero Redactor changed %q", got)
	}
}
