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
	for link, target := range map[string]string{"loot": root, "proc": "/proc", "link.txt": "out/r.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
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
		// a link inside the directory to a folder outside it (the work
		// folder's spool, /proc) reads nothing there
		{[]string{"loot/secret"}, `declared output "loot/secret" matched no file`, nil},
		{[]string{"loot/*"}, `declared output "loot/*" matched no file`, nil},
		{[]string{"proc/self/environ"}, `matched no file`, nil},
		{[]string{"link.txt"}, "link.txt is a symbolic link", nil},
	} {
		outs, err := collectOutputs(dir, c.patterns, filepath.Join(root, "stage"), 0)
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
			for _, o := range outs {
				if !strings.HasPrefix(o.path, filepath.Join(root, "stage")+"/") {
					t.Errorf("%s: not copied into the stage: %s", o.ref.Name, o.path)
				}
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

// TestOutputsAreCopies: what the agent spools and uploads is a copy taken
// when the attempt ended: writing the output file after (a process the
// attempt left behind, a hard link the attempt made to a file of its own)
// changes neither the copy nor its hash, and an output over the limit is
// not copied at all.
func TestOutputsAreCopies(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, stage := filepath.Join(root, "attempt"), filepath.Join(root, "stage")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	outs, err := collectOutputs(dir, []string{"out.txt", "big.bin"}, stage, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[0].ref.Name != "big.bin" || outs[0].path != "" || outs[0].ref.Size != 100 {
		t.Fatalf("outputs %+v: want big.bin not copied, with its size", outs)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("changed later"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(outs[1].path)
	if err != nil || string(got) != "first" {
		t.Fatalf("the copy holds %q (%v); want what the attempt left, %q", got, err, "first")
	}
	if outs[1].ref.Size != 5 {
		t.Errorf("size %d, want 5", outs[1].ref.Size)
	}
}
