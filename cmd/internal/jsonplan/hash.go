package jsonplan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ConfigHash returns the configuration file names (base names, sorted)
// and the SHA-256, as lowercase hex, of their names and contents. Variable
// files are not included: their values are covered by VariablesHash.
func ConfigHash(cfg *wdchcl.Config) (files []string, hash string) {
	var names []string
	for name := range cfg.Files {
		if strings.HasSuffix(name, wdchcl.FileSuffix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	base := make([]string, len(names))
	for i, name := range names {
		base[i] = filepath.Base(name)
	}
	sort.Strings(base)
	byBase := map[string]string{}
	for _, name := range names {
		byBase[filepath.Base(name)] = name
	}
	for _, b := range base {
		content := cfg.Files[byBase[b]].Bytes
		fmt.Fprintf(h, "%s\x00%d\x00", b, len(content))
		h.Write(content)
	}
	return base, hex.EncodeToString(h.Sum(nil))
}

// VariablesHash returns the SHA-256, as lowercase hex, of salt followed by
// every variable's name and JSON value, by name, with a sensitive
// variable's keyed hash under key (SensitiveVariables) instead of its
// value; an error names a variable whose value has no JSON form.
func VariablesHash(cfg *wdchcl.Config, salt string, key []byte) (string, error) {
	_, hash, err := variables(cfg, salt, key)
	return hash, err
}

// SensitiveVariables returns, by name, the keyed hash of every sensitive
// variable's value under key, the state's hash key (nil for a plan made
// with no state): protocol.SensitiveHash of "var.NAME" and the value as
// JSON.
func SensitiveVariables(cfg *wdchcl.Config, key []byte) (map[string]string, error) {
	out := map[string]string{}
	for name, v := range cfg.Variables {
		if !v.Sensitive {
			continue
		}
		raw, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", name, err)
		}
		out[name] = protocol.SensitiveHash(key, "var."+name, raw)
	}
	return out, nil
}

// variables returns every variable's value for the document (sensitive
// ones as "(sensitive)") and the salted hash over all of their values
// (sensitive ones by their keyed hash under key).
func variables(cfg *wdchcl.Config, salt string, key []byte) (map[string]Variable, string, error) {
	names := make([]string, 0, len(cfg.Variables))
	for name := range cfg.Variables {
		names = append(names, name)
	}
	sort.Strings(names)
	out := map[string]Variable{}
	h := sha256.New()
	h.Write([]byte(salt))
	for _, name := range names {
		v := cfg.Variables[name]
		raw, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			return nil, "", fmt.Errorf("variable %s: %w", name, err)
		}
		if v.Sensitive {
			// Not the value: a salt in the same document would not keep
			// a guess from being tested against its hash.
			raw = []byte(protocol.SensitiveHash(key, "var."+name, raw))
		}
		fmt.Fprintf(h, "\x00%s\x00%s", name, raw)
		if v.Sensitive {
			raw, _ = json.Marshal(Sensitive)
		}
		out[name] = Variable{Value: raw, Sensitive: v.Sensitive}
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}
