package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// A fenced block of README.md or docs/*.md, and what the examples test does
// with it. The comment line right above a fence may mark it:
//
//	<!-- doctest: skip: REASON -->      not run (needs a cluster, is a benchmark, …)
//	<!-- doctest: fragment: REASON -->  part of something, not a whole example
//
// Every other hcl block is a whole configuration: it must pass `wdc fmt
// --check` and `wdc validate`, and it is the configuration (main.wdc.hcl) of
// the shell blocks after it in the same file. An hcl block whose first line
// is a comment naming a test file (`# tests/retry.wdctest.hcl`) is that
// test file of the configuration above it: with it, it must pass `wdc fmt
// --check` and `wdc validate`, and it is there for the shell blocks after
// it in the same file. sh, shell and bash blocks run
// with `sh -e`; console blocks run each `$ COMMAND` line and compare what it
// prints (stdout and stderr) with the lines below it. Each runs in a fresh
// folder holding a copy of docs/, examples/, go.mod and go.sum, with wdc on
// PATH. Other blocks (json, plain text) are not run.
type docBlock struct {
	file   string // relative to the repository, e.g. docs/json.md
	line   int    // of the opening fence
	lang   string
	body   string
	marker string // "", "skip" or "fragment"
	reason string
}

var (
	testFileRe = regexp.MustCompile(`^# ([A-Za-z0-9_/.-]+\.wdctest\.hcl)\n`)
	fenceRe    = regexp.MustCompile("^```([a-z]*)\\s*$")
	markerRe   = regexp.MustCompile(`^<!-- doctest: ([a-z]+)(?::\s*(.*?))?\s*-->$`)
)

// docBlocks reads the fenced blocks of a Markdown file.
func docBlocks(root, rel string) ([]docBlock, error) {
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	var body strings.Builder
	prev := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			if cur == nil {
				cur = &docBlock{file: rel, line: n, lang: m[1]}
				if mm := markerRe.FindStringSubmatch(prev); mm != nil {
					cur.marker, cur.reason = mm[1], mm[2]
				}
				body.Reset()
			} else {
				cur.body = body.String()
				out = append(out, *cur)
				cur = nil
			}
			prev = line
			continue
		}
		if cur != nil {
			body.WriteString(line + "\n")
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fence is never closed", rel, cur.line)
	}
	return out, sc.Err()
}

// docScript turns a runnable block into a testscript script, or "" when the
// block is not run. config is the configuration of the file so far.
func docScript(b docBlock, config string, tests map[string]string) (string, error) {
	var s strings.Builder
	fmt.Fprintf(&s, "# %s:%d (%s)\n", b.file, b.line, b.lang)
	files := map[string]string{}
	if config != "" {
		files["main.wdc.hcl"] = config
	}
	if b.lang != "hcl" || testFileRe.MatchString(b.body) {
		// A whole configuration comes without the test files of the one
		// before it.
		for name, body := range tests {
			files[name] = body
		}
	}
	switch {
	case b.lang == "hcl" && testFileRe.MatchString(b.body):
		if config == "" {
			return "", fmt.Errorf("%s:%d: a test file with no configuration above it", b.file, b.line)
		}
		files[testFileRe.FindStringSubmatch(b.body)[1]] = b.body
		s.WriteString("exec wdc fmt --check\nexec wdc validate\nstdout '^Success! The configuration is valid: .*test file'\n")
	case b.lang == "hcl":
		files["main.wdc.hcl"] = b.body
		s.WriteString("exec wdc fmt --check\nexec wdc validate\nstdout '^Success! The configuration is valid: '\n")
	case b.lang == "sh" || b.lang == "shell" || b.lang == "bash":
		files["block.sh"] = b.body
		s.WriteString("exec sh -e block.sh\n")
	case b.lang == "console":
		cmds, wants, err := consoleSteps(b.body)
		if err != nil {
			return "", fmt.Errorf("%s:%d: %w", b.file, b.line, err)
		}
		for i := range cmds {
			cmd, want := fmt.Sprintf("cmd-%d.sh", i+1), fmt.Sprintf("want-%d", i+1)
			files[cmd] = "exec 2>&1\n" + cmds[i] + "\n"
			files[want] = wants[i]
			fmt.Fprintf(&s, "exec sh -e %s\ndoc-output %s\n", cmd, want)
		}
	default:
		return "", nil
	}
	for _, name := range sortedKeys(files) {
		fmt.Fprintf(&s, "-- %s --\n%s", name, files[name])
	}
	return s.String(), nil
}

