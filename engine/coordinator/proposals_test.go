package coordinator

import (
	"encoding/json"
	"strings"
	"testing"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func proposalOf(id int64, status state.ProposalStatus, placement map[string]string) state.Proposal {
	d := protocol.Definition{Command: []string{"echo", "rerun"}, Env: map[string]string{}, Dir: "."}
	settings, _ := json.Marshal(ProposalSettings{Placement: placement, TimeoutMS: 60000, MaxAttempts: 2, MaxLost: 1, BackoffMS: 1000, MaxBackoffMS: 5000})
	p := state.Proposal{ID: id, Edge: "flake_rerun", Propose: "task.rerun", Type: "flake", SourceTask: "task.lint", SourceAttempt: 1,
		SourceToken: 3, Input: []byte(`{"run":"1"}`), DefHash: protocol.DefinitionHash(d, nil), Spec: d.Canonical(), Settings: settings, Status: status}
	switch status {
	case state.ProposalApproved:
		p.DecidedBy = "alice"
	case state.ProposalAutoApproved:
		p.DecidedBy, p.Earned = "edge.flake_rerun", "2 consecutive approvals: proposal.1, proposal.2"
	case state.ProposalRejected:
		p.DecidedBy, p.Reason = "bob", "no"
	}
	return p
}

// TestProposalRuntime: an approved proposal runs with the settings it
// recorded; its relative dir resolves against the configuration directory.
func TestProposalRuntime(t *testing.T) {
	p := proposalOf(4, state.ProposalApproved, map[string]string{"can": "build"})
	rt, err := ProposalRuntime(p, &wdchcl.Config{Dir: "/cfg"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Address != "proposal.4" || rt.WorkDir != "/cfg" || rt.Placement["can"] != "build" || rt.Timeout.Seconds() != 60 ||
		rt.Retry.MaxAttempts != 2 || rt.Retry.MaxLost != 1 || rt.Retry.Backoff.Seconds() != 1 || rt.DefHash != p.DefHash {
		t.Errorf("runtime %+v", rt)
	}
	p.Settings = []byte("not json")
	if _, err := ProposalRuntime(p, &wdchcl.Config{Dir: "/cfg"}, nil); err == nil {
		t.Error("settings that do not decode: no error")
	}
}

func TestCheckDecisionText(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" ok, else part of the error
	}{
		{"alice", ""},
		{"Zoë O'Brien, on call", ""},
		{"not a flake: the test fails on main too", ""},
		{"", "is blank"},
		{"   ", "is blank"},
		{"ev\u202eil", `'\u202e', which is not printable`},
		{"two\nlines", `'\n', which is not printable`},
		{"esc\x1b[2J", `'\x1b', which is not printable`},
		{strings.Repeat("x", 501), "longer than 500 bytes"},
	}
	for _, tt := range tests {
		err := CheckDecisionText("--by", tt.in)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckDecisionText(%q) = %v; want %q", tt.in, err, tt.want)
		}
	}
}

func TestUnrunnable(t *testing.T) {
	ok := func() *wdchcl.Task {
		return &wdchcl.Task{Command: []string{"echo", "x"}, Env: map[string]string{"A": "b"}, Dir: "/cfg",
			Placement: map[string]string{"k": "v"}, Outputs: []string{"out/*"}}
	}
	tests := []struct {
		name   string
		change func(*wdchcl.Task)
		want   string
	}{
		{"runnable", func(*wdchcl.Task) {}, ""},
		{"NUL in the command", func(t *wdchcl.Task) { t.Command[1] = "a\x00b" }, "command element 1 holds a NUL"},
		{"NUL in an env value", func(t *wdchcl.Task) { t.Env["A"] = "\x00" }, "env value of A"},
		{"= in an env name", func(t *wdchcl.Task) { t.Env["A=B"] = "x" }, `env name "A=B"`},
		{"empty env name", func(t *wdchcl.Task) { t.Env[""] = "x" }, `env name ""`},
		{"NUL in the dir", func(t *wdchcl.Task) { t.Dir = "/a\x00" }, "dir holds a NUL"},
		{"NUL in placement", func(t *wdchcl.Task) { t.Placement["k"] = "a\x00b" }, `placement "k" holds a NUL`},
		{"NUL in an output", func(t *wdchcl.Task) { t.Outputs = []string{"o\x00"} }, `output pattern "o\x00" holds a NUL`},
	}
	for _, tt := range tests {
		task := ok()
		tt.change(task)
		if got := unrunnable(task); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: unrunnable = %q; want %q", tt.name, got, tt.want)
		}
	}
}
