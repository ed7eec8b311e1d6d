package hcl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
)

// closest returns the candidate nearest to given by edit distance, or ""
// when none is near enough to be a likely typo: at most two edits, and
// fewer edits than given has characters. Ties go to the candidate that
// sorts first, so the answer does not depend on map order.
func closest(given string, candidates []string) string {
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	best, bestDist := "", 3
	for _, c := range sorted {
		if c == given {
			continue
		}
		if d := levenshtein.Distance(given, c, nil); d < bestDist && d < len(given) {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean returns ` Did you mean "X"?` for the candidate closest to
// given (see closest), or "" when there is none.
func didYouMean(given string, candidates []string) string {
	if c := closest(given, candidates); c != "" {
		return fmt.Sprintf(" Did you mean %q?", c)
	}
	return ""
}

// mapKeys returns the keys of m.
func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// closestBlockType is closest for a block type, which also takes a type
// written with another ending of the same word: retries for retry,
// heartbeating for heartbeat. Such a candidate's name, all but its last
// letter (and at least four letters), begins the type written.
func closestBlockType(given string, candidates []string) string {
	if c := closest(given, candidates); c != "" {
		return c
	}
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		if stem := c[:max(len(c)-1, 0)]; len(stem) >= 4 && strings.HasPrefix(given, stem) {
			return c
		}
	}
	return ""
}

// unsupportedBlockPrefix and unsupportedArgumentPrefix begin the detail
// of HCL's "Unsupported block type" and "Unsupported argument" errors,
// followed by the quoted name written.
const (
	unsupportedBlockPrefix    = "Blocks of type "
	unsupportedArgumentPrefix = "An argument named "
)

// suggestNames adds ` Did you mean "X"?` to each "Unsupported block type"
// and "Unsupported argument" error of diags that suggests nothing, where X
// is the block type (closestBlockType) or argument (closestArgument) of
// schema nearest to the one written. HCL suggests only what is at most two
// edits away, which misses a plural such as retries and a short form such
// as cmd.
func suggestNames(diags hcl.Diagnostics, schema *hcl.BodySchema) hcl.Diagnostics {
	if schema == nil {
		return diags
	}
	for _, d := range diags {
		if strings.Contains(d.Detail, "Did you mean") {
			continue
		}
		var prefix string
		var names []string
		closestOf := closestBlockType
		switch d.Summary {
		case "Unsupported block type":
			prefix = unsupportedBlockPrefix
			for _, b := range schema.Blocks {
				names = append(names, b.Type)
			}
		case "Unsupported argument":
			prefix, closestOf = unsupportedArgumentPrefix, closestArgument
			for _, a := range schema.Attributes {
				names = append(names, a.Name)
			}
		default:
			continue
		}
		rest, ok := strings.CutPrefix(d.Detail, prefix)
		if !ok {
			continue
		}
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			continue
		}
		given, err := strconv.Unquote(quoted)
		if err != nil {
			continue
		}
		if c := closestOf(given, names); c != "" {
			d.Detail += fmt.Sprintf(" Did you mean %q?", c)
		}
	}
	return diags
}

// closestArgument is closest for an argument, which also takes a short
// form: a name of at least two letters that begins the candidate and whose
// letters the candidate has in the same order (cmd for command), when only
// one candidate has them.
func closestArgument(given string, candidates []string) string {
	if c := closest(given, candidates); c != "" {
		return c
	}
	found := ""
	for _, c := range candidates {
		if len(given) >= 2 && len(given) < len(c) && given[0] == c[0] && isSubsequence(given, c) {
			if found != "" {
				return "" // ambiguous
			}
			found = c
		}
	}
	return found
}

// isSubsequence reports whether the bytes of s appear in t in order.
func isSubsequence(s, t string) bool {
	i := 0
	for j := 0; i < len(s) && j < len(t); j++ {
		if s[i] == t[j] {
			i++
		}
	}
	return i == len(s)
}
