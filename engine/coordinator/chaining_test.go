package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// chainConfig is a configuration with a doctor task, two proposed_only
// tasks and an edge to each.
const chainConfig = `
pool "p" {
  provider = "local"
}

task "doctor" {
  command = ["true"]
}

task "other" {
  command = ["true"]
}

task "rerun" {
  proposed_only = true
  command       = ["echo", "rerun", proposal.input.run, proposal.source.task]
  env           = { ATTEMPT = proposal.source.attempt }
}

task "notify" {
  proposed_only = true
  command       = ["echo", "notify", proposal.input.run]
}

edge "flake_rerun" {
  from       = task.doctor
  type       = "flake"
  propose    = task.rerun
  input      = object({ run = string })
  approval   = "earned"
  earn_after = 1
}

edge "ticket_notify" {
  from    = task.doctor
  type    = "ticket"
  propose = task.notify
  input   = object({ run = string })
}
`

func loadChainConfig(t *testing.T) *wdchcl.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(chainConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

// TestCoordinatorJudgesRecommendations: the recommendations of an accepted
// result become proposals through the edges that declare their type, or
// are rejected with a reason; the apply is done only once they are judged.
// A failed attempt's recommendations, and a rejected result's, never count.
func TestCoordinatorJudgesRecommendations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		recs     string // the file's content
		agentErr string // what the agent could not send
		class    string // the attempt's failure class
		late     bool   // posted after the lease expired
		// want: per recommendation, "proposed" with the proposed task, or
		// "rejected: <part of the reason>"; nil: none recorded.
		want []string
	}{
		{name: "a flake", recs: `[{"type":"flake","input":{"run":"101"}}]`, want: []string{"proposed task.rerun"}},
		{name: "two edges", recs: `[{"type":"ticket","input":{"run":"7"}},{"type":"flake","input":{"run":"8"}}]`,
			want: []string{"proposed task.notify", "proposed task.rerun"}},
		{name: "a NUL in the input", recs: `[{"type":"flake","input":{"run":"a\u0000b"}}]`,
			want: []string{"rejected: NUL character in command: Element 2 of the command of task.rerun holds a NUL character"}},
		{name: "undeclared type", recs: `[{"type":"deploy"}]`, want: []string{`rejected: no edge declares the type "deploy" for task.doctor`}},
		{name: "input does not fit", recs: `[{"type":"flake","input":{"build":"1"}}]`, want: []string{`rejected: its input does not fit edge.flake_rerun's input type`}},
		{name: "not a list", recs: `{"type":"flake"}`, want: []string{"rejected: recommendations.json is not a JSON list"}},
		{name: "bad entry among good", recs: `[7, {"type":"flake","input":{"run":"1"}}]`, want: []string{"rejected: it is not a JSON object", "proposed task.rerun"}},
		{name: "the agent could not send it", agentErr: "recommendations.json is larger than the 65536 bytes allowed", want: []string{"rejected: larger than the 65536"}},
		{name: "failed attempt", recs: `[{"type":"flake","input":{"run":"1"}}]`, class: "failure"},
		{name: "late result", recs: `[{"type":"flake","input":{"run":"1"}}]`, late: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := loadChainConfig(t)
			h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("doctor")}, harnessOpts{config: cfg})
			w := h.register("p")
			a := w.claimOne()
			if tt.late {
				h.clock.Advance(time.Hour)
				h.sweep()
			}
			req := protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: "k",
				FailureClass: tt.class, Recommendations: json.RawMessage(tt.recs), RecommendationsError: tt.agentErr}
			if tt.recs == "" {
				req.Recommendations = nil
			}
			code := 0
			if tt.class != "" {
				code = 1
			}
			req.ExitCode = &code
			if _, err := w.cl.PostResult(context.Background(), a.FencingToken, req); err != nil {
				t.Fatal(err)
			}
			if !tt.late {
				select {
				case <-h.c.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the coordinator is not done")
				}
			}
			// Done means judged: nothing is left new.
			recs, err := h.store.Recommendations(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(tt.want) {
				t.Fatalf("%d recommendations recorded (%+v); want %d", len(recs), recs, len(tt.want))
			}
			props, _ := h.store.Proposals(context.Background())
			byID := map[int64]state.Proposal{}
			for _, p := range props {
				byID[p.ID] = p
			}
			for i, r := range recs {
				want := tt.want[i]
				if task, ok := strings.CutPrefix(want, "proposed "); ok {
					p := byID[r.ProposalID]
					if r.Status != state.RecommendationProposed || p.Propose != task || p.SourceTask != "task.doctor" || p.SourceAttempt != 1 {
						t.Errorf("recommendation %d: %s (%s), proposal %+v; want a proposal of %s", i, r.Status, r.Reason, p, task)
					}
					continue
				}
				if r.Status != state.RecommendationRejected || !strings.Contains(r.Reason, strings.TrimPrefix(want, "rejected: ")) {
					t.Errorf("recommendation %d: %s (%s); want %s", i, r.Status, r.Reason, want)
				}
			}
			rejections := strings.Count(strings.Join(tt.want, "\n"), "rejected:")
			if got := h.stateEvents("", state.EventRecommendationRejected); len(got) != rejections {
				t.Errorf("%d recommendation_rejected events in the state; want one per rejection", len(got))
			}
			told := 0
			for _, e := range h.recorded() {
				if e.Kind == coordinator.EventRecommendationRejected && e.Task == "task.doctor" {
					told++
				}
			}
			if told != rejections {
				t.Errorf("%d recommendation_rejected progress events; want one per rejection", told)
			}
		})
	}
}