// consoleSteps splits a console block into its commands (lines starting
// with "$ ") and the output shown after each.
func consoleSteps(body string) (cmds, wants []string, err error) {
	for _, line := range strings.SplitAfter(body, "\n") {
		if line == "" {
			continue
		}
		if c, ok := strings.CutPrefix(line, "$ "); ok {
			cmds = append(cmds, strings.TrimSpace(c))
			wants = append(wants, "")
			continue
		}
		if len(cmds) == 0 {
			return nil, nil, fmt.Errorf("output before the first $ command: %q", line)
		}
		wants[len(wants)-1] += line
	}
	if len(cmds) == 0 {
		return nil, nil, fmt.Errorf("no $ command")
	}
	return cmds, wants, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// normalizers replace what differs from run to run — hashes and ids, times,
// durations, pids, and how many workers the supervisor launched (it grows
// a pool by the tick, so that depends on the machine's speed) — so shown
// output compares with real output.
var normalizers = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\b[0-9a-f]{8,}\b`), "<hex>"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`\bpid \d+`), "pid <n>"},
	{regexp.MustCompile(`\. Workers: \d+`), ". Workers: <n>"},
	{regexp.MustCompile(`\b\d+ workers? asked to drain`), "<n> workers asked to drain"},
}

func normalize(line string) string {
	line = strings.TrimRight(line, " \t")
	for _, n := range normalizers {
		line = n.re.ReplaceAllString(line, n.repl)
	}
	return line
}

// matchOutput reports whether got matches the shown output want: line by
// line after normalizing, where a line "..." stands for any number of
// lines. Without a trailing "...", got must end where want does.
func matchOutput(want, got string) error {
	w := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	g := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if want == "" {
		w = nil
	}
	if got == "" {
		g = nil
	}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i == len(w) {
			return j == len(g)
		}
		if w[i] == "..." {
			for k := j; k <= len(g); k++ {
				if match(i+1, k) {
					return true
				}
			}
			return false
		}
		return j < len(g) && normalize(w[i]) == normalize(g[j]) && match(i+1, j+1)
	}
	if !match(0, 0) {
		return fmt.Errorf("the output does not match the documented output\n--- documented\n%s\n--- got\n%s", want, got)
	}
	return nil
}

// cmdDocOutput compares the last command's stdout with a file of
// documented output (matchOutput):
//
//	doc-output FILE
func cmdDocOutput(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: doc-output FILE")
	}
	ts.Check(matchOutput(ts.ReadFile(args[0]), ts.ReadFile("stdout")))
}

func TestMatchOutput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		want, got string
		ok        bool
	}{
		{"a\nb\n", "a\nb\n", true},
		{"a\n", "a\nb\n", false},
		{"a\n...\n", "a\nb\nc\n", true},
		{"...\nc\n", "a\nb\nc\n", true},
		{"a\n...\nc\n", "a\nc\n", true},
		{"a\n...\nd\n", "a\nb\nc\n", false},
		{"Wall time: 84ms. token 95a89ed8\n", "Wall time: 1m2.5s. token 04de487c\n", true},
		{"at 2026-11-29T11:04:28Z pid 7\n", "at 2026-12-01T09:00:00.123Z pid 31337\n", true},
		{"3 tasks\n", "4 tasks\n", false},
	}
	for _, c := range cases {
		if err := matchOutput(c.want, c.got); (err == nil) != c.ok {
			t.Errorf("matchOutput(%q, %q) = %v, want ok %v", c.want, c.got, err, c.ok)
		}
	}
}

// TestDocExamples runs every runnable example of README.md and docs/*.md
// (see docBlock). An example that is not run says why with its marker.
func TestDocExamples(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	scripts := t.TempDir()
	ran := 0
	for _, rel := range files {
		blocks, err := docBlocks(root, rel)
		if err != nil {
			t.Fatal(err)
		}
		config := ""
		tests := map[string]string{}
		for _, b := range blocks {
			switch {
			case b.marker != "" && b.marker != "skip" && b.marker != "fragment":
				t.Errorf("%s:%d: unknown doctest marker %q (skip or fragment)", b.file, b.line, b.marker)
				continue
			case b.marker != "" && b.reason == "":
				t.Errorf("%s:%d: a doctest %s marker says why: <!-- doctest: %s: REASON -->", b.file, b.line, b.marker, b.marker)
				continue
			case b.marker != "":
				t.Logf("%s:%d: %s block not run (%s: %s)", b.file, b.line, b.lang, b.marker, b.reason)
				continue
			}
			script, err := docScript(b, config, tests)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case b.lang == "hcl" && testFileRe.MatchString(b.body):
				tests[testFileRe.FindStringSubmatch(b.body)[1]] = b.body
			case b.lang == "hcl":
				config, tests = b.body, map[string]string{}
			}
			if script == "" {
				continue
			}
			name := fmt.Sprintf("%s_%d.txtar", strings.NewReplacer("/", "_", ".", "_").Replace(b.file), b.line)
			if err := os.WriteFile(filepath.Join(scripts, name), []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no runnable example found")
	}
	goEnv := goEnvironment(t)
	testscript.Run(t, testscript.Params{
		Dir:                 scripts,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			for _, kv := range goEnv {
				k, v, _ := strings.Cut(kv, "=")
				env.Setenv(k, v)
			}
			env.Setenv("NO_COLOR", "1")
			for _, p := range []string{"docs", "examples", "go.mod", "go.sum"} {
				if err := copyTree(filepath.Join(root, p), filepath.Join(env.WorkDir, p)); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"doc-output": cmdDocOutput,
		},
	})
}

// goEnvironment is the go command's own settings, for examples that run
// it (go tool jv): the caches stay the machine's, and nothing is fetched.
func goEnvironment(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GONOSUMDB", "GOSUMDB").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var vars map[string]string
	if err := json.Unmarshal(out, &vars); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOTOOLCHAIN=local"}
	for _, k := range sortedKeys(vars) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// copyTree copies the file or folder src to dst, leaving out state and
// outputs a local run left in examples (.wdc, out).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (name == ".wdc" || name == "out") {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
