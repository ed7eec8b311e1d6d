package singledash

import (
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/kong"
)

// Rewrite returns args with each single-dash long flag written with two
// dashes, as app's command tree knows them; args itself is not changed.
func Rewrite(app *kong.Application, args []string) []string {
	out := make([]string, 0, len(args))
	node := app.Node
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			// The terminator: the rest are positional arguments.
			return append(out, args[i:]...)
		case strings.HasPrefix(arg, "--"):
			out = append(out, arg)
			name, _, hasValue := strings.Cut(arg[2:], "=")
			if f := lookupLong(node, name); f != nil && !hasValue && takesValue(f) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case isSingleDashWord(arg):
			name, _, hasValue := strings.Cut(arg[1:], "=")
			if f := lookupLong(node, name); f != nil {
				out = append(out, "-"+arg)
				if !hasValue && takesValue(f) && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				continue
			}
			r, _ := utf8.DecodeRuneInString(arg[1:])
			if f := lookupShort(node, r); f != nil {
				// A short flag, perhaps with its value attached or other
				// short flags after it: kong reads it.
				out = append(out, arg)
				continue
			}
			// Unknown either way: the long spelling gets kong's suggestions
			// of long flags.
			out = append(out, "-"+arg)
		default:
			out = append(out, arg)
			if len(arg) == 2 && arg[0] == '-' {
				// A short flag, "-" or "-1": kong reads it; a short flag's
				// value is the next word.
				r, _ := utf8.DecodeRuneInString(arg[1:])
				if f := lookupShort(node, r); f != nil && takesValue(f) && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				continue
			}
			if strings.HasPrefix(arg, "-") {
				// "-" or a word such as "-10": a positional argument, or
				// kong's to refuse.
				continue
			}
			if child := lookupCommand(node, arg); child != nil {
				node = child
				if node.Passthrough {
					return append(out, args[i+1:]...)
				}
			}
		}
	}
	return out
}

// isSingleDashWord reports whether arg is a dash followed by a letter and
// at least one more character: a candidate for a long flag.
func isSingleDashWord(arg string) bool {
	if len(arg) < 3 || arg[0] != '-' || arg[1] == '-' {
		return false
	}
	c := arg[1]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// flagsInScope returns the flags node accepts: its own and its ancestors'.
func flagsInScope(node *kong.Node) []*kong.Flag {
	var flags []*kong.Flag
	for _, group := range node.AllFlags(false) {
		flags = append(flags, group...)
	}
	return flags
}

// lookupLong returns the flag of node's scope whose long name, long alias
// or negated name is name, or nil.
func lookupLong(node *kong.Node, name string) *kong.Flag {
	if utf8.RuneCountInString(name) < 2 {
		return nil
	}
	for _, f := range flagsInScope(node) {
		if f.Name == name {
			return f
		}
		for _, a := range f.Aliases {
			if a == name {
				return f
			}
		}
		switch neg := f.Tag.Negatable; {
		case neg == "_" && name == "no-"+f.Name, neg != "" && neg != "_" && name == neg:
			return f
		}
	}
	return nil
}

// lookupShort returns the flag of node's scope whose short name, or
// one-letter alias, is r, or nil.
func lookupShort(node *kong.Node, r rune) *kong.Flag {
	for _, f := range flagsInScope(node) {
		if f.Short == r {
			return f
		}
		for _, a := range f.Aliases {
			if a == string(r) {
				return f
			}
		}
	}
	return nil
}

// lookupCommand returns node's child command named, or aliased, word.
func lookupCommand(node *kong.Node, word string) *kong.Node {
	for _, c := range node.Children {
		if c.Type == kong.CommandNode && c.Name == word {
			return c
		}
	}
	for _, c := range node.Children {
		if c.Type != kong.CommandNode {
			continue
		}
		for _, a := range c.Aliases {
			if a == word {
				return c
			}
		}
	}
	return nil
}

// takesValue reports whether f reads the next word as its value.
func takesValue(f *kong.Flag) bool {
	return !f.IsBool() && !f.IsCounter()
}
