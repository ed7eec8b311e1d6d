package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func proposalOf(id int64, status state.ProposalStatus, placement map[string]string) state.Proposal {
	d := protocol.Definition{Command: []string{"echo", "rerun"}, Env: map[string]string{}, Dir: "."}
	settings, _ := json.Marshal(coordinator.ProposalSettings{Placement: placement, TimeoutMS: 60000, MaxAttempts: 2, MaxLost: 1, BackoffMS: 1000, MaxBackoffMS: 5000})
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

// TestPlanProposals: an approved proposal is a task to run until it
// succeeds, retried when it failed; a pending one waits and is no change; a
// rejected one never runs; an approved one no pool can run is left out
// with a warning.
func TestPlanProposals(t *testing.T) {
	tests := []struct {
		name       string
		status     state.ProposalStatus
		placement  map[string]string
		run        state.TaskStatus // status of its run in the state; "" none
		replace    bool             // --replace proposal.1
		removed    bool             // task.rerun is no longer in the configuration
		wantAction Action           // "" no change
		wantReason string
		waiting    bool
		warning    string
	}{
		{name: "approved", status: state.ProposalApproved, wantAction: ActionRun,
			wantReason: "task.rerun proposed by task.lint attempt 1 via edge.flake_rerun, approved by alice"},
		{name: "auto approved", status: state.ProposalAutoApproved, wantAction: ActionRun,
			wantReason: "approved by the edge (2 consecutive approvals: proposal.1, proposal.2)"},
		{name: "pending", status: state.ProposalPending, waiting: true},
		{name: "rejected", status: state.ProposalRejected},
		{name: "ran and succeeded", status: state.ProposalApproved, run: state.TaskSucceeded},
		{name: "ran and failed", status: state.ProposalApproved, run: state.TaskFailed},
		{name: "ran and failed, replaced", status: state.ProposalApproved, run: state.TaskFailed, replace: true,
			wantAction: ActionRetry, wantReason: "; failed earlier: exit status 1; --replace runs it again"},
		{name: "ran and succeeded, replaced", status: state.ProposalApproved, run: state.TaskSucceeded, replace: true,
			wantAction: ActionReplace, wantReason: "replacement requested with --replace"},
		{name: "ran and was cancelled", status: state.ProposalApproved, run: state.TaskCancelled},
		{name: "proposed task removed", status: state.ProposalApproved, removed: true, warning: "task.rerun is no longer a proposed_only task"},
		{name: "proposed task removed, run left queued", status: state.ProposalApproved, removed: true, run: state.TaskQueued,
			wantAction: ActionCancel, warning: "task.rerun is no longer a proposed_only task"},
		{name: "left queued", status: state.ProposalApproved, run: state.TaskQueued, wantAction: ActionRun, wantReason: "left queued by an earlier apply"},
		{name: "no pool can run it", status: state.ProposalApproved, placement: map[string]string{"gpu": "yes"}, warning: "no pool's labels satisfy its placement gpu=yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			if !tt.removed {
				cfg.ProposedTasks = []*wdchcl.ProposedTask{{Name: "rerun"}}
			}
			snap := stateOf(cfg, state.TaskSucceeded, nil)
			prop := proposalOf(1, tt.status, tt.placement)
			snap.Proposals = []state.Proposal{prop}
			if tt.run != "" {
				snap.Tasks = append(snap.Tasks, state.Task{Address: "proposal.1", Name: "rerun", Index: -1, DefHash: prop.DefHash, Spec: prop.Spec,
					Status: tt.run, LastError: map[bool]string{true: "exit status 1"}[tt.run == state.TaskFailed]})
			}
			var opts Options
			if tt.replace {
				opts.Replace = []string{"proposal.1"}
			}
			p, diags := New(cfg, snap, now, opts)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var got *TaskChange
			for i := range p.Tasks {
				if p.Tasks[i].Address == "proposal.1" {
					got = &p.Tasks[i]
				}
				if p.Tasks[i].Action == ActionCancel && p.Tasks[i].Address != "proposal.1" {
					t.Errorf("the plan cancels %s", p.Tasks[i].Address)
				}
			}
			switch {
			case tt.wantAction == "" && got != nil:
				t.Errorf("plan %s %s (%s); want no change", got.Action, got.Address, got.Reason)
			case tt.wantAction != "" && got == nil:
				t.Fatalf("no change for proposal.1; want %s", tt.wantAction)
			case got != nil:
				if got.Action == ActionCancel && tt.wantAction == ActionCancel {
					break
				}
				if got.Action != tt.wantAction || !strings.Contains(got.Reason, tt.wantReason) || got.Proposal == nil || got.Pool == "" {
					t.Errorf("change %+v; want %s with a reason containing %q, on a pool", got, tt.wantAction, tt.wantReason)
				}
				if d := p.Definitions["proposal.1"]; d.Hash != prop.DefHash || d.Err != nil {
					t.Errorf("definition %+v; want the proposal's", d)
				}
			}
			if (len(p.Waiting) == 1) != tt.waiting {
				t.Errorf("waiting %v; want waiting=%v", p.Waiting, tt.waiting)
			}
			var warned string
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning {
					warned += d.Detail
				}
			}
			if (tt.warning == "") != (warned == "") || !strings.Contains(warned, tt.warning) {
				t.Errorf("warnings %q; want one containing %q", warned, tt.warning)
			}
		})
	}
}

