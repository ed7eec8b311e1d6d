package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
)

// Definition is the canonical form of a task instance: everything that
// decides what the task's command computes. Its canonical encoding
// (Canonical: encoding/json, which sorts map keys, with sensitive values
// replaced by a placeholder) is what the definition hash covers and what
// the state stores as the task's spec.
//
// Scheduling knobs — placement, timeout, lease grace and retry policy — are
// deliberately not part of it: changing them does not change what a
// succeeded task produced, so it does not make the task run again.
type Definition struct {
	// Command is the argv to execute; Command[0] is looked up in PATH.
	Command []string `json:"command"`
	// Env is the task's own environment (the agent adds WDC_* variables).
	Env map[string]string `json:"env"`
	// Dir is the working directory, relative to the configuration directory
	// when it lies inside it ("." for the directory itself), otherwise
	// absolute, so that a checkout in another folder hashes the same. ""
	// means the attempt's own directory (RunsInAttemptDir).
	Dir string `json:"dir"`
	// DependsOn lists the addresses of the task instances this one waits
	// for, sorted.
	DependsOn []string `json:"depends_on"`
	// Inputs are files of the configuration directory the task reads, by
	// path relative to it ("/"-separated, sorted) and content hash: a
	// changed file changes the definition. The agent fetches each into
	// the attempt's directory before the command starts.
	Inputs []InputFile `json:"inputs,omitempty"`
	// Outputs are the patterns (path.Match syntax, relative to the
	// attempt's directory) of the files the task produces; each must match
	// at least one file when the command succeeds.
	Outputs []string `json:"outputs,omitempty"`
	// Mounts map an upstream task's accepted outputs into a folder of the
	// attempt's directory.
	Mounts []Mount `json:"mounts,omitempty"`
	// Sensitive names the parts computed from a sensitive variable
	// (PartCommand, PartDir, PartEnv, EnvPart(NAME)), each with the
	// references it comes from and the keyed hash of its value
	// (sensitive.go). The canonical form holds SensitivePlaceholder
	// instead of their values; only an assignment carries the values.
	Sensitive map[string]SensitivePart `json:"sensitive,omitempty"`
}

// InputFile is one file put into an attempt's directory before its command
// starts.
type InputFile struct {
	// Path is relative to the attempt's directory, "/"-separated.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Executable is true for a file of the configuration directory that
	// has an execute bit: the agent writes it with mode 0700 (else 0600).
	// It is part of the definition (a script made executable changes
	// what the task runs); omitted when false.
	Executable bool `json:"executable,omitempty"`
}

// Mount is an input block: the outputs of task From matching Output are put
// into the folder Name of the attempt's directory (an output "out/a.json"
// of From becomes "Name/out/a.json").
type Mount struct {
	Name   string `json:"name"`
	From   string `json:"from"`
	Output string `json:"output"`
}

// DefinitionDir is a task's working directory dir as a Definition records
// it: relative to root, the configuration directory, when it lies inside
// it ("/"-separated, "." for root itself), otherwise as it is, so that a
// checkout in another folder hashes the same. An empty dir is root.
func DefinitionDir(root, dir string) string {
	if dir == "" {
		return "."
	}
	if rel, err := filepath.Rel(root, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(rel)
	}
	return dir
}

// RunsInAttemptDir reports whether the command runs in its attempt's
// directory: a task that declares inputs, outputs or mounts and sets no
// dir (its Dir is then "").
func (d Definition) RunsInAttemptDir() bool {
	return d.Dir == "" && (len(d.Inputs) > 0 || len(d.Outputs) > 0 || len(d.Mounts) > 0)
}

// Canonical returns the definition's canonical JSON encoding: keys in a
// fixed order, map keys sorted, nil slices and maps written as empty ones,
// and the value of every sensitive part replaced by SensitivePlaceholder
// (Redacted): what the state stores and the definition hash covers.
func (d Definition) Canonical() []byte {
	c := d.Redacted()
	if c.Command == nil {
		c.Command = []string{}
	}
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	c.DependsOn = make([]string, len(d.DependsOn))
	copy(c.DependsOn, d.DependsOn)
	sort.Strings(c.DependsOn)
	b, err := json.Marshal(c)
	if err != nil {
		// Only strings, string slices and string maps: Marshal cannot fail.
		panic("protocol: encoding a definition: " + err.Error())
	}
	return b
}

// DefinitionHash returns the task's def_hash: the lowercase hex SHA-256 of
// its canonical definition followed, for each dependency in address order,
// by a newline, the dependency's address, "=" and that dependency's own
// def_hash. Because dependencies' hashes are covered, a change to a task
// changes the hash of every task downstream of it.
//
// depHashes maps each address in d.DependsOn to its def_hash; an address
// missing from it hashes as an empty string.
func DefinitionHash(d Definition, depHashes map[string]string) string {
	h := sha256.New()
	h.Write(d.Canonical())
	deps := append([]string(nil), d.DependsOn...)
	sort.Strings(deps)
	for _, addr := range deps {
		h.Write([]byte("\n" + addr + "=" + depHashes[addr]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ShortHash returns the first 8 characters of a def_hash, as plans print it.
func ShortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}
