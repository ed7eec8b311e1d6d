package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A definition's sensitive parts are stored as a placeholder and their
// keyed hash: the canonical form holds no value, hashes the same read back
// from the state, changes with the value and with the key, and a
// definition read back from the state does not carry the values.
func TestSensitiveParts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	base := Definition{Command: []string{"deploy", "--token", "cmdsecret"}, Env: map[string]string{"TOKEN": "envsecret", "MODE": "fast"}, Dir: "dirsecret"}
	tests := []struct {
		name string
		from map[string][]string
		// hidden and shown are texts the canonical form must not and must hold
		hidden, shown []string
	}{
		{"command", map[string][]string{PartCommand: {"var.token"}}, []string{"cmdsecret", "deploy"},
			[]string{`"command":["(sensitive)"]`, `"MODE":"fast"`, `"TOKEN":"envsecret"`, `"dir":"dirsecret"`, `"from":["var.token"]`}},
		{"one env entry", map[string][]string{EnvPart("TOKEN"): {"local.auth"}}, []string{"envsecret"},
			[]string{`"MODE":"fast"`, `"TOKEN":"(sensitive)"`, `"cmdsecret"`, `"env.TOKEN":{"from":["local.auth"]`}},
		{"the whole env", map[string][]string{PartEnv: {"var.env"}}, []string{"MODE", "TOKEN", "envsecret"}, []string{`"env":{"(sensitive)":"(sensitive)"}`}},
		{"dir", map[string][]string{PartDir: {"var.d"}}, []string{"dirsecret"}, []string{`"dir":"(sensitive)"`, `"cmdsecret"`}},
		{"an env entry it does not set", map[string][]string{EnvPart("NONE"): {"var.x"}}, nil, []string{`"TOKEN":"envsecret"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base.Protect(key, tt.from)
			canon := string(d.Canonical())
			for _, h := range tt.hidden {
				if strings.Contains(canon, h) {
					t.Errorf("the canonical form holds %q: %s", h, canon)
				}
			}
			for _, s := range tt.shown {
				if !strings.Contains(canon, s) {
					t.Errorf("the canonical form lacks %q: %s", s, canon)
				}
			}
			if got := d.MissingSensitive(key); len(got) != 0 {
				t.Errorf("MissingSensitive of the definition with its values = %v", got)
			}
			// Read back from the state: the same canonical form and hash,
			// but not the values.
			var stored Definition
			if err := json.Unmarshal(d.Canonical(), &stored); err != nil {
				t.Fatal(err)
			}
			if string(stored.Canonical()) != canon || DefinitionHash(stored, nil) != DefinitionHash(d, nil) {
				t.Errorf("read back, the canonical form is %s, want %s", stored.Canonical(), canon)
			}
			if len(d.Sensitive) > 0 && len(stored.MissingSensitive(key)) != len(d.Sensitive) {
				t.Errorf("MissingSensitive of the stored definition = %v, want every part", stored.MissingSensitive(key))
			}
			// What the agent gets over the wire hashes to the same.
			var wire Definition
			b, _ := json.Marshal(d)
			if err := json.Unmarshal(b, &wire); err != nil || DefinitionHash(wire, nil) != DefinitionHash(d, nil) || !reflect.DeepEqual(wire.Env, d.Env) {
				t.Errorf("the definition as sent hashes to %s, want %s (%v)", DefinitionHash(wire, nil), DefinitionHash(d, nil), err)
			}
			if len(d.Sensitive) == 0 {
				return
			}
			changed := base
			changed.Command = []string{"deploy", "--token", "cmdsecret2"}
			changed.Env = map[string]string{"TOKEN": "envsecret2", "MODE": "fast"}
			changed.Dir = "dirsecret2"
			if DefinitionHash(changed.Protect(key, tt.from), nil) == DefinitionHash(d, nil) {
				t.Errorf("another value hashes the same")
			}
			if DefinitionHash(base.Protect([]byte("another key"), tt.from), nil) == DefinitionHash(d, nil) {
				t.Errorf("another key hashes the same")
			}
			if DefinitionHash(d.Rekey([]byte("another key")), nil) != DefinitionHash(base.Protect([]byte("another key"), tt.from), nil) {
				t.Errorf("Rekey does not give what Protect with the new key gives")
			}
		})
	}
	if d := base.Protect(key, nil); d.Sensitive != nil || string(d.Canonical()) != string(base.Canonical()) {
		t.Errorf("a definition with no sensitive part changed: %s", d.Canonical())
	}
}

// The keyed hash covers the part's name, so two parts with one value do not
// hash alike; a definition whose value changed after Protect is missing it.
func TestSensitiveHash(t *testing.T) {
	key := []byte("k")
	if SensitiveHash(key, "env.A", []byte(`"x"`)) == SensitiveHash(key, "env.B", []byte(`"x"`)) {
		t.Error("two parts with one value hash alike")
	}
	if got := SensitiveHash(key, "dir", []byte(`"x"`)); len(got) != 64 {
		t.Errorf("hash %q is not 64 hex digits", got)
	}
	d := Definition{Command: []string{"true"}, Env: map[string]string{"A": "x"}}.Protect(key, map[string][]string{EnvPart("A"): {"var.a"}})
	d.Env = map[string]string{"A": "y"}
	if got := d.MissingSensitive(key); !reflect.DeepEqual(got, []string{"env.A"}) {
		t.Errorf("MissingSensitive = %v, want [env.A]", got)
	}
	if got := d.DescribeParts([]string{"env.A"}); got != "env.A (from var.a)" {
		t.Errorf("DescribeParts = %q", got)
	}
}
