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
// every variable's name and JSON value, by name; an error names a variable
// whose value has no JSON form.
func VariablesHash(cfg *wdchcl.Config, salt string) (string, error) {
	_, hash, err := variables(cfg, salt)
	return hash, err
}

// variables returns every variable's value for the document (sensitive
// ones as "(sensitive)") and the salted hash over all of their values.
func variables(cfg *wdchcl.Config, salt string) (map[string]Variable, string, error) {
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
		fmt.Fprintf(h, "\x00%s\x00%s", name, raw)
		if v.Sensitive {
			raw, _ = json.Marshal(Sensitive)
		}
		out[name] = Variable{Value: raw, Sensitive: v.Sensitive}
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}
