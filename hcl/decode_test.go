package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestDecodeTaskBodySameAsGohcl checks decodeTaskBody against
// gohcl.DecodeBody on every task block of the test configurations, on a
// block that sets every attribute of taskSchema (so an attribute added to
// taskBody and not to decodeTaskBody fails here), and on broken blocks.
func TestDecodeTaskBodySameAsGohcl(t *testing.T) {
	var all strings.Builder
	all.WriteString("task \"all\" {\n")
	for _, a := range taskSchema.Attributes {
		fmt.Fprintf(&all, "  %s = 1\n", a.Name)
	}
	all.WriteString("}\n")
	sources := []string{
		all.String(),
		"task \"a\" {\n}\n",
		"task \"a\" {\n  command = [\"x\"]\n  command = [\"y\"]\n}\n",
		"task \"a\" {\n  command = [\"x\"]\n  unknown = 1\n}\n",
		"task \"a\" {\n  command = [\"x\"]\n  lease {\n    grace = \"1m\"\n  }\n  lease {\n  }\n}\n",
		"task \"a\" {\n  command = [\"x\"]\n  retry {\n    max_attempts = 2\n  }\n  input \"i\" {\n    from   = task.b\n    output = \"*\"\n  }\n}\n",
		"task \"a\" {\n  command = [\"x\"]\n  nested {\n  }\n}\n",
	}
	files, _ := filepath.Glob("testdata/*/*/*.wdc.hcl")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(src))
	}
	blocks := 0
	for _, src := range sources {
		f, _ := hclsyntax.ParseConfig([]byte(src), "main.wdc.hcl", hcl.InitialPos)
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type != "task" {
				continue
			}
			blocks++
			var got, want taskBody
			gotDiags := decodeTaskBody(b.Body, &got)
			wantDiags := gohcl.DecodeBody(b.Body, nil, &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: decodeTaskBody gives\n%#v\nwant (gohcl)\n%#v", b.DefRange(), got, want)
			}
			if !reflect.DeepEqual(gotDiags, wantDiags) {
				t.Errorf("%s: diagnostics %v, want %v", b.DefRange(), gotDiags, wantDiags)
			}
		}
	}
	if blocks < 20 {
		t.Fatalf("only %d task blocks checked", blocks)
	}
}
