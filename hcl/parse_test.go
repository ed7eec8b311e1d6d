package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// pieceCases are sources whose top-level lines a rough scan can misread:
// every one must parse in pieces exactly as in one go.
var pieceCases = map[string]string{
	"heredoc":             "task \"a\" {\n  command = [<<EOT\n}\ntask \"b\" {\nEOT\n  ]\n}\n\ntask \"c\" {\n  command = [\"x\"]\n}\n",
	"indented heredoc":    "task \"a\" {\n  command = [<<-EOT\n    }\n    pool \"p\" {\n    EOT\n  ]\n}\npool \"q\" {\n  provider = \"local\"\n}\n",
	"block comment":       "/*\n}\ntask \"x\" {\n*/\ntask \"a\" {\n  command = [\"x\"] /* }\n}\npool \"p\" {\n */\n}\npool \"q\" {\n  provider = \"local\"\n}\n",
	"line comments":       "# pool \"p\" {\n// }\ntask \"a\" { # {\n  command = [\"x\"] // {\n}\n# between\ntask \"b\" {\n  command = [\"y\"]\n}\n",
	"strings":             "task \"a\" {\n  command = [\"{\", \"\\\"{\", \"${join(\"}\", [\"}\"])}\", \"%{ if true }{%{ endif }\"]\n}\ntask \"b\" {\n  command = [\"}\"]\n}\n",
	"multi-line template": "task \"a\" {\n  command = [\"${upper(\n\"}\")}\"]\n}\ntask \"b\" {\n  command = [\"${upper(\n\"b\")}\"]\n}\n",
	"broken template":     "task \"a\" {\n  command = [\"${\n}\"]\n}\ntask \"b\" {\n  command = [\"b\"]\n}\n",
	"urls and shifts":     "task \"a\" {\n  command = [\"http://x/*\", \"a << b\", \"#{\"]\n}\ntask \"b\" {\n  command = [\"y\"]\n}\n",
	"top-level attribute": "a = 1\ntask \"a\" {\n  command = [\"x\"]\n}\na = 2\n",
	"unformatted":         "task \"a\" {\ncommand = [\"x\"]\n}\ntask \"b\" { command = [\"y\"] }\npool \"p\" {\nprovider = \"local\"\n  }\n",
	"crlf":                "task \"a\" {\r\n  command = [\"x\"]\r\n}\r\n\r\ntask \"b\" {\r\n  command = [\"y\"]\r\n}\r\n",
	"bom":                 "\ufefftask \"a\" {\n  command = [\"x\"]\n}\ntask \"b\" {\n  command = [\"y\"]\n}\n",
	"error at the end":    "task \"a\" {\n  command = [\"x\"]\n}\ntask \"b\" {\n  command = [\"y\"\n}\n",
	"unclosed block":      "task \"a\" {\n  command = [\"x\"]\n\ntask \"b\" {\n  command = [\"y\"]\n}\n",
	"unclosed heredoc":    "task \"a\" {\n  command = [\"x\"]\n}\ntask \"b\" {\n  command = [<<EOT\n}\ntask \"c\" {\n}\n",
	"unicode":             "task \"ä\" {\n  command = [\"ü\", \"👩‍👩‍👧\"]\n}\ntask \"b\" {\n  command = [\"é\"]\n}\n",
	"no final newline":    "task \"a\" {\n  command = [\"x\"]\n}\ntask \"b\" {\n  command = [\"y\"]\n}",
}

// samePieces checks that parsing src in pieces of size bytes gives the
// file and diagnostics that hclsyntax.ParseConfig gives.
func samePieces(t *testing.T, src []byte, size int) int {
	t.Helper()
	want, wantDiags := hclsyntax.ParseConfig(src, "main.wdc.hcl", hcl.InitialPos)
	got, gotDiags, pieces := parsePieces(src, "main.wdc.hcl", size)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("size %d, %d pieces: the file differs from hclsyntax.ParseConfig's", size, pieces)
	}
	if !reflect.DeepEqual(gotDiags, wantDiags) {
		t.Fatalf("size %d, %d pieces: diagnostics %v, want %v", size, pieces, gotDiags, wantDiags)
	}
	return pieces
}

func TestParsePiecesSameAsHCL(t *testing.T) {
	for name, src := range pieceCases {
		t.Run(name, func(t *testing.T) {
			for _, size := range []int{1, 2, 7, 30, 1 << 20} {
				samePieces(t, []byte(src), size)
			}
		})
	}
	files, _ := filepath.Glob("testdata/*/*/*.wdc.hcl")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 16, 256} {
			samePieces(t, src, size)
		}
	}
}

// TestParsePiecesCuts checks that a large clean file is parsed in pieces
// and a broken one in one go, with the diagnostics HCL gives.
func TestParsePiecesCuts(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "# task %d\ntask \"t%d\" {\n  command = [\"true\", \"%d\"]\n  env     = { A = <<EOT\n}\nEOT\n  }\n}\n\n", i, i, i)
	}
	src := b.String()
	if n := samePieces(t, []byte(src), pieceSize); n < 3 {
		t.Errorf("%d bytes in %d pieces, want at least 3", len(src), n)
	}
	broken := src + "task \"last\" {\n"
	if n := samePieces(t, []byte(broken), pieceSize); n != 1 {
		t.Errorf("a broken file was parsed in %d pieces, want 1", n)
	}
	if _, diags := parseConfig([]byte(broken), "main.wdc.hcl"); !diags.HasErrors() {
		t.Error("no error for an unclosed block")
	}
}

// FuzzParsePieces checks that any input parses in pieces (as small as
// they come) exactly as hclsyntax.ParseConfig parses it in one go.
func FuzzParsePieces(f *testing.F) {
	for _, src := range pieceCases {
		f.Add([]byte(src))
	}
	files, _ := filepath.Glob("testdata/*/*/*.wdc.hcl")
	for _, s := range files {
		src, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		samePieces(t, src, 1)
	})
}
