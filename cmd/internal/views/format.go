package views

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// WriteJSON writes v as JSON indented by two spaces, followed by a
// newline: every JSON document of the CLI is written so.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewTable returns a tabwriter for column output, columns two spaces
// apart; call Flush when done.
func NewTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// FormatTime renders t in UTC to the second (RFC 3339), or "-" when t is
// zero.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// JSONTime returns a pointer to t in UTC, or nil when t is zero, so JSON
// output omits unset times.
func JSONTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// FormatLabels renders labels as "k=v,k=v" sorted by key, or "-".
func FormatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}

// OrDash returns s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OneLine folds a possibly multi-line message onto one line: its words,
// one space apart, each made Printable.
func OneLine(s string) string {
	return Printable(strings.Join(strings.Fields(s), " "))
}

// Printable returns s with every rune that is not graphic written as a Go
// escape: a control character (\t, \x1b, \x00), a bidirectional
// override that would make a listing read otherwise than it is (\u202e),
// and a byte that is not UTF-8 (\xff). Listings print text a worker or a
// task controls (a registration's host, an error, an event's message)
// through it, so that it shows as what it is and cannot rearrange or
// clear what is around it. Plain text comes back unchanged.
func Printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsGraphic(r):
			b.WriteString(s[:size])
		default:
			b.WriteString(strings.Trim(strconv.QuoteRuneToASCII(r), "'"))
		}
		s = s[size:]
	}
	return b.String()
}
