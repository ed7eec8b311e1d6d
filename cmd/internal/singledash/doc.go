// Package singledash lets a kong command line take the single-dash
// spelling of its long flags, as Terraform's users type them: `-out=FILE`,
// `-out FILE`, `-auto-approve`. Rewrite turns each such word into the
// `--` form kong parses before kong sees the arguments, reading which
// flags exist from the parser's own model (the command the words select,
// and its ancestors), so a flag added to a command is accepted both ways
// with nothing more to keep up to date.
//
// It owns only that rewrite. It does not own parsing, help or completion
// (kong and kongplete: they show the `--` forms), nor any command's flags.
//
// What is left as it was:
//   - a short flag (`-h`, `-o FILE`, `-oFILE`, `-fh`): a word whose first
//     letter is a short flag of the command is kong's to read, unless the
//     whole word names a long flag;
//   - everything after the `--` terminator, and the value of a flag that
//     takes one (`--out -x` stays, for kong to refuse or take);
//   - `-` (standard input), and words that do not begin with a letter
//     after the dash, such as a negative number (`-1`).
//
// A single-dash word that is neither a long flag nor a short flag of the
// command (`-outt`) is turned into its `--` form too, so that kong's
// "unknown flag" error suggests the nearest long flags (`--out`) rather
// than a short one.
package singledash
