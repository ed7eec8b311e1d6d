package artifact

import (
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int64
		err  string // "" when valid
	}{
		{"1", 1, ""},
		{"1024", 1024, ""},
		{"512KiB", 512 << 10, ""},
		{"10MiB", 10 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"100MB", 100_000_000, ""},
		{"1.5KiB", 1536, ""},
		{"10 MiB", 10 << 20, ""},
		{" 10mib\t", 10 << 20, ""},
		{"2Mi", 2 << 20, ""},
		{"2M", 2_000_000, ""},
		{"1,024", 1024, ""},
		{"1.9", 1, ""},
		{"7EiB", 7 << 60, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775807B", math.MaxInt64, ""},
		{"0", 0, "zero bytes"},
		{"0KiB", 0, "zero bytes"},
		{"0.5", 0, "zero bytes"},
		{"-1", 0, "negative"},
		{"-10MiB", 0, "negative"},
		{"8EiB", 0, "more than 9223372036854775807 bytes"},
		{"9223372036854775808", 0, "more than 9223372036854775807 bytes"},
		{"9999999EiB", 0, "more than 9223372036854775807 bytes"},
		{"", 0, "no size given"},
		{"   ", 0, "no size given"},
		{"lots", 0, "not a number of bytes"},
		{"MiB", 0, "not a number of bytes"},
		{"10 MiBs", 0, "not a number of bytes"},
		{"10XB", 0, "not a number of bytes"},
		{"0x10", 0, "not a number of bytes"},
		{"1e6", 0, "not a number of bytes"},
		{"1..5KiB", 0, "not a number of bytes"},
		{"+5", 0, "not a number of bytes"},
		{"٣MiB", 0, "not a number of bytes"},
		{strings.Repeat("1", 65), 0, "longer than 64 bytes"},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || got != 0 || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), `"10MiB"`) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error saying %q and suggesting \"10MiB\"", c.in, got, err, c.err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1536, "1.5 KiB"},
		{10 << 20, "10 MiB"},
		{1 << 30, "1.0 GiB"},
		{math.MaxInt64, "8.0 EiB"},
		{-1024, "-1.0 KiB"},
		{math.MinInt64, "-8.0 EiB"},
	}
	for _, c := range cases {
		if got := FormatSize(c.n); got != c.want {
			t.Errorf("FormatSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
