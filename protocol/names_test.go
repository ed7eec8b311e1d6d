package protocol

import (
	"strings"
	"testing"
)

func TestCheckArtifactName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  string // a part of the error; "" = valid
	}{
		{"stdout", ""},
		{"out/r.json", ""},
		{"out/*", ""}, // a pattern's parts read literally
		{"a/b/c.d", ""},
		{"..x/y..", ""}, // dots inside a part are fine
		{".hidden", ""},
		{"", "empty"},
		{"out/..", `"." or ".."`},
		{"..", `"." or ".."`},
		{"../x", `"." or ".."`},
		{"a/./b", `"." or ".."`},
		{".", `"." or ".."`},
		{"a//b", "empty part"},
		{"a/", "empty part"},
		{"/etc/passwd", "absolute"},
		{"/", "absolute"},
		{`a\b`, "backslash"},
		{`..\x`, "backslash"},
		{"a\x00b", "NUL"},
	} {
		err := CheckArtifactName(c.name)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("CheckArtifactName(%q) = %v; want nil", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("CheckArtifactName(%q) = %v; want an error saying %q", c.name, err, c.err)
		}
	}
}
