package agentcli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime"
	"testing"
)

// runAgentCLI runs wdc-agent's command line as Main does for the binary.
func runAgentCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb, []string{"NO_COLOR=1"}, Build{Name: "wdc-agent", Version: "1.2.3", Commit: "abc123"})
	return out.String(), errb.String(), code
}

// TestMainExitCodes: wdc-agent's exit codes and messages are wdc's: 0 after help
// or a command that succeeds, 1 for any error, a parse error included,
// with "wdc-agent: error: …" on stderr.
func TestMainExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // regular expressions; "" = must be empty
	}{
		{"no arguments shows the help", nil, 0, `(?s)^Usage: wdc-agent <command>.*\n  agent .*\n  version `, ""},
		{"--help", []string{"--help"}, 0, `^Usage: wdc-agent <command>`, ""},
		{"agent --help", []string{"agent", "--help"}, 0, `(?s)^Usage: wdc-agent agent --server=URL .*--join-file=FILE`, ""},
		{"an unknown flag", []string{"agent", "--bogus"}, 1, "", "^wdc-agent: error: unknown flag --bogus\nRun \"wdc-agent --help\" for usage.\n$"},
		{"an unknown command", []string{"plan"}, 1, "", `^wdc-agent: error: unexpected argument plan\n`},
		{"no --server", []string{"agent"}, 1, "", `^wdc-agent: error: missing flags: --server=URL\n`},
		{"no credential", []string{"agent", "--server", "http://127.0.0.1:1", "--work-dir", t.TempDir()}, 1, "",
			`^wdc-agent: error: no credential: give a join file with --join-file, or set WDC_LAUNCH_CREDENTIAL \(apply's providers do\)\n$`},
		{"version", []string{"version"}, 0, `^wdc-agent 1\.2\.3 \(commit abc123, go[^ ]+ ` + runtime.GOOS + "/" + runtime.GOARCH + `\)\n$`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runAgentCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			for _, c := range []struct{ what, got, want string }{{"stdout", stdout, tt.stdout}, {"stderr", stderr, tt.stderr}} {
				if c.want == "" && c.got != "" || c.want != "" && !regexp.MustCompile(c.want).MatchString(c.got) {
					t.Errorf("%s = %q, want it to match %q", c.what, c.got, c.want)
				}
			}
		})
	}
}

// TestVersionJSON: version --json is the document wdc version --json
// prints, with the build's version and commit.
func TestVersionJSON(t *testing.T) {
	t.Parallel()
	stdout, _, code := runAgentCLI(t, "version", "--json")
	var doc map[string]string
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
		t.Fatalf("version --json: exit %d, %v: %s", code, err, stdout)
	}
	want := map[string]string{"version": "1.2.3", "commit": "abc123", "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	if len(doc) != len(want) {
		t.Errorf("version --json = %v, want %v", doc, want)
	}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("version --json %s = %q, want %q", k, doc[k], v)
		}
	}
}

// TestBuildCommit: a stamped commit is used as it is; without one, the
// toolchain's record or "unknown" (never "").
func TestBuildCommit(t *testing.T) {
	t.Parallel()
	if got := BuildCommit("abc"); got != "abc" {
		t.Errorf("BuildCommit(%q) = %q", "abc", got)
	}
	if got := BuildCommit(""); got == "" {
		t.Error(`BuildCommit("") = "", want the toolchain's commit or "unknown"`)
	}
}
