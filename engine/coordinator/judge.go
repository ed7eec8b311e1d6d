package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Chaining by typed recommendations. A task never starts other work: an
// attempt that succeeds may leave recommendations (protocol.RecommendationsFile),
// and only those of an accepted result count. Each one is judged against the
// configuration's edge blocks by JudgeRecommendations: a type no edge of the
// recommending task declares, an input that does not fit the edge's type, or
// a follow-up task that does not render is rejected (recorded, with an
// event, running nothing); anything else becomes a proposal of the edge's
// proposed_only task, rendered with the input. A proposal runs only once
// approved — by a person (wdc approve), or by its edge once the edge has
// earned it (approval = "earned": earn_after consecutive approvals).

// MaxAutoApprovalDepth bounds chains an edge approves by itself: a
// proposal recommended by the run of a proposal is depth 1 more than that
// proposal (one recommended by a configured task is depth 0), and an edge
// approves by itself only proposals of depth below it; deeper ones wait for
// a person. So edges that propose each other (or a task itself) cannot run
// without end.
const MaxAutoApprovalDepth = 3

// Judgement is what JudgeRecommendations decided for one recommendation:
// a proposal (Created false when an earlier run of the judge made it), or
// a rejection with its reason.
type Judgement struct {
	Recommendation state.Recommendation
	Proposal       *state.Proposal
	Created        bool
	Rejected       string
	// TooDeep is true when the edge would have approved the proposal by
	// itself but its chain is MaxAutoApprovalDepth deep: it waits.
	TooDeep bool
}

// JudgeRecommendations judges every recommendation still new in the state
// against cfg's edges, oldest first, and records each decision (state.Store
// Propose or RejectRecommendation). It is safe to run again after a crash:
// a recommendation is judged once, and a proposal is never made twice for
// it. Errors: the state's; the judgements made before the error are
// returned with it.
func JudgeRecommendations(ctx context.Context, store *state.Store, cfg *wdchcl.Config, now func() time.Time) ([]Judgement, error) {
	var out []Judgement
	for {
		recs, err := store.NewRecommendations(ctx, 256)
		if err != nil || len(recs) == 0 {
			return out, err
		}
		for _, r := range recs {
			j, err := judge(ctx, store, cfg, r, now())
			if err != nil {
				return out, err
			}
			out = append(out, j)
		}
	}
}

func judge(ctx context.Context, store *state.Store, cfg *wdchcl.Config, r state.Recommendation, now time.Time) (Judgement, error) {
	j := Judgement{Recommendation: r}
	in, reason, tooDeep, err := proposalFor(ctx, store, cfg, r)
	if err != nil {
		return j, err
	}
	j.TooDeep = tooDeep
	if reason != "" {
		j.Rejected = reason
		err := store.RejectRecommendation(ctx, r.Token, r.Index, reason, now)
		if errors.Is(err, state.ErrConflict) {
			err = nil // judged meanwhile
		}
		return j, err
	}
	p, created, err := store.Propose(ctx, in, now)
	if errors.Is(err, state.ErrConflict) {
		return j, nil // rejected meanwhile
	}
	if err != nil {
		return j, err
	}
	j.Proposal, j.Created = &p, created
	return j, nil
}

// proposalFor renders the proposal a recommendation asks for, or says why
// it is rejected; tooDeep says the edge would approve it by itself but for
// the depth of its chain.
func proposalFor(ctx context.Context, store *state.Store, cfg *wdchcl.Config, r state.Recommendation) (in state.ProposeInput, reason string, tooDeep bool, err error) {
	from, source, err := recommendingBlock(ctx, store, r.Task)
	if err != nil {
		return in, "", false, err
	}
	edge := cfg.EdgeFor(from, r.Type)
	if edge == nil {
		return in, noEdge(cfg, from, r.Type), false, nil
	}
	input, err := edge.ConvertInput(r.Input)
	if err != nil {
		return in, fmt.Sprintf("its input does not fit %s's input type: %v", edge.Address(), err), false, nil
	}
	t, diags := cfg.RenderProposal(edge, input, wdchcl.ProposalSource{Task: r.Task, Attempt: r.Attempt})
	if diags.HasErrors() {
		return in, fmt.Sprintf("task.%s does not render with its input: %s", edge.Propose, diagText(diags)), false, nil
	}
	if msg := unrunnable(t); msg != "" {
		return in, fmt.Sprintf("task.%s does not render a task that can run with its input: %s", edge.Propose, msg), false, nil
	}
	inputJSON, err := ctyjson.Marshal(input, input.Type())
	if err != nil {
		return in, fmt.Sprintf("its input cannot be recorded: %v", err), false, nil
	}
	key, err := store.HashKey(ctx)
	if err != nil {
		return in, "", false, err
	}
	def := proposedDefinition(cfg.Dir, t, key)
	settings, err := json.Marshal(ProposalSettings{
		Placement: t.Placement, TimeoutMS: t.Timeout.Milliseconds(), LeaseGraceMS: t.LeaseGrace.Milliseconds(),
		MaxAttempts: t.Retry.MaxAttempts, MaxLost: t.Retry.MaxLost,
		BackoffMS: t.Retry.Backoff.Milliseconds(), MaxBackoffMS: t.Retry.MaxBackoff.Milliseconds(), DirSet: t.DirSet,
	})
	if err != nil {
		return in, "", false, fmt.Errorf("encoding the settings of a proposal: %w", err)
	}
	in = state.ProposeInput{
		Token: r.Token, Index: r.Index, Edge: edge.Name, EdgeHash: edge.Hash(), Propose: "task." + edge.Propose,
		Input: inputJSON, DefHash: protocol.DefinitionHash(def, nil), Spec: def.Canonical(), Settings: settings,
	}
	if edge.Approval == wdchcl.ApprovalEarned {
		depth := 0 // recommended by a configured task
		if source != nil {
			// By a proposal's run: one step deeper than that proposal.
			d, err := chainDepth(ctx, store, source.SourceTask)
			if err != nil {
				return in, "", false, err
			}
			depth = d + 1
		}
		if depth < MaxAutoApprovalDepth {
			in.EarnAfter = edge.EarnAfter
		} else {
			tooDeep = true
		}
	}
	return in, "", tooDeep, nil
}

