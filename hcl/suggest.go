package hcl

import (
	"fmt"
	"sort"

	"github.com/agext/levenshtein"
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
