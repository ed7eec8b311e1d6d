package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/ext/typeexpr"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/operator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Chaining commands: the proposals tasks' recommendations became, the
// decisions on them, and the record each edge keeps.

// ProposalsCmd groups the proposal commands.
type ProposalsCmd struct {
	List ProposalsListCmd `cmd:"" help:"List proposals (follow-up tasks that tasks recommended through edges) with their status: pending, approved, auto_approved or rejected."`
	Show ProposalsShowCmd `cmd:"" help:"Show one proposal: the recommendation it came from, its input, the task it renders, who decided, and its run."`
}

// EdgesCmd groups the edge commands.
type EdgesCmd struct {
	List EdgesListCmd `cmd:"" help:"List the configuration's edges with their approval mode and record (approvals, rejections, the streak that earns automatic approval)."`
}

// proposalJSON is one proposal in `wdc proposals list --json` and `show
// --json` (docs/json.md, "Proposals").
type proposalJSON struct {
	ID         int64              `json:"id"`
	Address    string             `json:"address"`
	Status     string             `json:"status"`
	Edge       string             `json:"edge"`
	Task       string             `json:"task"`
	Type       string             `json:"type"`
	Source     proposalSourceJSON `json:"source"`
	Input      json.RawMessage    `json:"input"`
	DefHash    string             `json:"def_hash"`
	Definition json.RawMessage    `json:"definition"`
	Settings   json.RawMessage    `json:"settings"`
	DecidedBy  string             `json:"decided_by,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	Earned     string             `json:"earned,omitempty"`
	CreatedAt  time.Time          `json:"created_at"`
	DecidedAt  *time.Time         `json:"decided_at,omitempty"`
	// RunStatus is the status of its task (the address) in the state, ""
	// before an apply recorded it.
	RunStatus string `json:"run_status,omitempty"`
}

type proposalSourceJSON struct {
	Task           string `json:"task"`
	Attempt        int    `json:"attempt"`
	FencingToken   int64  `json:"fencing_token"`
	Recommendation int    `json:"recommendation"`
}

func newProposalJSON(p state.Proposal, runs map[string]state.TaskStatus) proposalJSON {
	return proposalJSON{
		ID: p.ID, Address: p.Address(), Status: string(p.Status), Edge: p.Edge, Task: p.Propose, Type: p.Type,
		Source:  proposalSourceJSON{Task: p.SourceTask, Attempt: p.SourceAttempt, FencingToken: p.SourceToken, Recommendation: p.SourceIndex},
		Input:   rawOr(p.Input, "{}"),
		DefHash: p.DefHash, Definition: rawOr(p.Spec, "{}"), Settings: rawOr(p.Settings, "{}"),
		DecidedBy: p.DecidedBy, Reason: p.Reason, Earned: p.Earned, CreatedAt: p.CreatedAt.UTC(), DecidedAt: views.JSONTime(p.DecidedAt),
		RunStatus: string(runs[p.Address()]),
	}
}

func rawOr(b []byte, def string) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage(def)
	}
	return json.RawMessage(b)
}

// parseProposalID reads "7" or "proposal.7".
func parseProposalID(s string) (int64, error) {
	addr := s
	if !strings.HasPrefix(addr, "proposal.") {
		addr = "proposal." + addr
	}
	id, ok := coordinator.ProposalID(addr)
	if !ok {
		return 0, fmt.Errorf("%q is not a proposal: give its id, as in 7 or proposal.7 (wdc proposals list shows them)", s)
	}
	return id, nil
}

// readProposals returns the state's proposals and the status of their
// runs; no state file gives none.
func (e *env) readProposals(ctx context.Context) ([]state.Proposal, map[string]state.TaskStatus, bool, string, error) {
	path, err := e.statePathForReading()
	if err != nil {
		return nil, nil, false, "", err
	}
	snap, err := readSnapshot(ctx, path)
	if err != nil {
		return nil, nil, false, path, err
	}
	runs := map[string]state.TaskStatus{}
	for _, t := range snap.Tasks {
		if strings.HasPrefix(t.Address, "proposal.") {
			runs[t.Address] = t.Status
		}
	}
	return snap.Proposals, runs, snap.Lineage != "", path, nil
}

// ProposalsListCmd lists proposals.
type ProposalsListCmd struct {
	Status string `name:"status" placeholder:"STATUS" help:"Only proposals with this status: pending, approved, auto_approved or rejected."`
	JSON   bool   `name:"json" help:"Print a JSON array instead of a table."`
}

// Run prints the proposals, oldest first.
func (c *ProposalsListCmd) Run(e *env) error {
	switch state.ProposalStatus(c.Status) {
	case "", state.ProposalPending, state.ProposalApproved, state.ProposalAutoApproved, state.ProposalRejected:
	default:
		return fmt.Errorf("--status %q is not a proposal status: give pending, approved, auto_approved or rejected", c.Status)
	}
	list, runs, exists, path, err := e.readProposals(context.Background())
	if err != nil {
		return err
	}
	out := []proposalJSON{}
	for _, p := range list {
		if c.Status == "" || string(p.Status) == c.Status {
			out = append(out, newProposalJSON(p, runs))
		}
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, out)
	}
	if len(out) == 0 {
		what := "No proposals"
		if c.Status != "" {
			what = "No " + c.Status + " proposals"
		}
		_, err := fmt.Fprintln(e.stdout, what+" in the state"+noStateHint(exists, path)+".")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "PROPOSAL\tSTATUS\tTASK\tPROPOSED BY\tEDGE\tINPUT\tDECIDED BY\tRUN")
	for _, p := range out {
		by := p.DecidedBy
		if by == "" {
			by = "-"
		}
		run := p.RunStatus
		if run == "" {
			run = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s attempt %d\tedge.%s\t%s\t%s\t%s\n", p.Address, p.Status, p.Task, p.Source.Task, p.Source.Attempt,
			p.Edge, clip(string(p.Input), 40), by, run)
	}
	return tw.Flush()
}

// clip shortens s to n runes, made views.Printable first (a control
// character, a bidirectional override that would make a column read
// otherwise than it is, written as a Go escape).
func clip(s string, n int) string {
	if s = views.Printable(s); len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// ProposalsShowCmd shows one proposal.
type ProposalsShowCmd struct {
	ID   string `arg:"" help:"The proposal: 7 or proposal.7."`
	JSON bool   `name:"json" help:"Print the proposal as JSON."`
}

// Run prints the proposal.
func (c *ProposalsShowCmd) Run(e *env) error {
	id, err := parseProposalID(c.ID)
	if err != nil {
		return err
	}
	list, runs, _, path, err := e.readProposals(context.Background())
	if err != nil {
		return err
	}
	for _, p := range list {
		if p.ID != id {
			continue
		}
		j := newProposalJSON(p, runs)
		if c.JSON {
			return views.WriteJSON(e.stdout, j)
		}
		var d protocol.Definition
		_ = json.Unmarshal(p.Spec, &d) // shown as recorded; an undecodable one shows empty
		var s coordinator.ProposalSettings
		_ = json.Unmarshal(p.Settings, &s)
		w := e.stdout
		fmt.Fprintf(w, "%s: %s\n", j.Address, j.Status)
		fmt.Fprintf(w, "  task:        %s\n", p.Propose)
		fmt.Fprintf(w, "  proposed by: %s attempt %d (fencing token %d), recommendation %d of type %q\n", p.SourceTask, p.SourceAttempt, p.SourceToken, p.SourceIndex, p.Type)
		fmt.Fprintf(w, "  via:         edge.%s\n", p.Edge)
		fmt.Fprintf(w, "  input:       %s\n", clip(string(j.Input), protocol.MaxRecommendationsBytes))
		fmt.Fprintf(w, "  command:     %s\n", views.CommandText(d.Command))
		if len(d.Env) > 0 {
			fmt.Fprintf(w, "  env:         %s\n", views.HCLMap(d.Env))
		}
		fmt.Fprintf(w, "  placement:   %s\n", views.FormatLabels(s.Placement))
		fmt.Fprintf(w, "  def_hash:    %s\n", p.DefHash)
		fmt.Fprintf(w, "  created:     %s\n", views.FormatTime(p.CreatedAt))
		switch p.Status {
		case state.ProposalPending:
			fmt.Fprintf(w, "  decision:    waiting (wdc approve %d, or wdc reject %d --reason TEXT)\n", p.ID, p.ID)
		case state.ProposalAutoApproved:
			fmt.Fprintf(w, "  decision:    approved by its edge at %s: %s\n", views.FormatTime(p.DecidedAt), p.Earned)
		case state.ProposalRejected:
			fmt.Fprintf(w, "  decision:    rejected by %s at %s: %s\n", p.DecidedBy, views.FormatTime(p.DecidedAt), p.Reason)
		default:
			fmt.Fprintf(w, "  decision:    approved by %s at %s\n", p.DecidedBy, views.FormatTime(p.DecidedAt))
		}
		switch run := runs[j.Address]; {
		case run != "":
			fmt.Fprintf(w, "  run:         %s (wdc tasks show %s, wdc logs %s)\n", run, j.Address, j.Address)
		case p.Status.Approved():
			fmt.Fprintf(w, "  run:         not yet: the next wdc apply runs it\n")
		}
		return nil
	}
	return fmt.Errorf("no proposal.%d in the state %s (wdc proposals list shows them)", id, path)
}

// ApproveCmd approves a proposal.
type ApproveCmd struct {
	ID string `arg:"" help:"The proposal: 7 or proposal.7."`
	By string `name:"by" placeholder:"NAME" help:"Who approves (default: the user name, USER)."`
}

// Run approves the proposal (see decideProposal).
func (c *ApproveCmd) Run(e *env) error {
	return e.decideProposal("wdc approve", c.ID, true, c.By, "")
}

// RejectCmd rejects a proposal.
type RejectCmd struct {
	ID     string `arg:"" help:"The proposal: 7 or proposal.7."`
	Reason string `name:"reason" required:"" placeholder:"TEXT" help:"Why it is rejected (recorded; required)."`
	By     string `name:"by" placeholder:"NAME" help:"Who rejects (default: the user name, USER)."`
}

// Run rejects the proposal (see decideProposal).
func (c *RejectCmd) Run(e *env) error {
	if strings.TrimSpace(c.Reason) == "" {
		return errors.New("--reason must say why the proposal is rejected")
	}
	return e.decideProposal("wdc reject", c.ID, false, c.By, c.Reason)
}

// decideProposal records a decision: through the running apply's
// coordinator when an apply holds the lock (an approved proposal then
// joins it), else in the state directly. A decision is made once.
func (e *env) decideProposal(verb, idText string, approve bool, by, reason string) error {
	id, err := parseProposalID(idText)
	if err != nil {
		return err
	}
	if by == "" {
		by = e.getenv("USER")
	}
	if by == "" {
		if u, err := user.Current(); err == nil {
			by = u.Username
		}
	}
	if by == "" {
		return errors.New("who decides? give --by NAME (USER is not set)")
	}
	if err := coordinator.CheckDecisionText("--by", by); err != nil {
		return err
	}
	if reason != "" {
		if err := coordinator.CheckDecisionText("--reason", reason); err != nil {
			return err
		}
	}
	ctx := context.Background()
	// With a backend: under its lock, on a copy put back (the operator of
	// the backend); else the state file, or the running apply.
	b, err := e.stateBackend(e.quietConfig())
	if err != nil {
		return err
	}
	var op operator.Operator
	var store *state.Store
	var path string
	if b != nil {
		op, path = e.backendOperator(verb, b, nil), b.Name()
	} else {
		if store, path, err = e.openExistingState(verb, "there is no proposal to decide"); err != nil {
			return err
		}
		defer store.Close()
		op = e.stateOperator(verb, store, path, nil)
	}
	cctx, cancel := callContext(0)
	defer cancel()
	resp, err := op.DecideProposal(cctx, id, protocol.ProposalDecisionRequest{Approve: approve, By: by, Reason: reason})
	var decided *operator.DecidedError
	var gone *operator.UnreachableError
	switch {
	case errors.Is(err, operator.ErrNotFound):
		return fmt.Errorf("no proposal.%d in the state %s (wdc proposals list shows them)", id, path)
	case errors.As(err, &decided):
		return fmt.Errorf("%s: a proposal is decided once", decided.Why)
	case errors.As(err, &gone):
		l := gone.Lock
		return fmt.Errorf("the apply holding the state's lock (%s, pid %d on %s) does not answer at %s: %v. If it is gone, wdc status says so, and the next wdc apply takes its lock over; decide again after that",
			l.Holder, l.PID, l.Host, l.CoordinatorURL, gone.Err)
	case err != nil:
		return describeAPIError(err)
	}
	note := resp.Note
	if b != nil {
		// What was decided, from the state as the backend now has it.
		p, err := e.pullForReading(ctx, b)
		if err != nil {
			return err
		}
		if store, err = state.OpenReadOnly(ctx, p); err != nil {
			return err
		}
		defer store.Close()
	}
	p, err := store.Proposal(ctx, id)
	if err != nil {
		return err
	}
	if approve {
		fmt.Fprintf(e.stdout, "Approved %s: %s. %s.\n", p.Address(), coordinator.ProposalOrigin(p), capitalize(note))
	} else {
		fmt.Fprintf(e.stdout, "Rejected %s (%s proposed by %s attempt %d): %s. It will not run.\n", p.Address(), p.Propose, p.SourceTask, p.SourceAttempt, p.Reason)
	}
	if recs, err := store.EdgeRecords(ctx); err == nil {
		for _, r := range recs {
			if r.Edge != p.Edge {
				continue
			}
			streak := fmt.Sprintf("%d approved in a row", r.Streak)
			// The configuration's edge, when it loads: a changed edge
			// starts its streak again at its next proposal.
			if dir, err := e.configDir(); err == nil {
				if cfg, noConfig := e.loadOptionalConfig(dir); noConfig == "" {
					for _, ed := range cfg.Edges {
						if ed.Name == r.Edge && ed.Hash() != r.EdgeHash {
							streak = "its streak starts again at its next proposal (the edge changed)"
						}
					}
				}
			}
			fmt.Fprintf(e.stdout, "edge.%s: %s, %d approved and %d rejected in all.\n", r.Edge, streak, r.Approvals, r.Rejections)
		}
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// edgeJSON is one edge in `wdc edges list --json` (docs/json.md, "Edges").
type edgeJSON struct {
	Name            string  `json:"name"`
	Address         string  `json:"address"`
	InConfiguration bool    `json:"in_configuration"`
	From            string  `json:"from,omitempty"`
	Type            string  `json:"type,omitempty"`
	Propose         string  `json:"propose,omitempty"`
	Input           string  `json:"input,omitempty"`
	Approval        string  `json:"approval,omitempty"`
	EarnAfter       int     `json:"earn_after,omitempty"`
	Earned          bool    `json:"earned"`
	Approvals       int     `json:"approvals"`
	Rejections      int     `json:"rejections"`
	AutoApprovals   int     `json:"auto_approvals"`
	Streak          int     `json:"streak"`
	StreakProposals []int64 `json:"streak_proposals"`
	// RecordCurrent is false when the record was kept for an earlier
	// definition of the edge: its streak starts again at the next proposal.
	RecordCurrent bool `json:"record_current"`
}

// EdgesListCmd lists the edges and their records.
type EdgesListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

// Run prints every edge of the configuration with its record, then the
// records of edges no longer configured.
func (c *EdgesListCmd) Run(e *env) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	path, err := e.readingPath(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	store, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	var recs []state.EdgeRecord
	if store != nil {
		defer store.Close()
		if recs, err = store.EdgeRecords(ctx); err != nil {
			return err
		}
	}
	byName := map[string]state.EdgeRecord{}
	for _, r := range recs {
		byName[r.Edge] = r
	}
	out := []edgeJSON{}
	for _, ed := range cfg.Edges {
		j := edgeJSON{Name: ed.Name, Address: ed.Address(), InConfiguration: true, From: "task." + ed.From, Type: ed.Type,
			Propose: "task." + ed.Propose, Input: typeexpr.TypeString(ed.Input), Approval: ed.Approval, EarnAfter: ed.EarnAfter,
			StreakProposals: []int64{}, RecordCurrent: true}
		if r, ok := byName[ed.Name]; ok {
			delete(byName, ed.Name)
			j.Approvals, j.Rejections, j.AutoApprovals = r.Approvals, r.Rejections, r.AutoApprovals
			if j.RecordCurrent = r.EdgeHash == ed.Hash(); j.RecordCurrent {
				j.Streak = r.Streak
				j.StreakProposals = append(j.StreakProposals, r.StreakProposals...)
			}
		}
		j.Earned = ed.Approval == wdchcl.ApprovalEarned && j.Streak >= ed.EarnAfter
		out = append(out, j)
	}
	for _, r := range recs {
		if _, left := byName[r.Edge]; !left {
			continue
		}
		out = append(out, edgeJSON{Name: r.Edge, Address: "edge." + r.Edge, Approvals: r.Approvals, Rejections: r.Rejections,
			AutoApprovals: r.AutoApprovals, Streak: r.Streak, StreakProposals: append([]int64{}, r.StreakProposals...)})
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No edges: the configuration declares no edge block, so no task's recommendation can become a proposal.")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "EDGE\tFROM\tTYPE\tPROPOSE\tAPPROVAL\tRECORD")
	for _, j := range out {
		if !j.InConfiguration {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t(not in the configuration)\t%s\n", j.Address, edgeRecord(j))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Address, j.From, strconv.Quote(j.Type), j.Propose, approvalMode(j), edgeRecord(j))
	}
	return tw.Flush()
}

func approvalMode(j edgeJSON) string {
	switch {
	case j.Approval != wdchcl.ApprovalEarned:
		return "always (a person approves each)"
	case j.Earned:
		return fmt.Sprintf("earned: approves by itself (%d in a row, needs %d)", j.Streak, j.EarnAfter)
	}
	return fmt.Sprintf("earned: %d of %d approvals in a row", j.Streak, j.EarnAfter)
}

func edgeRecord(j edgeJSON) string {
	s := fmt.Sprintf("%d approved, %d rejected, %d by itself", j.Approvals, j.Rejections, j.AutoApprovals)
	if !j.RecordCurrent && j.InConfiguration {
		s += " (streak reset: the edge changed)"
	}
	return s
}

// unjudgedRecommendations counts the recommendations of accepted results
// that no coordinator judged yet (0 when the state cannot be read: the
// plan says why on its own).
func unjudgedRecommendations(ctx context.Context, path string) int {
	st, err := openForReading(ctx, path)
	if err != nil || st == nil {
		return 0
	}
	defer st.Close()
	n, err := st.NewRecommendationCount(ctx)
	if err != nil {
		return 0
	}
	return n
}
