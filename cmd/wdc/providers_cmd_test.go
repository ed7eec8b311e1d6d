package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/providers"
)

// providersConfig has a local pool, an external pool and a second local
// pool.
const providersConfig = `
pool "builders" {
  provider = "local"
  max      = 2
}

pool "edge" {
  provider = "external"
}

pool "spare" {
  provider = "local"
}

task "t" {
  command = ["true"]
}
`

// brokenEntry is a registry entry of a provider that fails its contract.
var brokenEntry = providers.Entry{
	Info: providers.Info{Name: "broken", Source: "test", Summary: "a provider that lies",
		Capabilities: providers.Capabilities{Render: true}},
	Status: providers.StatusInvalid,
	Err: &providers.ContractError{Provider: "broken", Rule: providers.RuleRender,
		Detail: "Info claims Render, but *fake.Provider has no RenderLaunch method (providers.Renderer)"},
}

// listProviders runs `wdc --chdir DIR providers [--json]` on the entries
// given instead of the registry's.
func listProviders(t *testing.T, dir string, jsonOut bool, entries []providers.Entry) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{flags: &CLI{Chdir: dir}, stdout: &out, stderr: &errb, environ: []string{"NO_COLOR=1"}, now: time.Now}
	err = (&ProvidersCmd{JSON: jsonOut}).list(e, entries)
	return out.String(), errb.String(), err
}

func TestProvidersTable(t *testing.T) {
	dir := writeConfig(t, providersConfig)
	stdout, stderr, code := runWDC(t, "--chdir", dir, "providers")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := [][]string{
		{"NAME", "SOURCE", "STATUS", "RENDER", "DRY RUN", "CLUSTER WRITES", "POOLS", "SUMMARY"},
		{"external", "built-in", "available", "no", "no", "not applicable", "edge", "workers that join"},
		{"kubernetes", "built-in", "available", "yes", "yes", "disabled", "-", "Kubernetes Jobs"},
		{"local", "built-in", "available", "yes", "no", "not applicable", "builders,spare", "worker processes on this machine"},
		{"ray", "built-in", "available", "yes", "yes", "disabled", "-", "Ray jobs"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, cells := range want {
		rest := lines[i]
		for _, c := range cells {
			j := strings.Index(rest, c)
			if j < 0 {
				t.Errorf("line %d %q lacks %q (or has it out of order)", i+1, lines[i], c)
				break
			}
			rest = rest[j+len(c):]
		}
	}
}

func TestProvidersWithoutAConfiguration(t *testing.T) {
	for name, tt := range map[string]struct{ config, note string }{
		"no configuration":                   {"", "Pools are not shown: no configuration (*.wdc.hcl) in "},
		"a configuration that does not load": {"pool \"p\" {\n  provider = \"ray\"\n}\n", "(wdc validate shows why)."},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				dir = writeConfig(t, tt.config)
			}
			stdout, stderr, code := runWDC(t, "--chdir", dir, "providers")
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q: the listing needs no configuration", code, stderr)
			}
			if !strings.Contains(stdout, tt.note) || strings.Contains(stdout, "builders") {
				t.Errorf("stdout lacks %q:\n%s", tt.note, stdout)
			}
			stdout, _, code = runWDC(t, "--chdir", dir, "providers", "--json")
			var doc providersDoc
			if err := json.Unmarshal([]byte(stdout), &doc); code != 0 || err != nil {
				t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
			}
			if doc.Configuration.Loaded || doc.Configuration.Note == "" || doc.Configuration.Dir != dir {
				t.Errorf("configuration = %+v, want not loaded, a note, dir %s", doc.Configuration, dir)
			}
			for _, p := range doc.Providers {
				if len(p.Pools) != 0 {
					t.Errorf("%s has pools %v without a configuration", p.Name, p.Pools)
				}
			}
		})
	}
}

// TestProvidersContractError: a provider that fails its contract is
// listed as invalid, its error goes to stderr, and the command exits 1,
// in text and in JSON.
func TestProvidersContractError(t *testing.T) {
	dir := writeConfig(t, providersConfig)
	entries := append(providers.List(), brokenEntry)
	wantErr := "wdc: error: provider \"broken\" fails its contract (render): Info claims Render, but *fake.Provider has no RenderLaunch method (providers.Renderer)\n"

	stdout, stderr, err := listProviders(t, dir, false, entries)
	var ee errExit
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("err = %v, want exit 1", err)
	}
	if stderr != wantErr {
		t.Errorf("stderr = %q, want %q", stderr, wantErr)
	}
	if !strings.Contains(stdout, "broken") || !strings.Contains(stdout, "invalid") || !strings.Contains(stdout, "local ") {
		t.Errorf("the table does not list every provider with the broken one invalid:\n%s", stdout)
	}

	stdout, stderr, err = listProviders(t, dir, true, entries)
	if !errors.As(err, &ee) || ee.code != 1 || stderr != wantErr {
		t.Errorf("--json: err = %v, stderr %q; want exit 1 and the error", err, stderr)
	}
	var doc providersDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Summary.Invalid != 1 {
		t.Errorf("summary = %+v, want 1 invalid", doc.Summary)
	}
	for _, p := range doc.Providers {
		if p.Name == "broken" && (p.Status != "invalid" || p.Error == nil || p.Error.Rule != "render") {
			t.Errorf("broken = %+v, want invalid with a render error", p)
		}
	}
}
