package httpapi

import (
	"strings"
	"testing"
)

// TestDecodeResultRefusesBadArtifactNames: a result naming an output or a
// log whose name could leave the attempt's directory, or reads otherwise
// on another system, is a 400 saying which and why
// (protocol.CheckArtifactName), whatever lease it is for.
func TestDecodeResultRefusesBadArtifactNames(t *testing.T) {
	t.Parallel()
	body := func(kind, name string) []byte {
		return []byte(`{"worker_id":"w","idempotency_key":"k","artifacts":[{"kind":"` + kind + `","name":` + name +
			`,"sha256":"` + strings.Repeat("a", 64) + `","size":1}]}`)
	}
	for _, c := range []struct {
		kind, name string // name as JSON
		want       string // a part of the error; "" = accepted
	}{
		{"output", `"out/r.json"`, ""},
		{"log", `"stdout"`, ""},
		{"output", `"out/.."`, `output "out/.." has a "." or ".." part`},
		{"output", `"out/./x"`, `has a "." or ".." part`},
		{"output", `".."`, `has a "." or ".." part`},
		{"output", `"out//x"`, "empty part"},
		{"output", `"out/"`, "empty part"},
		{"output", `"/etc/passwd"`, "is absolute"},
		{"output", `"out\\..\\x"`, "backslash"},
		{"output", `"out/a\u0000b"`, "NUL"},
		{"output", `""`, "is empty"},
		{"log", `"../stdout"`, `log "../stdout" has a "." or ".." part`},
	} {
		_, err := DecodeResultRequest(body(c.kind, c.name))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v; want it accepted", c.kind, c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v; want an error saying %q", c.kind, c.name, err, c.want)
		}
	}
}
