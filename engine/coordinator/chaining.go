package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/engine/placement"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Event kinds of chaining, passed to OnEvent.
const (
	// EventRecommendationRejected: a recommendation of an accepted result
	// was rejected (Task the recommending task, Message the reason); it
	// runs nothing.
	EventRecommendationRejected = "recommendation_rejected"
	// EventProposed: a recommendation became a proposal (Task its address,
	// "proposal.N"; Message where it came from and whether it waits for
	// approval).
	EventProposed = "proposed"
	// EventTaskAdded: an approved proposal joined the running apply (Task
	// "proposal.N", Pool the first pool that can run it).
	EventTaskAdded = "task_added"
)

// recommendationsOf is what the state records of a result's
// recommendations: only a succeeded attempt's count (a failed attempt may
// be retried, and its retry recommends again).
func recommendationsOf(req protocol.ResultRequest) []state.RecommendationInput {
	if req.FailureClass != "" {
		return nil
	}
	if req.RecommendationsError != "" {
		return []state.RecommendationInput{{Reason: truncate(req.RecommendationsError, 500)}}
	}
	if len(req.Recommendations) == 0 {
		return nil
	}
	var out []state.RecommendationInput
	for _, r := range protocol.DecodeRecommendations(req.Recommendations) {
		out = append(out, state.RecommendationInput{Type: r.Type, Input: r.Input, Reason: r.Problem})
	}
	return out
}

// intakeRejections are the events of the recommendations of an accepted
// result that were rejected before any edge judged them (an entry that is
// not {"type", "input"}, one past the cap, a file the agent could not
// send): the state recorded them rejected in the result's write.
func intakeRejections(in state.ResultInput, task string, at time.Time) []Event {
	var evs []Event
	for i, r := range in.Recommendations {
		if r.Reason == "" {
			continue
		}
		evs = append(evs, Event{At: at, Kind: EventRecommendationRejected, Task: task, Attempt: in.Attempt, Token: in.Token,
			Message: rejectedText(i, r.Type, r.Reason)})
	}
	return evs
}

// rejectedText is the message of a recommendation_rejected event:
// `recommendation 2 (type "flake") rejected: REASON`, without the type when
// the entry has none.
func rejectedText(index int, typ, reason string) string {
	if typ == "" {
		return fmt.Sprintf("recommendation %d rejected: %s", index, reason)
	}
	return fmt.Sprintf("recommendation %d (type %q) rejected: %s", index, typ, reason)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// nudgeJudge wakes the judge of recommendations.
func (c *Coordinator) nudgeJudge() {
	select {
	case c.judgeWake <- struct{}{}:
	default:
	}
}

// judgeLoop judges recommendations (JudgeRecommendations) when results
// bring some, and once at the start for those an earlier coordinator left.
// Proposals the edge approved by itself join the apply. The apply is not
// done while results it accepted have recommendations not judged yet.
func (c *Coordinator) judgeLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		owed := c.judging
		c.mu.Unlock()
		js, err := JudgeRecommendations(ctx, c.store, c.cfg, c.now)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("judging recommendations", "err", err)
		}
		c.emit(judgementEvents(js, c.now()))
		for _, j := range js {
			if j.Created && j.Proposal.Status == state.ProposalAutoApproved {
				c.runProposal(ctx, *j.Proposal)
			}
		}
		c.mu.Lock()
		c.judging -= owed
		c.checkDoneLocked()
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-c.judgeWake:
		}
	}
}

// runProposal adds an approved proposal's task to the apply, if it still
// grants; it says what happened.
func (c *Coordinator) runProposal(ctx context.Context, p state.Proposal) string {
	if c.cfg == nil {
		return "it runs in the next apply"
	}
	rt, err := ProposalRuntime(p, c.cfg, c.hashKey)
	if err != nil {
		c.log.Warn("running an approved proposal", "proposal", p.Address(), "err", err)
		return "it could not join this apply (" + err.Error() + "); it runs in the next apply"
	}
	added, why, err := c.AddTask(ctx, rt, strings.TrimPrefix(p.Propose, "task."))
	switch {
	case err != nil:
		c.log.Warn("running an approved proposal", "proposal", p.Address(), "err", err)
		return "it could not join this apply (" + err.Error() + "); it runs in the next apply"
	case !added:
		return why + "; it runs in a later apply (wdc plan shows it)"
	}
	return "it runs in this apply"
}

