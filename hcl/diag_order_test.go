package hcl

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestDiagnosticsInSourceOrder: the errors of one configuration come in
// the order they are written (file, line, column), whatever order the
// loader found them in; those without a place come first.
func TestDiagnosticsInSourceOrder(t *testing.T) {
	t.Parallel()
	rng := func(file string, line, col int) *hcl.Range {
		return &hcl.Range{Filename: file, Start: hcl.Pos{Line: line, Column: col}}
	}
	for _, c := range []struct {
		name string
		in   hcl.Diagnostics
		want []string
	}{
		{"attributes of one block decoded out of order", hcl.Diagnostics{
			{Summary: "min", Subject: rng("a.wdc.hcl", 4, 14)}, {Summary: "max", Subject: rng("a.wdc.hcl", 3, 14)},
		}, []string{"max", "min"}},
		{"files by name, columns within a line", hcl.Diagnostics{
			{Summary: "b1", Subject: rng("b.wdc.hcl", 1, 1)}, {Summary: "a2", Subject: rng("a.wdc.hcl", 2, 9)},
			{Summary: "a1", Subject: rng("a.wdc.hcl", 2, 3)},
		}, []string{"a1", "a2", "b1"}},
		{"no place first, one place's in their order", hcl.Diagnostics{
			{Summary: "x", Subject: rng("a.wdc.hcl", 1, 1)}, {Summary: "var"}, {Summary: "y", Subject: rng("a.wdc.hcl", 1, 1)},
		}, []string{"var", "x", "y"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, d := range sortDiags(c.in) {
				got = append(got, d.Summary)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("order %q, want %q", got, c.want)
			}
		})
	}
}
