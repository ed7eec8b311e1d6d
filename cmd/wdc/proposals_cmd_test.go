package main

import "testing"

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{`{"run":"1"}`, 40, `{"run":"1"}`},
		{`{"a":"` + "\u202e" + `evil"}`, 40, `{"a":"\u202eevil"}`},
		{"tab\there", 40, `tab\there`},
		{"héllo wörld", 5, "héll…"},
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q; want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestParseProposalID(t *testing.T) {
	for _, ok := range []string{"7", "proposal.7", "1"} {
		if _, err := parseProposalID(ok); err != nil {
			t.Errorf("parseProposalID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "abc", "proposal.x", "01", "+1", "99999999999999999999", "proposal.", "task.x"} {
		if _, err := parseProposalID(bad); err == nil {
			t.Errorf("parseProposalID(%q) accepted it", bad)
		}
	}
}
