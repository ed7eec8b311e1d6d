package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
)

// Sensitive parts of a definition (docs/design.md §9, "No secret at
// rest"). A part of a task's definition computed from a sensitive variable
// — its command, its dir, its whole environment or one entry of it — is
// never stored: the canonical form (what the state keeps as the task's
// spec, and what the definition hash covers) holds SensitivePlaceholder
// instead of the part's value, and, under "sensitive", the part's name,
// the references it is computed from and a keyed hash of its value. The
// key is the state's own (random, made with the state, kept in it), so a
// definition hash still changes when the value does, a plan and an apply
// on two machines agree, and a stored hash cannot be tested against
// guesses without the state. The value itself travels only in the
// assignment a worker is handed.

// SensitivePlaceholder stands, in a stored definition, for the value of a
// part computed from a sensitive variable; a whole environment becomes the
// one entry SensitivePlaceholder = SensitivePlaceholder.
const SensitivePlaceholder = "(sensitive)"

// Names of the parts of a definition that may be sensitive; one entry of
// the environment is EnvPart(NAME).
const (
	PartCommand = "command"
	PartDir     = "dir"
	PartEnv     = "env"
)

// EnvPart is the part name of the environment entry name: "env.NAME".
func EnvPart(name string) string { return PartEnv + "." + name }

// SensitivePart is what a definition records of one sensitive part.
type SensitivePart struct {
	// From lists the references the part is computed from, sorted:
	// "var.NAME" and "local.NAME".
	From []string `json:"from"`
	// HMAC is the lowercase hex HMAC-SHA-256, under the state's hash key,
	// of the part's name, a NUL byte and its value as JSON
	// (SensitiveHash).
	HMAC string `json:"hmac_sha256"`
}

// SensitiveHash returns the keyed hash of one part's value (JSON): the
// lowercase hex HMAC-SHA-256 under key of part, a NUL byte and value.
func SensitiveHash(key []byte, part string, value []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(part))
	m.Write([]byte{0})
	m.Write(value)
	return hex.EncodeToString(m.Sum(nil))
}

// partValue returns the JSON value of part in d, and false when d has no
// such part (an env entry it does not set, an unknown name).
func partValue(d Definition, part string) ([]byte, bool) {
	var v any
	switch {
	case part == PartCommand:
		v = d.Command
		if d.Command == nil {
			v = []string{}
		}
	case part == PartDir:
		v = d.Dir
	case part == PartEnv:
		v = d.Env
		if d.Env == nil {
			v = map[string]string{}
		}
	case strings.HasPrefix(part, PartEnv+"."):
		s, ok := d.Env[strings.TrimPrefix(part, PartEnv+".")]
		if !ok {
			return nil, false
		}
		v = s
	default:
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic("protocol: encoding a part of a definition: " + err.Error()) // strings only
	}
	return b, true
}

// Protect returns d with its Sensitive parts set from from (part name →
// the references it is computed from), each with its keyed hash under
// key. A part d does not have is left out; an empty from leaves d as it
// is.
func (d Definition) Protect(key []byte, from map[string][]string) Definition {
	if len(from) == 0 {
		return d
	}
	d.Sensitive = make(map[string]SensitivePart, len(from))
	for part, refs := range from {
		v, ok := partValue(d, part)
		if !ok {
			continue
		}
		refs = append([]string(nil), refs...)
		sort.Strings(refs)
		d.Sensitive[part] = SensitivePart{From: refs, HMAC: SensitiveHash(key, part, v)}
	}
	if len(d.Sensitive) == 0 {
		d.Sensitive = nil
	}
	return d
}

// Rekey returns d with the keyed hash of every sensitive part computed
// again under key (its value must be in d).
func (d Definition) Rekey(key []byte) Definition {
	if len(d.Sensitive) == 0 {
		return d
	}
	from := make(map[string][]string, len(d.Sensitive))
	for part, sp := range d.Sensitive {
		from[part] = sp.From
	}
	return d.Protect(key, from)
}

// Redacted returns d as the state stores it: the value of every part that
// Sensitive names replaced by SensitivePlaceholder. A definition without
// sensitive parts comes back as it is; d itself is not changed.
func (d Definition) Redacted() Definition {
	if len(d.Sensitive) == 0 {
		return d
	}
	r := d
	if _, whole := d.Sensitive[PartEnv]; whole {
		r.Env = map[string]string{SensitivePlaceholder: SensitivePlaceholder}
	} else {
		r.Env = make(map[string]string, len(d.Env))
		for k, v := range d.Env {
			if _, hidden := d.Sensitive[EnvPart(k)]; hidden {
				v = SensitivePlaceholder
			}
			r.Env[k] = v
		}
	}
	if _, ok := d.Sensitive[PartCommand]; ok {
		r.Command = []string{SensitivePlaceholder}
	}
	if _, ok := d.Sensitive[PartDir]; ok {
		r.Dir = SensitivePlaceholder
	}
	return r
}

// MissingSensitive returns, sorted, the sensitive parts of d whose value
// does not give the keyed hash d records for it under key: d does not
// hold the value (a definition read back from the state holds the
// placeholder), or holds another one. Nil means d carries every value its
// hash covers.
func (d Definition) MissingSensitive(key []byte) []string {
	var out []string
	for part, sp := range d.Sensitive {
		v, ok := partValue(d, part)
		if !ok || !hmac.Equal([]byte(SensitiveHash(key, part, v)), []byte(sp.HMAC)) {
			out = append(out, part)
		}
	}
	sort.Strings(out)
	return out
}

// DescribeParts names sensitive parts for a message: "env.TOKEN (from
// var.token)", joined with ", ".
func (d Definition) DescribeParts(parts []string) string {
	var out []string
	for _, p := range parts {
		s := p
		if from := d.Sensitive[p].From; len(from) > 0 {
			s += " (from " + strings.Join(from, ", ") + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
