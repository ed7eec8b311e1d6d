package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	fmtGood = "pool \"p\" {\n  provider = \"local\"\n  max      = 2\n}\n"
	fmtBad  = "pool \"p\" {\nprovider=\"local\"\n  max = 2\n}\n"
	// fmtSyntax has an error at line 2, column 14.
	fmtSyntax = "pool \"p\" {\n  provider = = \"local\"\n}\n"
)

// TestFmt runs wdc fmt on temporary directories and checks its output, its
// exit code and the files it leaves.
func TestFmt(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		args  []string // after "--chdir DIR fmt"
		code  int
		// stdout and stderr must contain each of these; an empty list means
		// the stream must be empty.
		stdout []string
		stderr []string
		// want is the content of files afterwards; files not named must be
		// unchanged.
		want map[string]string
	}{
		{
			name:  "formatted input is unchanged",
			files: map[string]string{"main.wdc.hcl": fmtGood},
		},
		{
			name:   "unformatted input is rewritten and listed",
			files:  map[string]string{"main.wdc.hcl": fmtBad},
			stdout: []string{"main.wdc.hcl\n"},
			want:   map[string]string{"main.wdc.hcl": fmtGood},
		},
		{
			name:  "check on formatted input",
			files: map[string]string{"main.wdc.hcl": fmtGood},
			args:  []string{"--check"},
		},
		{
			name:   "check on unformatted input lists it and changes nothing",
			files:  map[string]string{"main.wdc.hcl": fmtBad, "ok.wdc.hcl": fmtGood},
			args:   []string{"--check"},
			code:   1,
			stdout: []string{"main.wdc.hcl\n"},
		},
		{
			name:   "diff shows the change and rewrites",
			files:  map[string]string{"main.wdc.hcl": fmtBad},
			args:   []string{"--diff"},
			stdout: []string{"--- old/main.wdc.hcl", "+++ new/main.wdc.hcl", "\n-provider=\"local\"\n", "\n+  provider = \"local\"\n", "\n+  max      = 2\n"},
			want:   map[string]string{"main.wdc.hcl": fmtGood},
		},
		{
			name:   "diff with check changes nothing",
			files:  map[string]string{"main.wdc.hcl": fmtBad},
			args:   []string{"--diff", "--check"},
			code:   1,
			stdout: []string{"\n-provider=\"local\"\n", "\n+  provider = \"local\"\n"},
		},
		{
			name:   "syntax error gets diagnostics and is left untouched",
			files:  map[string]string{"main.wdc.hcl": fmtSyntax, "other.wdc.hcl": fmtBad},
			code:   1,
			stdout: []string{"other.wdc.hcl\n"},
			stderr: []string{"Error: ", "on main.wdc.hcl:2:14", "2:   provider = = \"local\""},
			want:   map[string]string{"other.wdc.hcl": fmtGood},
		},
		{
			name: "directory with several files",
			files: map[string]string{
				"a.wdc.hcl": fmtBad,
				"b.wdc.hcl": fmtGood,
				"c.wdc.hcl": "task \"t\" {\ncommand = [\"true\"]\n}\n",
			},
			stdout: []string{"a.wdc.hcl\nc.wdc.hcl\n"},
			want: map[string]string{
				"a.wdc.hcl": fmtGood,
				"c.wdc.hcl": "task \"t\" {\n  command = [\"true\"]\n}\n",
			},
		},
		{
			name: "var files, other files and editor files are ignored",
			files: map[string]string{
				"main.wdc.hcl":    fmtGood,
				"vars.wdcvars":    "a=1\n",
				"other.hcl":       fmtBad,
				".hidden.wdc.hcl": fmtBad,
				"#main.wdc.hcl#":  fmtBad,
				"main.wdc.hcl~":   fmtBad,
			},
		},
		{
			name:   "a named file is formatted whatever its name",
			files:  map[string]string{"main.wdc.hcl": fmtBad, "vars.wdcvars": "a=1\n"},
			args:   []string{"vars.wdcvars"},
			stdout: []string{"vars.wdcvars\n"},
			want:   map[string]string{"vars.wdcvars": "a = 1\n"},
		},
		{
			name:   "a named directory",
			files:  map[string]string{"main.wdc.hcl": fmtBad, "sub/x.wdc.hcl": fmtBad},
			args:   []string{"sub"},
			stdout: []string{filepath.Join("sub", "x.wdc.hcl") + "\n"},
			want:   map[string]string{"sub/x.wdc.hcl": fmtGood},
		},
		{
			name:   "a missing path is an error",
			files:  map[string]string{"main.wdc.hcl": fmtBad},
			args:   []string{"nope.wdc.hcl"},
			code:   1,
			stderr: []string{"nope.wdc.hcl"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			// Run from the parent with a relative --chdir: paths are shown
			// under it ("DIR/main.wdc.hcl"); strip that prefix to compare.
			t.Chdir(filepath.Dir(dir))
			base := filepath.Base(dir)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"--chdir", base, "fmt"}, c.args...), strings.NewReader(""), &stdout, &stderr, []string{"NO_COLOR=1"})
			if code != c.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout.String(), stderr.String())
			}
			checkStream(t, "stdout", strings.ReplaceAll(stdout.String(), base+string(filepath.Separator), ""), c.stdout)
			checkStream(t, "stderr", strings.ReplaceAll(stderr.String(), base+string(filepath.Separator), ""), c.stderr)
			for name, before := range c.files {
				want, ok := c.want[name]
				if !ok {
					want = before
				}
				p := filepath.Join(dir, filepath.FromSlash(name))
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Errorf("%s is\n%s\nwant\n%s", name, got, want)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
					t.Errorf("%s: mode %v (%v), want 0640", name, fi.Mode().Perm(), err)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, ent := range entries {
				if _, ok := c.files[ent.Name()]; !ok && ent.Name() != "sub" {
					t.Errorf("fmt left %s behind (the state is never opened, temporary files are removed)", ent.Name())
				}
			}
		})
	}
}

// checkStream fails unless got contains every string of want, or is empty
// when want is.
func checkStream(t *testing.T, name, got string, want []string) {
	t.Helper()
	if len(want) == 0 && got != "" {
		t.Errorf("%s is not empty:\n%s", name, got)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", name, w, got)
		}
	}
}
