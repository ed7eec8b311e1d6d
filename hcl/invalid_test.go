package hcl

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestInvalid loads every testdata/invalid/<case>/ directory. A line of
// its main.wdc.hcl that must carry an error ends with a comment
// "# ERROR: <text>" (several may follow each other); text must be a
// substring of the summary or detail of an error whose subject starts on
// that line. Every error must be annotated that way.
func TestInvalid(t *testing.T) {
	dirs, err := filepath.Glob("testdata/invalid/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no invalid fixtures")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			file := filepath.Join(dir, "main.wdc.hcl")
			want := annotations(t, file)
			if len(want) == 0 {
				t.Fatalf("%s has no # ERROR: annotations", file)
			}
			cfg, diags := Load(dir, withProviders(Inputs{}))
			if cfg == nil {
				t.Fatal("Load returned a nil Config")
			}
			if !diags.HasErrors() {
				t.Fatal("Load reported no errors")
			}
			got := map[int][]*hcl.Diagnostic{}
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				if d.Subject == nil {
					t.Errorf("error without a subject: %s: %s", d.Summary, d.Detail)
					continue
				}
				if filepath.Base(d.Subject.Filename) != "main.wdc.hcl" {
					t.Errorf("error in unexpected file %s: %s", d.Subject.Filename, d.Summary)
					continue
				}
				line := d.Subject.Start.Line
				if _, ok := want[line]; !ok {
					t.Errorf("unexpected error at line %d: %s: %s", line, d.Summary, d.Detail)
				}
				got[line] = append(got[line], d)
			}
			for line, subs := range want {
				for _, sub := range subs {
					found := false
					for _, d := range got[line] {
						if strings.Contains(d.Summary, sub) || strings.Contains(d.Detail, sub) {
							found = true
						}
					}
					if !found {
						var seen []string
						for _, d := range got[line] {
							seen = append(seen, d.Summary+": "+d.Detail)
						}
						t.Errorf("line %d: no error containing %q; got %q", line, sub, seen)
					}
				}
			}
			if t.Failed() {
				var buf bytes.Buffer
				_ = hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 100, false).WriteDiagnostics(diags)
				t.Log("\n" + buf.String())
			}
		})
	}
}

// annotations maps line numbers to the expected error substrings.
func annotations(t *testing.T, file string) map[int][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int][]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		parts := strings.Split(sc.Text(), "# ERROR:")
		for _, p := range parts[1:] {
			out[line] = append(out[line], strings.TrimSpace(p))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
