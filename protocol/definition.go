package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// Definition is the canonical form of a task instance: everything that
// decides what the task's command computes. Its JSON encoding (encoding/json,
// which sorts map keys) is what the definition hash covers and what the state
// stores as the task's spec.
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
	// absolute, so that a checkout in another folder hashes the same.
	Dir string `json:"dir"`
	// DependsOn lists the addresses of the task instances this one waits
	// for, sorted.
	DependsOn []string `json:"depends_on"`
}

// Canonical returns the definition's canonical JSON encoding: keys in a
// fixed order, map keys sorted, nil slices and maps written as empty ones.
func (d Definition) Canonical() []byte {
	c := d
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
