package hcl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		cfg, diags := Load(dir, Inputs{Vars: []string{"x=1"}, Environ: []string{"WDC_VAR_y=[1]"}})
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
