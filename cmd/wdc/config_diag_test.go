package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// TestPrintableFiles: a diagnostic's source snippet shows what a terminal
// would act on (escape sequences, bells, bidirectional overrides, invalid
// UTF-8) as "?", one per byte, so that byte offsets still point where they
// did, and leaves plain text, tabs and non-ASCII letters alone.
func TestPrintableFiles(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"plain", `bogus = "plain"`, `bogus = "plain"`},
		{"tab and letters", "bogus = \"\tgrüße\"", "bogus = \"\tgrüße\""},
		{"an escape sequence", "bogus = \"\x1b[31mred\x1b[0m\"", `bogus = "?[31mred?[0m"`},
		{"a title and a bell", "bogus = \"\x1b]0;title\x07\"", `bogus = "?]0;title?"`},
		{"a bidirectional override", "bogus = \"a\u202eb\"", `bogus = "a???b"`},
		{"a C1 control", "bogus = \"a\u009bb\"", `bogus = "a??b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := []byte("x {\n  " + tt.line + "\n}\n")
			p := hclparse.NewParser()
			f, diags := p.ParseHCL(src, "main.wdc.hcl")
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			files := printableFiles(map[string]*hcl.File{"main.wdc.hcl": f})
			if got := files["main.wdc.hcl"]; len(got.Bytes) != len(src) {
				t.Fatalf("%d bytes, want %d: offsets moved", len(got.Bytes), len(src))
			}
			var out bytes.Buffer
			w := hcl.NewDiagnosticTextWriter(&out, files, 100, false)
			rng := hcl.Range{Filename: "main.wdc.hcl", Start: hcl.Pos{Line: 2, Column: 3, Byte: 6}, End: hcl.Pos{Line: 2, Column: 8, Byte: 11}}
			if err := w.WriteDiagnostic(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported argument", Subject: &rng}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "2:   "+tt.want+"\n") {
				t.Errorf("snippet:\n%s\nwant the line %q", out.String(), tt.want)
			}
			if strings.ContainsAny(out.String(), "\x1b\x07\u202e\u009b") {
				t.Errorf("a control character reached the output: %q", out.String())
			}
		})
	}
}