// TestProposalRendersItsInput: a proposal records the task rendered with
// the recommendation's input and source, and its definition hash.
func TestProposalRendersItsInput(t *testing.T) {
	t.Parallel()
	cfg := loadChainConfig(t)
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("doctor")}, harnessOpts{config: cfg})
	w := h.register("p")
	a := w.claimOne()
	zero := 0
	if _, err := w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
		IdempotencyKey: "k", ExitCode: &zero, Recommendations: json.RawMessage(`[{"type":"ticket","input":{"run":"42","extra":"dropped"}}]`)}); err != nil {
		t.Fatal(err)
	}
	<-h.c.Done()
	p, err := h.store.Proposal(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	def, err := coordinator.ProposalDefinition(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(def.Command, " "); got != "echo notify 42" {
		t.Errorf("rendered command %q; want %q", got, "echo notify 42")
	}
	if string(p.Input) != `{"run":"42"}` {
		t.Errorf("recorded input %s; want the input converted to the edge's type", p.Input)
	}
	if p.Status != state.ProposalPending || p.DefHash != protocol.DefinitionHash(def, nil) {
		t.Errorf("proposal %+v: want pending, with its definition's hash", p)
	}
}

// TestApprovedProposalJoinsTheApply: an operator's approval through the
// coordinator adds the proposal's task to the running apply, which is not
// done until it ran; an edge that earned it approves the next proposal by
// itself, and that one joins too. A decision is made once.
func TestApprovedProposalJoinsTheApply(t *testing.T) {
	t.Parallel()
	cfg := loadChainConfig(t)
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 3)}, []coordinator.TaskRuntime{rtTask("doctor"), rtTask("doctor[1]"), rtTask("other")}, harnessOpts{config: cfg})
	w := h.register("p")
	doctor := w.claimOne()
	second := w.claimOne() // task.doctor[1]: the edge's from covers every instance
	other := w.claimOne()  // keeps the apply running
	zero := 0
	post := func(a protocol.Assignment, recs string) {
		t.Helper()
		if _, err := w.cl.PostResult(context.Background(), a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt,
			IdempotencyKey: "k" + a.Task, ExitCode: &zero, Recommendations: json.RawMessage(recs)}); err != nil {
			t.Fatal(err)
		}
	}
	post(doctor, `[{"type":"flake","input":{"run":"1"}}]`)
	waitFor(t, "proposal.1", 10*time.Second, func() bool { _, err := h.store.Proposal(context.Background(), 1); return err == nil })

	op := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	resp, err := op.DecideProposal(context.Background(), 1, protocol.ProposalDecisionRequest{Approve: true, By: "alice"})
	if err != nil || !resp.Queued || resp.Status != "approved" {
		t.Fatalf("approve = %+v, %v; want approved and queued in this apply", resp, err)
	}
	if _, err := op.DecideProposal(context.Background(), 1, protocol.ProposalDecisionRequest{Approve: false, By: "bob", Reason: "no"}); !isStatus(err, 409) {
		t.Errorf("a second decision: %v; want a 409", err)
	}
	if _, err := op.DecideProposal(context.Background(), 9, protocol.ProposalDecisionRequest{Approve: true, By: "alice"}); !isStatus(err, 404) {
		t.Errorf("deciding an unknown proposal: %v; want a 404", err)
	}
	if _, err := op.DecideProposal(context.Background(), 1, protocol.ProposalDecisionRequest{Approve: false, By: "bob"}); !isStatus(err, 400) {
		t.Errorf("a rejection without a reason: %v; want a 400", err)
	}
	run := w.claimOne()
	if run.Task != "proposal.1" || strings.Join(run.Definition.Command, " ") != "echo rerun 1 task.doctor" || run.Definition.Env["ATTEMPT"] != "1" {
		t.Fatalf("claimed %s %v %v; want proposal.1's rendered task", run.Task, run.Definition.Command, run.Definition.Env)
	}
	if p := h.c.Progress(); p.Total != 4 {
		t.Errorf("the apply has %d tasks; want 4 (the proposal joined)", p.Total)
	}
	post(run, "")
	// The next flake: the edge earned automatic approval (earn_after 1).
	post(second, `[{"type":"flake","input":{"run":"2"}}]`)
	waitFor(t, "proposal.2 to join the apply", 10*time.Second, func() bool { return h.c.Progress().Total == 5 })
	if p, err := h.store.Proposal(context.Background(), 2); err != nil || p.Status != state.ProposalAutoApproved {
		t.Fatalf("proposal.2 = %+v, %v; want auto_approved", p, err)
	}
	next := w.claimOne()
	if next.Task != "proposal.2" {
		t.Fatalf("claimed %s; want proposal.2, approved by its edge", next.Task)
	}
	post(next, "")
	post(other, "")
	select {
	case <-h.c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator is not done")
	}
	for _, addr := range []string{"proposal.1", "proposal.2"} {
		if st := h.task(addr).Status; st != state.TaskSucceeded {
			t.Errorf("%s is %s; want succeeded", addr, st)
		}
	}
	// Done: a proposal approved now waits for the next apply.
	added, why, err := h.c.AddTask(context.Background(), coordinator.TaskRuntime{Address: "proposal.9", DefHash: "h"}, "rerun")
	if added || err != nil || !strings.Contains(why, "finishing") {
		t.Errorf("AddTask after the end = %v, %q, %v; want refused: the apply is finishing", added, why, err)
	}
}

