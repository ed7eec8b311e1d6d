package agentcli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestInstallAgent: install-agent copies the running binary, byte for
// byte and executable, and refuses a folder that is not there.
func TestInstallAgent(t *testing.T) {
	t.Parallel()
	self, err := os.ReadFile(selfExe)
	if err != nil {
		t.Skipf("no %s here: %v", selfExe, err)
	}
	tests := []struct {
		name   string
		dest   string
		code   int
		stdout string // a regular expression; "" = must be empty
	}{
		{"into a folder", filepath.Join(t.TempDir(), "wdc-agent"), 0, `^wdc-agent 1\.2\.3: copied itself \(\d+ bytes\) to .*/wdc-agent\n$`},
		{"over a file", writeFile(t, "old"), 0, `copied itself`},
		{"into a missing folder", filepath.Join(t.TempDir(), "no", "wdc-agent"), 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runAgentCLI(t, "install-agent", tt.dest)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if tt.stdout == "" && stdout != "" || tt.stdout != "" && !regexp.MustCompile(tt.stdout).MatchString(stdout) {
				t.Errorf("stdout = %q, want it to match %q", stdout, tt.stdout)
			}
			if code != 0 {
				if !regexp.MustCompile(`^wdc-agent: error: install-agent: `).MatchString(stderr) {
					t.Errorf("stderr = %q, want it to say install-agent failed", stderr)
				}
				return
			}
			got, err := os.ReadFile(tt.dest)
			if err != nil || !bytes.Equal(got, self) {
				t.Errorf("the copy differs from the running binary (%d bytes, want %d): %v", len(got), len(self), err)
			}
			if fi, err := os.Stat(tt.dest); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("the copy's mode: %v, %v; want 0755", fi.Mode(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(tt.dest), ".*")); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
	}
}

// writeFile writes content to a new file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wdc-agent")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
