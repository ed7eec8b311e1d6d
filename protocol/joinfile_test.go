package protocol

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseJoinFile(t *testing.T) {
	t.Parallel()
	good := `{"format_version":"1.0","id":"jt-1","pool":"edge","credential":"wdcj_abc","ca_sha256":"ff","expires_at":"2026-01-01T00:00:00Z"}`
	cases := []struct {
		name, data, err string
	}{
		{"good", good, ""},
		{"newer minor", strings.Replace(good, `"1.0"`, `"1.7"`, 1), ""},
		{"unknown field", strings.Replace(good, `{`, `{"later":true,`, 1), ""},
		{"newer major", strings.Replace(good, `"1.0"`, `"2.0"`, 1), "format version 2.0"},
		{"no version", strings.Replace(good, `"format_version":"1.0",`, ``, 1), "no format_version"},
		{"no pool", strings.Replace(good, `"pool":"edge",`, ``, 1), "names no pool"},
		{"launch credential", strings.Replace(good, `wdcj_abc`, `wdcl_abc`, 1), "holds no join credential"},
		{"bare prefix", strings.Replace(good, `wdcj_abc`, `wdcj_`, 1), "holds no join credential"},
		{"not JSON", `hello`, "not a JSON object"},
		{"two objects", good + good, "data after"},
		{"too large", `{"id":"` + strings.Repeat("x", MaxJoinFileBytes) + `"}`, "larger than"},
	}
	for _, c := range cases {
		jf, err := ParseJoinFile([]byte(c.data))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err == "" && (jf.Pool != "edge" || jf.Credential != "wdcj_abc"):
			t.Errorf("%s: %+v", c.name, jf)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v; want an error containing %q", c.name, err, c.err)
		case err != nil && strings.Contains(err.Error(), "wdcj_abc"):
			t.Errorf("%s: the error quotes the credential: %v", c.name, err)
		}
	}
}

func TestWriteJoinFileRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "join.json")
	want := JoinFile{FormatVersion: JoinFileFormatVersion, ID: "jt-1", Pool: "edge", Credential: "wdcj_secret",
		Labels: map[string]string{"zone": "a"}, ExpiresAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := WriteJoinFile(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("join file mode %v, %v; want 0600", fi.Mode(), err)
	}
	got, err := ReadJoinFile(path)
	if err != nil || got.ID != want.ID || got.Labels["zone"] != "a" || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("ReadJoinFile = %+v, %v", got, err)
	}
}

// FuzzParseJoinFile: the join file decoder never panics, and what it
// accepts has a pool, an id and a join credential.
func FuzzParseJoinFile(f *testing.F) {
	f.Add([]byte(`{"format_version":"1.0","id":"jt-1","pool":"edge","credential":"wdcj_abc","expires_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"format_version":"1"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jf, err := ParseJoinFile(data)
		if err == nil && (jf.Pool == "" || jf.ID == "" || !strings.HasPrefix(jf.Credential, JoinCredentialPrefix)) {
			t.Fatalf("accepted %q as %+v", data, jf)
		}
	})
}

func TestHTTPClientRefusesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	pin := strings.Repeat("ab", 32)
	cases := []struct{ server, pin, err string }{
		{"http://127.0.0.1:1", "", ""},
		{"https://127.0.0.1:1", "", ""},
		{"https://127.0.0.1:1", pin, ""},
		{"http://127.0.0.1:1", pin, "plain HTTP"},
		{"https://127.0.0.1:1", "nothex", "fingerprint"},
		{"ftp://x", "", "want http"},
		{"127.0.0.1:7070", "", "want http"},
	}
	for _, c := range cases {
		_, err := HTTPClient(c.server, c.pin)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("HTTPClient(%q, %q) = %v; want %q", c.server, c.pin, err, c.err)
		}
	}
}