// AddTask runs rt in this apply: a task recorded while the apply runs (an
// approved proposal; name is its block's name). It records the task queued
// with rt's retry budgets, and queues it. It adds nothing, and says why,
// when the apply no longer grants (it drains, was interrupted or is done),
// already runs rt.Address, or has no pool that can run it. Errors: the
// state's (nothing is added then).
func (c *Coordinator) AddTask(ctx context.Context, rt TaskRuntime, name string) (added bool, why string, err error) {
	if err := c.checkSensitive(rt); err != nil {
		return false, "", err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	rt = normalizeRuntime(rt)
	pools := c.poolsFor(rt.Placement)
	c.mu.Lock()
	switch {
	case c.stopped || c.draining || c.interrupted || c.doneClosed:
		why = "the apply is finishing"
	case c.tasks[rt.Address] != nil:
		why = "the apply already runs it"
	case len(pools) == 0:
		why = fmt.Sprintf("no pool of this apply satisfies its placement %s", placement.Text(rt.Placement))
	case c.fixedPlan:
		why = "this apply carries out a saved plan, which did not record it"
	}
	c.mu.Unlock()
	if why != "" {
		return false, why, nil
	}
	_, index := SplitAddress(rt.Address)
	def := state.TaskDef{Address: rt.Address, Name: name, Index: index, DefHash: rt.DefHash, Spec: rt.Definition.Canonical(),
		Status: state.TaskQueued, MaxAttempts: max(rt.Retry.MaxAttempts, 1), MaxLost: rt.Retry.MaxLost}
	if err := c.store.UpsertTasks(ctx, []state.TaskDef{def}, c.now()); err != nil {
		return false, "", err
	}
	c.mu.Lock()
	ts := &taskState{rt: rt, pos: len(c.order), status: state.TaskQueued, pools: pools,
		policy: state.TaskPolicy{Backoff: rt.Retry.Backoff, MaxBackoff: rt.Retry.MaxBackoff}}
	c.tasks[rt.Address] = ts
	c.order = append(c.order, ts)
	c.unfinished++
	c.enqueue(ts)
	c.broadcastLocked()
	c.mu.Unlock()
	c.emitAndFlush([]Event{{At: c.now(), Kind: EventTaskAdded, Task: rt.Address, Pool: pools[0].rt.Name,
		Message: "approved while the apply runs: it runs in it, on pool." + pools[0].rt.Name}})
	return true, "", nil
}

// SplitAddress returns the block name and index of a task address:
// "task.NAME" (index -1) or "task.NAME[INDEX]".
func SplitAddress(addr string) (string, int) {
	s := strings.TrimPrefix(addr, "task.")
	if open := strings.LastIndexByte(s, '['); open > 0 && strings.HasSuffix(s, "]") {
		if k, err := strconv.Atoi(s[open+1 : len(s)-1]); err == nil && k >= 0 {
			return s[:open], k
		}
	}
	return s, -1
}

// checkDoneLocked closes Done once no task of the apply is unfinished and
// no accepted result's recommendations wait to be judged; c.mu is held.
func (c *Coordinator) checkDoneLocked() {
	if c.unfinished == 0 && c.judging <= 0 && !c.doneClosed {
		c.doneClosed = true
		close(c.done)
	}
}

// DecideProposal approves or rejects proposal.id for an operator (req is
// checked already: who, and a reason for a rejection); an approved one
// joins this apply when it can, and the answer's note says whether it
// did. Errors (*Error): a proposal the state does not have
// (CodeNotFound); one decided already (CodeConflict); a decision the
// state refuses (CodeBadRequest); the state's.
func (c *Coordinator) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	p, err := c.store.DecideProposal(ctx, id, req.Approve, req.By, req.Reason, c.now())
	switch {
	case errors.Is(err, state.ErrNotFound):
		return protocol.ProposalDecisionResponse{}, refuse(CodeNotFound, "", "no proposal.%d in the state", id)
	case errors.Is(err, state.ErrConflict):
		return protocol.ProposalDecisionResponse{}, refuse(CodeConflict, "", "%s", err.Error())
	case errors.Is(err, state.ErrInvalid):
		return protocol.ProposalDecisionResponse{}, invalid("%v", err)
	case err != nil:
		return protocol.ProposalDecisionResponse{}, err
	}
	resp := protocol.ProposalDecisionResponse{ID: p.ID, Status: string(p.Status), DecidedBy: p.DecidedBy, Reason: p.Reason}
	if p.Status.Approved() {
		resp.Note = c.runProposal(ctx, p)
		resp.Queued = resp.Note == "it runs in this apply"
	}
	return resp, nil
}