// chainDepth is the depth (MaxAutoApprovalDepth) a proposal recommended by
// the task at addr gets: 0 for a configured task, 1 more than the proposal
// for a proposal's run. It looks no deeper than MaxAutoApprovalDepth.
func chainDepth(ctx context.Context, store *state.Store, addr string) (int, error) {
	depth := 0
	for depth < MaxAutoApprovalDepth {
		id, ok := ProposalID(addr)
		if !ok {
			return depth, nil
		}
		p, err := store.Proposal(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			return depth, nil
		}
		if err != nil {
			return 0, err
		}
		depth++
		addr = p.SourceTask
	}
	return depth, nil
}

// unrunnable says why a rendered task cannot be started, or "": a NUL in
// its command, env or dir (exec refuses it), an env name that is empty or
// holds "=".
func unrunnable(t *wdchcl.Task) string {
	for i, a := range t.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Sprintf("command element %d holds a NUL character", i)
		}
	}
	for k, v := range t.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Sprintf("the env name %q is empty or holds \"=\" or a NUL character", k)
		case strings.ContainsRune(v, 0):
			return fmt.Sprintf("the env value of %s holds a NUL character", k)
		}
	}
	if strings.ContainsRune(t.Dir, 0) {
		return "its dir holds a NUL character"
	}
	for k, v := range t.Placement {
		if strings.ContainsRune(k+v, 0) {
			return fmt.Sprintf("its placement %s holds a NUL character", strconv.QuoteToGraphic(k))
		}
	}
	for _, o := range t.Outputs {
		if strings.ContainsRune(o, 0) {
			return fmt.Sprintf("its output pattern %s holds a NUL character", strconv.QuoteToGraphic(o))
		}
	}
	return ""
}

// recommendingBlock is the task block whose edges judge a recommendation of
// the task at addr: NAME of task.NAME and task.NAME[i]; for a proposal's
// run (proposal.N), the block of the task it proposed, and that proposal
// (source; nil for a configured task, or a proposal the state lacks,
// whose block is "").
func recommendingBlock(ctx context.Context, store *state.Store, addr string) (block string, source *state.Proposal, err error) {
	if id, ok := ProposalID(addr); ok {
		p, err := store.Proposal(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		addr, source = p.Propose, &p
	}
	name, _ := SplitAddress(addr)
	return name, source, nil
}

func noEdge(cfg *wdchcl.Config, from, typ string) string {
	var types []string
	for _, e := range cfg.Edges {
		if e.From == from {
			types = append(types, strconv.Quote(e.Type))
		}
	}
	sort.Strings(types)
	if len(types) == 0 {
		return fmt.Sprintf("no edge declares recommendations of task.%s: it may recommend nothing", from)
	}
	return fmt.Sprintf("no edge declares the type %q for task.%s (its edges take %s)", typ, from, strings.Join(types, ", "))
}

// diagText is the first error of diags in one line, with its position.
func diagText(diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		s := d.Summary
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		if d.Subject != nil {
			s = d.Subject.String() + ": " + s
		}
		return s
	}
	return "unknown error"
}

// proposedDefinition is the canonical definition of a rendered
// proposed_only task (which has no dependencies, inputs or mounts), its
// sensitive parts keyed with key, the state's hash key.
func proposedDefinition(cfgDir string, t *wdchcl.Task, key []byte) protocol.Definition {
	d := protocol.Definition{Command: t.Command, Env: t.Env, Dir: protocol.DefinitionDir(cfgDir, t.Dir), Outputs: t.Outputs}
	if !t.DirSet && len(d.Outputs) > 0 {
		d.Dir = "" // it runs in its attempt's directory
	}
	return d.Protect(key, t.Sensitive.From)
}

// judgementEvents are the progress events of judgements.
func judgementEvents(js []Judgement, at time.Time) []Event {
	var evs []Event
	for _, j := range js {
		r := j.Recommendation
		switch {
		case j.Rejected != "":
			evs = append(evs, Event{At: at, Kind: EventRecommendationRejected, Task: r.Task, Attempt: r.Attempt, Token: r.Token,
				Message: rejectedText(r.Index, r.Type, j.Rejected)})
		case j.Proposal != nil && j.Created:
			p := *j.Proposal
			msg := ProposalOrigin(p)
			if p.Status == state.ProposalPending {
				msg += fmt.Sprintf(" (wdc approve %d, or wdc reject %d --reason TEXT)", p.ID, p.ID)
				if j.TooDeep {
					msg += fmt.Sprintf("; its edge approves by itself only proposals fewer than %d steps from a configured task, and this one is %d steps deep",
						MaxAutoApprovalDepth, MaxAutoApprovalDepth)
				}
			}
			evs = append(evs, Event{At: at, Kind: EventProposed, Task: p.Address(), Token: r.Token, Message: msg})
		}
	}
	return evs
}
