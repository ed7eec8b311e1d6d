package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRelease makes a release folder with two files, its manifest and sums.
func writeRelease(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"wdc-1.0.0-linux-amd64": "binary", "wdc-1.0.0-src.tar.gz": "archive"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeManifest(dir, "1.0.0", strings.Repeat("ab", 20), "go1.26.8"); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(dir string) error
		want   string // "" = passes
	}{
		{"as written", func(string) error { return nil }, ""},
		{"a file changed", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "wdc-1.0.0-linux-amd64"), []byte("tampered"), 0o644)
		}, "wdc-1.0.0-linux-amd64: SHA-256 "},
		{"a file added", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644)
		}, "extra is not in SHA256SUMS"},
		{"a file removed", func(dir string) error {
			return os.Remove(filepath.Join(dir, "wdc-1.0.0-src.tar.gz"))
		}, "SHA256SUMS lists wdc-1.0.0-src.tar.gz, which is missing"},
		{"the manifest edited", func(dir string) error {
			p := filepath.Join(dir, manifestName)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, []byte(strings.Replace(string(b), `"size": 6`, `"size": 7`, 1)), 0o644)
		}, "manifest.json: SHA-256"},
		{"a malformed sums line", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, sumsName), []byte("nonsense\n"), 0o644)
		}, "not a \"HASH  NAME\" line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := writeRelease(t)
			if err := c.change(dir); err != nil {
				t.Fatal(err)
			}
			m, err := verify(dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("verify: %v", err)
			case c.want == "" && (m.Version != "1.0.0" || len(m.Files) != 2 || m.Files[0].Size != 6):
				t.Fatalf("manifest = %+v", m)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("verify error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestSumsFormat(t *testing.T) {
	t.Parallel()
	dir := writeRelease(t)
	b, err := os.ReadFile(filepath.Join(dir, sumsName))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var names []string
	for _, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("line %q is not sha256sum's format", l)
		}
		names = append(names, name)
	}
	if got := strings.Join(names, " "); got != "manifest.json wdc-1.0.0-linux-amd64 wdc-1.0.0-src.tar.gz" {
		t.Errorf("SHA256SUMS names %s", got)
	}
}