func isStatus(err error, code int) bool {
	var pe *protocol.APIError
	return errors.As(err, &pe) && pe.Status == code
}

// loopConfig has an edge from a proposed task to itself, which approves
// by itself after one approval.
const loopConfig = `
pool "p" {
  provider = "local"
}

task "start" {
  command = ["true"]
}

task "again" {
  proposed_only = true
  command       = ["echo", proposal.source.task]
}

edge "begin" {
  from    = task.start
  type    = "go"
  propose = task.again
}

edge "loop" {
  from       = task.again
  type       = "go"
  propose    = task.again
  approval   = "earned"
  earn_after = 1
}
`

// TestEdgesDoNotApproveChainsWithoutEnd: an edge approves by itself only
// proposals fewer than MaxAutoApprovalDepth steps from a configured task;
// a loop of edges stops there and waits for a person.
func TestEdgesDoNotApproveChainsWithoutEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(loopConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	st, err := state.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := ct0
	if err := st.UpsertPool(ctx, state.Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, now); err != nil {
		t.Fatal(err)
	}
	w, err := st.RegisterWorker(ctx, state.Worker{Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	// run records task addr as run once, its result recommending "go",
	// and judges it.
	var last coordinator.Judgement
	run := func(addr string) state.Proposal {
		t.Helper()
		if err := st.UpsertTask(ctx, state.TaskDef{Address: addr, Name: "x", Index: -1, DefHash: "h", Status: state.TaskQueued, MaxAttempts: 1}, now); err != nil {
			t.Fatal(err)
		}
		l, err := st.GrantLease(ctx, state.GrantRequest{Task: addr, WorkerID: w.ID, Timeout: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		zero := 0
		if _, err := st.AcceptResult(ctx, state.ResultInput{Key: addr, Token: l.Token, WorkerID: w.ID, ExitCode: &zero,
			Recommendations: []state.RecommendationInput{{Type: "go", Input: []byte(`{}`)}}}, nil, now); err != nil {
			t.Fatal(err)
		}
		js, err := coordinator.JudgeRecommendations(ctx, st, cfg, func() time.Time { return now })
		if err != nil || len(js) != 1 || js[0].Proposal == nil {
			t.Fatalf("judgements %+v, %v; want one proposal", js, err)
		}
		last = js[0]
		return *js[0].Proposal
	}
	first := run("task.start") // depth 0, edge "begin": always
	if first.Status != state.ProposalPending {
		t.Fatalf("%s is %s; want pending", first.Address(), first.Status)
	}
	second := run(first.Address()) // depth 1, edge "loop", no record yet
	if second.Status != state.ProposalPending {
		t.Fatalf("%s is %s; want pending", second.Address(), second.Status)
	}
	if _, err := st.DecideProposal(ctx, second.ID, true, "alice", "", now); err != nil {
		t.Fatal(err)
	}
	// The loop edge earned it: depth 2 is approved by itself, depth 3 waits.
	third := run(second.Address())
	fourth := run(third.Address())
	if third.Status != state.ProposalAutoApproved || fourth.Status != state.ProposalPending {
		t.Errorf("depth 2: %s, depth 3: %s; want auto_approved, then pending (coordinator.MaxAutoApprovalDepth %d)", third.Status, fourth.Status, coordinator.MaxAutoApprovalDepth)
	}
	if !last.TooDeep {
		t.Error("the depth-3 judgement does not say it waits because its chain is too deep")
	}
	if evs := coordinator.JudgementEvents([]coordinator.Judgement{last}, now); len(evs) != 1 || !strings.Contains(evs[0].Message, "only proposals fewer than 3 steps") {
		t.Errorf("events %+v; want one that says why it waits", evs)
	}
}

// TestSavedPlanRunsWhatItRecorded: an apply that carries out a saved plan
// adds no task while it runs: an approval through it is recorded, and its
// proposal runs in a later apply.
func TestSavedPlanRunsWhatItRecorded(t *testing.T) {
	t.Parallel()
	cfg := loadChainConfig(t)
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, []coordinator.TaskRuntime{rtTask("doctor"), rtTask("other")}, harnessOpts{config: cfg, fixedPlan: true})
	w := h.register("p")
	doctor := w.claimOne()
	w.claimOne()
	zero := 0
	if _, err := w.cl.PostResult(context.Background(), doctor.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: doctor.Task,
		Attempt: doctor.Attempt, IdempotencyKey: "k", ExitCode: &zero, Recommendations: json.RawMessage(`[{"type":"ticket","input":{"run":"1"}}]`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "proposal.1", 10*time.Second, func() bool { _, err := h.store.Proposal(context.Background(), 1); return err == nil })
	op := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	resp, err := op.DecideProposal(context.Background(), 1, protocol.ProposalDecisionRequest{Approve: true, By: "alice"})
	if err != nil || resp.Queued || resp.Status != "approved" || !strings.Contains(resp.Note, "saved plan") {
		t.Fatalf("approve = %+v, %v; want approved, not queued: the apply carries out a saved plan", resp, err)
	}
	if p := h.c.Progress(); p.Total != 2 {
		t.Errorf("the apply has %d tasks; want the 2 it recorded", p.Total)
	}
	if _, err := op.DecideProposal(context.Background(), 1, protocol.ProposalDecisionRequest{Approve: true, By: "two\nlines"}); !isStatus(err, 400) {
		t.Errorf("a decider with a newline: %v; want a 400", err)
	}
}
func TestSplitAddress(t *testing.T) {
	tests := []struct {
		in    string
		name  string
		index int
	}{
		{"task.a", "a", -1},
		{"task.a[0]", "a", 0},
		{"task.shard-x[12]", "shard-x", 12},
		{"task.a[x]", "a[x]", -1},
	}
	for _, tt := range tests {
		name, index := coordinator.SplitAddress(tt.in)
		if name != tt.name || index != tt.index {
			t.Errorf("SplitAddress(%q) = %q, %d; want %q, %d", tt.in, name, index, tt.name, tt.index)
		}
	}
}
