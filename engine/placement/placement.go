// Package placement is claim-side label matching (docs/design.md §2): a
// worker may run a task when its labels contain every label the task's
// placement asks for, with the same value. There is no central
// bin-packing.
//
// It owns the rule and how a placement or a set of labels is written in
// messages. It does not own which pool a task counts toward for sizing
// (the plan's) or which tasks a worker claims (the coordinator's), which
// both apply this rule.
package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Satisfies reports whether a worker with the given labels may run a task
// with the given placement: every required label is present with the
// required value. An empty placement is satisfied by any labels.
func Satisfies(labels, placement map[string]string) bool {
	for k, want := range placement {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// Unmet lists, sorted by label name, every requirement of placement that
// labels do not meet, each as a phrase such as
// `needs can = "build", has can = "test"` or `needs gpu = "a100", has no gpu label`.
// It returns nil when Satisfies(labels, placement) is true.
func Unmet(labels, placement map[string]string) []string {
	keys := make([]string, 0, len(placement))
	for k := range placement {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		want := placement[k]
		got, ok := labels[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("needs %s = %q, has no %s label", k, want, k))
		case got != want:
			out = append(out, fmt.Sprintf("needs %s = %q, has %s = %q", k, want, k, got))
		}
	}
	return out
}

// Text renders labels (or a placement) as "k=v, k=v" sorted by key, or
// "{}"; a key or value holding a character that is not graphic is quoted
// with Go escapes.
func Text(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = graphic(k) + "=" + graphic(m[k])
	}
	return strings.Join(keys, ", ")
}

// graphic is s, or s quoted with Go escapes when it holds a character
// that is not graphic.
func graphic(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}
