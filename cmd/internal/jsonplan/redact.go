package jsonplan

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Sensitive stands in for a sensitive variable's value in every output
// and in plan files.
const Sensitive = "(sensitive)"

// Redactor replaces the text of a configuration's sensitive variable
// values with "(sensitive)". The zero value, and a Redactor of a
// configuration without sensitive values, changes nothing.
type Redactor struct{ secrets []string }

// NewRedactor collects the known values of cfg's sensitive variables
// (each string, number and bool inside them).
func NewRedactor(cfg *wdchcl.Config) *Redactor {
	r := &Redactor{}
	for _, v := range cfg.Variables {
		if !v.Sensitive || v.Value.IsNull() || !v.Value.IsKnown() {
			continue
		}
		raw, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			continue
		}
		var any interface{}
		if json.Unmarshal(raw, &any) == nil {
			r.collect(any)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

func (r *Redactor) collect(v interface{}) {
	switch x := v.(type) {
	case string:
		if x != "" {
			r.secrets = append(r.secrets, x)
		}
	case float64, bool:
		r.secrets = append(r.secrets, fmt.Sprint(x))
	case []interface{}:
		for _, e := range x {
			r.collect(e)
		}
	case map[string]interface{}:
		for _, e := range x {
			r.collect(e)
		}
	}
}

// Text returns s with every sensitive value in it replaced by
// "(sensitive)", the longest first.
func (r *Redactor) Text(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, Sensitive)
	}
	return s
}

func (r *Redactor) list(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = r.Text(s)
	}
	return out
}

// env redacts the keys and values of a string map (env, labels,
// placement).
func (r *Redactor) env(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[r.Text(k)] = r.Text(v)
	}
	return out
}

// hiddenMap stands in for a map computed from a sensitive value: keys and
// values may both give it away, so one "(sensitive)" entry replaces them.
func hiddenMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return map[string]string{}
	}
	return map[string]string{Sensitive: Sensitive}
}

// hideParts hides the sensitive parts of a map: all of it (whole) or the
// values of the named keys.
func hideParts(m map[string]string, whole bool, keys map[string]bool) map[string]string {
	if whole {
		return hiddenMap(m)
	}
	if len(keys) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if keys[k] {
			v = Sensitive
		}
		out[k] = v
	}
	return out
}
