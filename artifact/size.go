package artifact

import (
	"fmt"
	"math"
	"strings"

	"github.com/dustin/go-humanize"
)

// maxSizeText caps how long a size string ParseSize reads may be, in
// bytes; no sensible size needs more.
const maxSizeText = 64

// sizeHint ends every ParseSize error.
const sizeHint = `write a positive number of bytes with an optional unit, like "10MiB", "512KiB", "1GiB", "100MB" or "1024"`

// ParseSize reads a size in bytes as wdc's settings write it: a number,
// optionally with a fraction and with commas between digits, then
// optionally a unit, with or without a space. Units are case-insensitive:
// B, KiB, MiB, GiB, TiB, PiB, EiB are powers of 1024; kB, MB, GB, TB, PB,
// EB are powers of 1000, and so are K, M, G, T, P, E without "B" (write
// "Mi" or "MiB" for 1024²). A plain number is bytes. Surrounding space is
// ignored; a fraction of a byte is dropped ("1.5KiB" is 1536, "1.9" is 1).
//
// The result is at least 1 and at most math.MaxInt64. It fails, with an
// error that quotes s and suggests a form like "10MiB", on: an empty
// string; a string longer than 64 bytes; a negative number; zero (also
// after dropping the fraction, as in "0.5"); a number that overflows
// int64; and anything that is not a number and a known unit.
//
// The number is read by github.com/dustin/go-humanize (ParseBigBytes, the
// exact form of its ParseBytes, so that large byte counts keep every
// digit).
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	switch {
	case in == "":
		return 0, fmt.Errorf("artifact: no size given: %s", sizeHint)
	case len(in) > maxSizeText:
		return 0, fmt.Errorf("artifact: size %.20q… is longer than %d bytes: %s", in, maxSizeText, sizeHint)
	case strings.HasPrefix(in, "-"):
		return 0, fmt.Errorf("artifact: size %q is negative: %s", in, sizeHint)
	}
	n, err := humanize.ParseBigBytes(in)
	if err != nil {
		return 0, fmt.Errorf("artifact: size %q is not a number of bytes: %s", in, sizeHint)
	}
	switch {
	case n.Sign() <= 0:
		return 0, fmt.Errorf("artifact: size %q is zero bytes: %s", in, sizeHint)
	case !n.IsInt64():
		return 0, fmt.Errorf("artifact: size %q is more than %d bytes (%s), the largest there is: %s",
			in, int64(math.MaxInt64), FormatSize(math.MaxInt64), sizeHint)
	}
	return n.Int64(), nil
}

// FormatSize writes n bytes for people in powers of 1024, with at most one
// decimal and the unit after a space: "512 B", "1.5 KiB", "10 MiB",
// "1.0 GiB". It rounds, so it is for messages, not for reading back exactly
// (ParseSize reads what it writes, to that rounding). A negative n is
// written with a minus sign.
func FormatSize(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-(n+1))+1)
	}
	return humanize.IBytes(uint64(n))
}
