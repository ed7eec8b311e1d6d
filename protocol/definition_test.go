package protocol

import "testing"

func TestDefinitionHash(t *testing.T) {
	base := Definition{Command: []string{"sh", "-c", "true"}, Env: map[string]string{"A": "1", "B": "2"}, Dir: ".", DependsOn: []string{"task.b", "task.a"}}
	deps := map[string]string{"task.a": "aaa", "task.b": "bbb"}
	ref := DefinitionHash(base, deps)

	tests := []struct {
		name string
		def  Definition
		deps map[string]string
		same bool
	}{
		{"identical", base, deps, true},
		{"dependency order does not matter", Definition{Command: base.Command, Env: base.Env, Dir: ".", DependsOn: []string{"task.a", "task.b"}}, deps, true},
		{"env insertion order does not matter", Definition{Command: base.Command, Env: map[string]string{"B": "2", "A": "1"}, Dir: ".", DependsOn: base.DependsOn}, deps, true},
		{"command changed", Definition{Command: []string{"sh", "-c", "false"}, Env: base.Env, Dir: ".", DependsOn: base.DependsOn}, deps, false},
		{"env changed", Definition{Command: base.Command, Env: map[string]string{"A": "1"}, Dir: ".", DependsOn: base.DependsOn}, deps, false},
		{"dir changed", Definition{Command: base.Command, Env: base.Env, Dir: "src", DependsOn: base.DependsOn}, deps, false},
		{"dependency hash changed", base, map[string]string{"task.a": "aaa", "task.b": "ccc"}, false},
		{"dependency removed", Definition{Command: base.Command, Env: base.Env, Dir: ".", DependsOn: []string{"task.a"}}, deps, false},
		{"argv boundaries matter", Definition{Command: []string{"sh", "-c true"}, Env: base.Env, Dir: ".", DependsOn: base.DependsOn}, deps, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DefinitionHash(tt.def, tt.deps)
			if (got == ref) != tt.same {
				t.Fatalf("hash equal to reference = %v, want %v", got == ref, tt.same)
			}
			if len(got) != 64 {
				t.Fatalf("hash %q is not 64 hex characters", got)
			}
		})
	}
}

func TestCanonicalNilAndEmptyAgree(t *testing.T) {
	a := Definition{Command: []string{"true"}}
	b := Definition{Command: []string{"true"}, Env: map[string]string{}, DependsOn: []string{}}
	if string(a.Canonical()) != string(b.Canonical()) {
		t.Fatalf("nil and empty encode differently: %s vs %s", a.Canonical(), b.Canonical())
	}
	if got, want := string(a.Canonical()), `{"command":["true"],"env":{},"dir":"","depends_on":[]}`; got != want {
		t.Fatalf("canonical = %s, want %s", got, want)
	}
}

func TestShortHash(t *testing.T) {
	for in, want := range map[string]string{"0123456789abcdef": "01234567", "abc": "abc", "": ""} {
		if got := ShortHash(in); got != want {
			t.Errorf("ShortHash(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDefinitionDir(t *testing.T) {
	for _, tc := range []struct{ root, dir, want string }{
		{"/cfg", "", "."},
		{"/cfg", "/cfg", "."},
		{"/cfg", "/cfg/src/a", "src/a"},
		{"/cfg", "/other", "/other"},
		{"/cfg", "/cfg/../cfgx", "/cfg/../cfgx"},
		{"/cfg", "/cfg/..x", "..x"},
	} {
		if got := DefinitionDir(tc.root, tc.dir); got != tc.want {
			t.Errorf("DefinitionDir(%q, %q) = %q, want %q", tc.root, tc.dir, got, tc.want)
		}
	}
}
