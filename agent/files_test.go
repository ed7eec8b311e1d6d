package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wdc-dev/wdc/protocol"
)

// TestArtifactNamesStayInTheAttemptDirectory: the outputs an agent
// collects and the inputs it places have names that cannot leave the
// attempt's directory (protocol.CheckArtifactName): a pattern reaching
// out of it, or a file whose name holds a backslash, fails the collection
// naming it; an input path that leaves the directory is refused.
func TestArtifactNamesStayInTheAttemptDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "attempt")
	for name, content := range map[string]string{
		filepath.Join(root, "secret"):           "outside",
		filepath.Join(dir, "out", "r.txt"):      "ok",
		filepath.Join(dir, "odd", `a\b`):        "odd",
		filepath.Join(dir, "odd", "plain.txt"):  "plain",
		filepath.Join(dir, "deep", "x", "y.md"): "deep",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		patterns []string
		want     string // a part of the error; "" = collected
		names    []string
	}{
		{[]string{"out/*", "deep/*/*.md"}, "", []string{"deep/x/y.md", "out/r.txt"}},
		{[]string{"../secret"}, `output pattern "../secret" has a "." or ".." part`, nil},
		{[]string{"out/../../secret"}, `has a "." or ".." part`, nil},
		{[]string{"odd/*"}, `output "odd/a\\b", which "odd/*" matches, holds a backslash`, nil},
		{[]string{"/etc/passwd"}, "is absolute", nil},
	} {
		outs, err := collectOutputs(dir, c.patterns)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.patterns, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v (outputs %+v); want an error saying %q", c.patterns, err, outs, c.want)
		case c.want == "":
			var names []string
			for _, o := range outs {
				names = append(names, o.ref.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.names, ",") {
				t.Errorf("%q: collected %q; want %q", c.patterns, names, c.names)
			}
		}
	}
	for path, ok := range map[string]bool{"in/a.txt": true, "../x": false, "in/../../x": false, "/etc/passwd": false, `in\..\x`: false, "in//x": false, "in/\x00": false} {
		_, err := InputPath(dir, protocol.InputFile{Path: path})
		if (err == nil) != ok {
			t.Errorf("InputPath(%q) = %v; want ok %t", path, err, ok)
		}
	}
}
