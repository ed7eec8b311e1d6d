// Package plural writes counted English nouns for wdc's messages: "1 task",
// "3 tasks". It owns only the choice between the singular and the plural
// form; the forms themselves are the caller's, so irregular words ("is" /
// "are") need no table.
package plural

import "strconv"

// Word returns one when n is 1, else many.
func Word(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n and the form of the noun that fits it: Count(1, "task",
// "tasks") is "1 task", Count(0, "task", "tasks") "0 tasks".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Word(n, one, many)
}