func TestPlanReplaceNotAnApprovedProposal(t *testing.T) {
	cfg := baseConfig()
	snap := stateOf(cfg, state.TaskSucceeded, nil)
	snap.Proposals = []state.Proposal{proposalOf(1, state.ProposalPending, nil)}
	for _, addr := range []string{"proposal.1", "proposal.2"} {
		_, diags := New(cfg, snap, now, Options{Replace: []string{addr}})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), addr+" is not an approved proposal") {
			t.Errorf("--replace %s: %v; want an error", addr, diags)
		}
	}
}

// An approved proposal whose task has a sensitive value runs only when the
// configuration renders that value again (the state keeps its keyed hash
// alone): here its edge is gone, so the plan leaves it out, saying why,
// and does not cancel it.
func TestPlanProposalWithoutItsSensitiveValue(t *testing.T) {
	cfg := baseConfig()
	cfg.ProposedTasks = []*wdchcl.ProposedTask{{Name: "rerun"}}
	snap := stateOf(cfg, state.TaskSucceeded, nil)
	snap.HashKey = []byte("0123456789abcdef0123456789abcdef")
	prop := proposalOf(1, state.ProposalApproved, nil)
	d := protocol.Definition{Command: []string{"echo", "rerun"}, Env: map[string]string{"TOKEN": "hunter2"}, Dir: "."}.
		Protect(snap.HashKey, map[string][]string{protocol.EnvPart("TOKEN"): {"var.token"}})
	prop.DefHash, prop.Spec = protocol.DefinitionHash(d, nil), d.Canonical()
	snap.Proposals = []state.Proposal{prop}
	snap.Tasks = append(snap.Tasks, state.Task{Address: "proposal.1", Name: "rerun", Index: -1, DefHash: prop.DefHash, Spec: prop.Spec, Status: state.TaskQueued})
	p, diags := New(cfg, snap, now, Options{})
	var warned bool
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Summary == "Approved proposal will not run" &&
			strings.Contains(d.Detail, "proposal.1: the sensitive values of its task, env.TOKEN (from var.token), are not kept in the state") &&
			strings.Contains(d.Detail, "(edge.flake_rerun is not in it)") {
			warned = true
		}
	}
	if !warned || diags.HasErrors() {
		t.Errorf("diagnostics %v; want the warning that proposal.1 will not run, and why", diags)
	}
	for _, tc := range p.Tasks {
		if tc.Address == "proposal.1" {
			t.Errorf("the plan %ss proposal.1", tc.Action)
		}
	}
}
