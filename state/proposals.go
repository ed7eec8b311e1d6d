package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Chaining by typed recommendations (migrations/005_proposals.sql). An
// attempt may end with recommendations; those of an accepted result are
// recorded with it (ResultInput.Recommendations). The coordinator judges
// each new one against the configuration's edges and either proposes a
// follow-up task (Propose) or rejects it (RejectRecommendation). A person
// decides a pending proposal (DecideProposal); an edge whose approval is
// earned approves by itself once its record holds enough consecutive
// approvals. The state records these decisions; it does not make them.

// maxStreakProposals is how many proposal ids an edge record keeps of its
// current streak (the newest).
const maxStreakProposals = 100

// RecommendationInput is one entry of an accepted attempt's
// recommendations, as the coordinator read it.
type RecommendationInput struct {
	// Type is the recommendation's type, e.g. "flake"; "" is allowed only
	// when Reason is set (an entry without a type is rejected at intake
	// with the reason "entry N has no type").
	Type string
	// Input is the recommendation's input, a JSON object; nil is stored as
	// "{}". An entry whose input is not a JSON object is rejected at intake
	// (its text is kept: as it is when it is JSON, else as a JSON string).
	Input []byte
	// Reason, when not "", says why the coordinator rejected the entry at
	// intake (e.g. "entry 3 is not a JSON object"): it is stored with
	// status rejected and an EventRecommendationRejected event.
	Reason string
}

// RecommendationStatus is the status of a recorded recommendation: new
// until the coordinator judged it, then proposed or rejected, for good.
type RecommendationStatus string

// Recommendation statuses.
const (
	RecommendationNew      RecommendationStatus = "new"      // not judged yet
	RecommendationProposed RecommendationStatus = "proposed" // an edge proposed a task for it (ProposalID)
	RecommendationRejected RecommendationStatus = "rejected" // at intake or by the coordinator (Reason)
)

// Recommendation is one recorded recommendation of an accepted attempt.
type Recommendation struct {
	Token      int64  // fencing token of the recommending attempt's lease
	Index      int    // position in the attempt's list, from 0
	Task       string // the recommending task's address
	Attempt    int    // the recommending attempt's number
	Type       string // "" only when rejected at intake
	Input      []byte // JSON text ("{}" when none was given)
	Status     RecommendationStatus
	Reason     string    // why it was rejected; "" unless Status is rejected
	ProposalID int64     // the proposal made for it; 0 unless Status is proposed
	ReceivedAt time.Time // when its result was accepted
	DecidedAt  time.Time // when it was proposed or rejected; zero while new
}

// name is how events and errors name the recommendation:
// "recommendation 2 of task.x attempt 3".
func (r Recommendation) name() string {
	return fmt.Sprintf("recommendation %d of %s attempt %d", r.Index, r.Task, r.Attempt)
}

// rejectedMessage is the message of r's EventRecommendationRejected event:
// `recommendation 2 of task.x attempt 3 (type "flake") rejected: <reason>`.
func rejectedMessage(r Recommendation) string {
	typ := "no type"
	if r.Type != "" {
		typ = fmt.Sprintf("type %q", r.Type)
	}
	return fmt.Sprintf("%s (%s) rejected: %s", r.name(), typ, r.Reason)
}

// intake returns what to store for entry i of a result's recommendations:
// its type, its input as JSON text, and the reason it is rejected at
// intake ("" when it is not).
func intake(i int, in RecommendationInput) (typ, input, reason string) {
	typ, reason = in.Type, in.Reason
	input = strings.TrimSpace(string(in.Input))
	switch {
	case input == "":
		input = "{}"
	case !json.Valid([]byte(input)):
		b, _ := json.Marshal(strings.ToValidUTF8(string(in.Input), "\uFFFD")) // a string always marshals
		input = string(b)
		if reason == "" {
			reason = fmt.Sprintf("entry %d: its input is not valid JSON", i)
		}
	}
	if reason == "" {
		switch {
		case typ == "":
			reason = fmt.Sprintf("entry %d has no type", i)
		case input[0] != '{':
			reason = fmt.Sprintf("entry %d: its input is not a JSON object", i)
		}
	}
	return typ, input, reason
}

// recordRecommendationsTx records the recommendations of the accepted
// result of lease l (posted by worker), each with status new or, when
// rejected at intake, rejected with its event.
func recordRecommendationsTx(ctx context.Context, tx *Tx, l Lease, worker string, recs []RecommendationInput, now time.Time) error {
	for i, in := range recs {
		typ, input, reason := intake(i, in)
		r := Recommendation{Token: l.Token, Index: i, Task: l.Task, Attempt: l.Attempt, Type: typ, Status: RecommendationNew, Reason: reason}
		var decided sql.NullInt64
		if reason != "" {
			r.Status = RecommendationRejected
			decided = nullMS(now)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO recommendations (fencing_token, idx, task, attempt, type, input, status, reason,
				received_at, decided_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.Token, i, l.Task, l.Attempt, typ, input, string(r.Status), reason,
			ms(now), decided); err != nil {
			return fmt.Errorf("record %s: %w", r.name(), err)
		}
		if reason != "" {
			if err := appendEvent(ctx, tx, Event{Kind: EventRecommendationRejected, Task: l.Task, WorkerID: worker, Token: l.Token,
				Message: rejectedMessage(r)}, now); err != nil {
				return err
			}
		}
	}
	return nil
}

const recommendationColumns = `fencing_token, idx, task, attempt, type, input, status, reason, proposal_id, received_at, decided_at`

func scanRecommendation(row interface{ Scan(...any) error }) (Recommendation, error) {
	var r Recommendation
	var input, status string
	var proposal, decided sql.NullInt64
	var received int64
	if err := row.Scan(&r.Token, &r.Index, &r.Task, &r.Attempt, &r.Type, &input, &status, &r.Reason, &proposal, &received, &decided); err != nil {
		return r, err
	}
	r.Input = []byte(input)
	r.Status = RecommendationStatus(status)
	r.ProposalID = proposal.Int64
	r.ReceivedAt = fromMS(received)
	r.DecidedAt = fromNullMS(decided)
	return r, nil
}

func queryRecommendations(ctx context.Context, tx *Tx, where string, args ...any) ([]Recommendation, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+recommendationColumns+` FROM recommendations `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read recommendations: %w", err)
	}
	defer rows.Close()
	out := []Recommendation{}
	for rows.Next() {
		r, err := scanRecommendation(rows)
		if err != nil {
			return nil, fmt.Errorf("read recommendations: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// recommendationTx reads the recommendation (token, idx); sql.ErrNoRows
// when there is none.
func recommendationTx(ctx context.Context, tx *Tx, token int64, idx int) (Recommendation, error) {
	return scanRecommendation(tx.QueryRowContext(ctx, `SELECT `+recommendationColumns+` FROM recommendations
		WHERE fencing_token = ? AND idx = ?`, token, idx))
}

// NewRecommendations returns up to limit recommendations with status new
// (limit <= 0: all of them), by (token, index): those the coordinator has
// still to judge. The list is non-nil.
func (s *Store) NewRecommendations(ctx context.Context, limit int) (out []Recommendation, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		out, err = tx.NewRecommendations(limit)
		return err
	})
	return out, err
}

// NewRecommendations is Store.NewRecommendations inside t.
func (t *Tx) NewRecommendations(limit int) ([]Recommendation, error) {
	q, args := `WHERE status = 'new' ORDER BY fencing_token, idx`, []any{}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	return queryRecommendations(t.ctx, t, q, args...)
}

// NewRecommendationCount returns how many recommendations have status new:
// what NewRecommendations(ctx, 0) would list, without reading them.
func (s *Store) NewRecommendationCount(ctx context.Context) (int, error) {
	var n int
	err := s.read(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM recommendations WHERE status = 'new'`).Scan(&n)
	})
	return n, err
}

// Recommendations returns every recorded recommendation of the task (task
// "" = of every task), by (token, index). The list is non-nil.
func (s *Store) Recommendations(ctx context.Context, task string) ([]Recommendation, error) {
	var out []Recommendation
	err := s.read(ctx, func(tx *Tx) error {
		q, args := `ORDER BY fencing_token, idx`, []any{}
		if task != "" {
			q, args = `WHERE task = ? `+q, append(args, task)
		}
		var err error
		out, err = queryRecommendations(ctx, tx, q, args...)
		return err
	})
	return out, err
}

// RejectRecommendation rejects the new recommendation (token, idx) with
// reason (no edge takes it, its input does not fit the edge, …) and
// appends an EventRecommendationRejected event naming the recommending
// task and token, with the message
// `recommendation 2 of task.x attempt 3 (type "flake") rejected: <reason>`.
//
// Errors: ErrInvalid for an empty reason; ErrNotFound when there is no
// such recommendation; ErrConflict (wrapped, saying its status) when it is
// not new. On error nothing changes.
func (s *Store) RejectRecommendation(ctx context.Context, token int64, idx int, reason string, now time.Time) error {
	return s.write(ctx, func(tx *Tx) error { return tx.RejectRecommendation(token, idx, reason, now) })
}

// RejectRecommendation is Store.RejectRecommendation inside t.
func (t *Tx) RejectRecommendation(token int64, idx int, reason string, now time.Time) error {
	if strings.TrimSpace(reason) == "" {
		return invalidf("reject recommendation %d of lease %d: the reason is empty", idx, token)
	}
	r, err := recommendationTx(t.ctx, t, token, idx)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reject recommendation %d of lease %d: %w", idx, token, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("reject recommendation %d of lease %d: %w", idx, token, err)
	}
	if r.Status != RecommendationNew {
		return fmt.Errorf("reject %s: %w: %s", r.name(), ErrConflict, decidedWhy(r))
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE recommendations SET status = 'rejected', reason = ?, decided_at = ?
		WHERE fencing_token = ? AND idx = ? AND status = 'new'`, reason, ms(now), token, idx); err != nil {
		return fmt.Errorf("reject %s: %w", r.name(), err)
	}
	r.Reason = reason
	return appendEvent(t.ctx, t, Event{Kind: EventRecommendationRejected, Task: r.Task, Token: r.Token,
		Message: rejectedMessage(r)}, now)
}

// decidedWhy says how a recommendation that is not new was decided: "it
// is already proposed (proposal.7)", "it is already rejected: …".
func decidedWhy(r Recommendation) string {
	if r.Status == RecommendationProposed {
		return fmt.Sprintf("it is already proposed (%s)", proposalAddress(r.ProposalID))
	}
	return fmt.Sprintf("it is already %s: %s", r.Status, r.Reason)
}

// ProposalStatus is the status of a proposal: pending until it is
// decided, then approved, rejected or auto_approved, for good.
type ProposalStatus string

// Proposal statuses.
const (
	ProposalPending      ProposalStatus = "pending"       // waiting for a person's decision
	ProposalApproved     ProposalStatus = "approved"      // a person approved it
	ProposalRejected     ProposalStatus = "rejected"      // a person rejected it (Reason)
	ProposalAutoApproved ProposalStatus = "auto_approved" // its edge's record approved it (Earned)
)

// Approved reports whether the status is approved or auto_approved: the
// proposed task may run.
func (s ProposalStatus) Approved() bool { return s == ProposalApproved || s == ProposalAutoApproved }

// word is the status as prose: "auto-approved" for auto_approved.
func (s ProposalStatus) word() string { return strings.ReplaceAll(string(s), "_", "-") }

// Proposal is a follow-up task an edge proposed for one recommendation.
type Proposal struct {
	ID       int64  // assigned by the state, increasing; never reused
	Edge     string // the edge's name (its address is "edge." + Edge)
	EdgeHash string // the edge's definition hash when it proposed
	Propose  string // the proposed task's address, e.g. "task.ci_rerun"
	Type     string // the recommendation's type

	// The recommendation it answers: its attempt, lease and position.
	SourceTask    string
	SourceAttempt int
	SourceToken   int64
	SourceIndex   int

	Input    []byte // JSON text: the input the edge passes on
	DefHash  string // definition hash of the proposed task
	Spec     []byte // JSON text: the proposed task's canonical definition (opaque here)
	Settings []byte // JSON text: its scheduling settings (opaque here)

	Status    ProposalStatus
	DecidedBy string // who decided it: a person, or "edge.NAME" when auto_approved; "" while pending
	Reason    string // the decision's reason; always set when rejected
	// Earned is, for an auto_approved proposal, the record that earned it,
	// e.g. "5 consecutive approvals: proposal.2, proposal.3, proposal.4,
	// proposal.5, proposal.6"; "" otherwise.
	Earned    string
	CreatedAt time.Time
	DecidedAt time.Time // zero while pending
}

// Address returns the proposal's address, "proposal.7".
func (p Proposal) Address() string { return proposalAddress(p.ID) }

func proposalAddress(id int64) string { return fmt.Sprintf("proposal.%d", id) }

// ProposeInput is what Propose records: the recommendation, the edge that
// takes it and the task it proposes.
type ProposeInput struct {
	// Token and Index name the recommendation being proposed; it must
	// exist.
	Token int64
	Index int
	// Edge is the edge's name (not its address: no "."); EdgeHash the
	// edge's definition hash. Propose is the proposed task's address.
	Edge, EdgeHash, Propose string
	// Input, Spec and Settings are JSON texts (nil is stored as "{}");
	// DefHash is the proposed task's definition hash, non-empty.
	Input    []byte
	DefHash  string
	Spec     []byte
	Settings []byte
	// EarnAfter > 0: the edge's approval is "earned": when its record's
	// streak (under EdgeHash) is at least EarnAfter, the proposal is
	// auto_approved (decided_by "edge.NAME", Earned set, the record's
	// auto_approvals + 1; its streak unchanged). 0: approval "always", the
	// proposal is always pending.
	EarnAfter int
}

// Propose records in one write that an edge proposes a follow-up task for
// a new recommendation: the recommendation becomes proposed, the proposal
// is inserted pending (or auto_approved, see ProposeInput.EarnAfter), and
// an EventProposed event is appended (Task "proposal.N", Token the
// recommendation's), with EventProposalAutoApproved when the edge approved
// it by itself. The edge's record is created when absent; one whose
// edge_hash differs from EdgeHash starts again (streak 0, no streak
// proposals, totals kept, the hash updated) before the rule is applied.
//
// It is idempotent, so the coordinator may retry after a crash: when the
// recommendation is already proposed, Propose returns that proposal with
// created false and changes nothing.
//
// Errors: ErrInvalid for an empty Edge, Propose or DefHash, an Edge with a
// ".", a negative EarnAfter or JSON that is not valid; ErrNotFound when
// there is no such recommendation; ErrConflict (wrapped, with its reason)
// when it was rejected. On error nothing changes.
func (s *Store) Propose(ctx context.Context, in ProposeInput, now time.Time) (p Proposal, created bool, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		p, created, err = tx.Propose(in, now)
		return err
	})
	if err != nil {
		return Proposal{}, false, err
	}
	return p, created, nil
}

// Propose is Store.Propose inside t.
func (t *Tx) Propose(in ProposeInput, now time.Time) (Proposal, bool, error) {
	switch {
	case in.Edge == "":
		return Proposal{}, false, invalidf("propose for recommendation %d of lease %d: the edge is empty", in.Index, in.Token)
	case strings.Contains(in.Edge, "."):
		return Proposal{}, false, invalidf("propose for recommendation %d of lease %d: give the edge's name, not %q", in.Index, in.Token, in.Edge)
	case in.Propose == "":
		return Proposal{}, false, invalidf("propose for recommendation %d of lease %d: the proposed task is empty", in.Index, in.Token)
	case in.DefHash == "":
		return Proposal{}, false, invalidf("propose %s: the definition hash is empty", in.Propose)
	case in.EarnAfter < 0:
		return Proposal{}, false, invalidf("propose %s: earn_after must not be negative, have %d", in.Propose, in.EarnAfter)
	}
	input, err := jsonArg(in.Propose, "input", in.Input)
	if err != nil {
		return Proposal{}, false, err
	}
	spec, err := jsonArg(in.Propose, "spec", in.Spec)
	if err != nil {
		return Proposal{}, false, err
	}
	settings, err := jsonArg(in.Propose, "settings", in.Settings)
	if err != nil {
		return Proposal{}, false, err
	}
	r, err := recommendationTx(t.ctx, t, in.Token, in.Index)
	if errors.Is(err, sql.ErrNoRows) {
		return Proposal{}, false, fmt.Errorf("propose %s: recommendation %d of lease %d: %w", in.Propose, in.Index, in.Token, ErrNotFound)
	}
	if err != nil {
		return Proposal{}, false, fmt.Errorf("propose %s: recommendation %d of lease %d: %w", in.Propose, in.Index, in.Token, err)
	}
	switch r.Status {
	case RecommendationProposed:
		p, err := proposalTx(t.ctx, t, r.ProposalID)
		return p, false, err
	case RecommendationRejected:
		return Proposal{}, false, fmt.Errorf("propose %s for %s: %w: %s", in.Propose, r.name(), ErrConflict, decidedWhy(r))
	}
	rec, found, err := edgeRecordTx(t.ctx, t, in.Edge)
	if err != nil {
		return Proposal{}, false, err
	}
	changed := !found || rec.EdgeHash != in.EdgeHash
	if changed {
		rec.Edge, rec.EdgeHash, rec.Streak, rec.StreakProposals = in.Edge, in.EdgeHash, 0, []int64{}
	}
	status, by, earned := ProposalPending, "", ""
	var decided sql.NullInt64
	if in.EarnAfter > 0 && rec.Streak >= in.EarnAfter {
		status, by, earned, decided = ProposalAutoApproved, "edge."+in.Edge, earnedText(rec), nullMS(now)
		rec.AutoApprovals++
		changed = true
	}
	var id int64
	if err := t.QueryRowContext(t.ctx, `INSERT INTO proposals (edge, edge_hash, propose, type, source_task, source_attempt,
			source_token, source_index, input, def_hash, spec, settings, status, decided_by, earned, created_at, decided_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		in.Edge, in.EdgeHash, in.Propose, r.Type, r.Task, r.Attempt, r.Token, r.Index, input, in.DefHash, spec, settings,
		string(status), by, earned, ms(now), decided).Scan(&id); err != nil {
		return Proposal{}, false, fmt.Errorf("propose %s for %s: %w", in.Propose, r.name(), err)
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE recommendations SET status = 'proposed', proposal_id = ?, decided_at = ?
		WHERE fencing_token = ? AND idx = ? AND status = 'new'`, id, ms(now), r.Token, r.Index); err != nil {
		return Proposal{}, false, fmt.Errorf("propose %s for %s: %w", in.Propose, r.name(), err)
	}
	if changed {
		if err := putEdgeRecordTx(t.ctx, t, rec, now); err != nil {
			return Proposal{}, false, err
		}
	}
	addr := proposalAddress(id)
	msg := fmt.Sprintf("%s: %s proposed by %s attempt %d via edge.%s", addr, in.Propose, r.Task, r.Attempt, in.Edge)
	if status == ProposalPending {
		msg += ", waiting for approval"
	} else {
		msg += ", approved by the edge's record"
	}
	if err := appendEvent(t.ctx, t, Event{Kind: EventProposed, Task: addr, Token: r.Token, Message: msg}, now); err != nil {
		return Proposal{}, false, err
	}
	if status == ProposalAutoApproved {
		if err := appendEvent(t.ctx, t, Event{Kind: EventProposalAutoApproved, Task: addr, Token: r.Token,
			Message: fmt.Sprintf("%s (%s) approved by %s: %s", addr, in.Propose, by, earned)}, now); err != nil {
			return Proposal{}, false, err
		}
	}
	p, err := proposalTx(t.ctx, t, id)
	if err != nil {
		return Proposal{}, false, err
	}
	return p, true, nil
}

// earnedText names the record that earns an auto approval: "2 consecutive
// approvals: proposal.2, proposal.3" (with "the last 100" when the streak
// is longer than the ids kept).
func earnedText(r EdgeRecord) string {
	names := make([]string, len(r.StreakProposals))
	for i, id := range r.StreakProposals {
		names[i] = proposalAddress(id)
	}
	head := fmt.Sprintf("%d consecutive approvals", r.Streak)
	switch {
	case r.Streak == 1:
		head = "1 consecutive approval"
	case r.Streak > len(names):
		head += fmt.Sprintf(", the last %d", len(names))
	}
	return head + ": " + strings.Join(names, ", ")
}

// jsonArg returns b as JSON text for a column ("{}" for nil), or
// ErrInvalid when it is not valid JSON.
func jsonArg(task, what string, b []byte) (string, error) {
	if len(b) == 0 {
		return "{}", nil
	}
	if !json.Valid(b) {
		return "", invalidf("propose %s: its %s is not valid JSON", task, what)
	}
	return string(b), nil
}

// DecideProposal decides the pending proposal id: approved (approve
// true) or rejected, by by (a person's name; recorded as decided_by) with
// reason, which a rejection requires. The edge's record (created when
// absent, with the proposal's edge hash) counts it: an approval adds to
// approvals and, when the record's edge hash is still the proposal's,
// extends the streak by the proposal (an approval of a proposal made under
// another edge hash extends no streak); a rejection adds to rejections and
// resets the streak to 0. An EventProposalApproved or
// EventProposalRejected event (Task "proposal.N") is appended. It returns
// the decided proposal.
//
// Errors: ErrInvalid for a rejection without a reason; ErrNotFound when
// there is no proposal id; ErrConflict (wrapped: "proposal.7 is already
// approved") when it is not pending; a *LockedError, on a store that does
// not guard its writes with the apply lock, when an apply holds it (the
// decision then goes through that apply's coordinator). On error nothing
// changes.
func (s *Store) DecideProposal(ctx context.Context, id int64, approve bool, by, reason string, now time.Time) (Proposal, error) {
	// (checked before the lock is: a decision that cannot be made says so
	// whether or not an apply runs)
	if err := checkDecision(id, approve, reason); err != nil {
		return Proposal{}, err
	}
	var p Proposal
	err := s.writeOutsideApply(ctx, func(tx *Tx) error {
		var err error
		p, err = tx.decideProposal(id, approve, by, reason, now)
		return err
	})
	if err != nil {
		return Proposal{}, err
	}
	return p, nil
}

// checkDecision returns the ErrInvalid error of a decision DecideProposal
// refuses before it reads anything: a rejection without a reason.
func checkDecision(id int64, approve bool, reason string) error {
	if !approve && strings.TrimSpace(reason) == "" {
		return invalidf("reject %s: give a reason", proposalAddress(id))
	}
	return nil
}

// decideProposal is DecideProposal's write inside t. It is not exported:
// outside an apply, the decision is written only where no apply holds the
// lock (Store.writeOutsideApply checks it).
func (t *Tx) decideProposal(id int64, approve bool, by, reason string, now time.Time) (Proposal, error) {
	if err := checkDecision(id, approve, reason); err != nil {
		return Proposal{}, err
	}
	status := ProposalApproved
	if !approve {
		status = ProposalRejected
	}
	p, err := proposalTx(t.ctx, t, id)
	if err != nil {
		return Proposal{}, err
	}
	if p.Status != ProposalPending {
		return Proposal{}, fmt.Errorf("decide %s: %w: %s is already %s", p.Address(), ErrConflict, p.Address(), p.Status.word())
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE proposals SET status = ?, decided_by = ?, reason = ?, decided_at = ?
		WHERE id = ? AND status = 'pending'`, string(status), by, reason, ms(now), id); err != nil {
		return Proposal{}, fmt.Errorf("decide %s: %w", p.Address(), err)
	}
	rec, found, err := edgeRecordTx(t.ctx, t, p.Edge)
	if err != nil {
		return Proposal{}, err
	}
	if !found {
		rec = EdgeRecord{Edge: p.Edge, EdgeHash: p.EdgeHash, StreakProposals: []int64{}}
	}
	kind := EventProposalApproved
	if approve {
		rec.Approvals++
		if rec.EdgeHash == p.EdgeHash {
			rec.Streak++
			rec.StreakProposals = append(rec.StreakProposals, p.ID)
			if n := len(rec.StreakProposals); n > maxStreakProposals {
				rec.StreakProposals = rec.StreakProposals[n-maxStreakProposals:]
			}
		}
	} else {
		kind = EventProposalRejected
		rec.Rejections++
		rec.Streak, rec.StreakProposals = 0, []int64{}
	}
	if err := putEdgeRecordTx(t.ctx, t, rec, now); err != nil {
		return Proposal{}, err
	}
	msg := fmt.Sprintf("%s (%s via edge.%s) %s", p.Address(), p.Propose, p.Edge, status.word())
	if by != "" {
		msg += " by " + by
	}
	if reason != "" {
		msg += ": " + reason
	}
	if err := appendEvent(t.ctx, t, Event{Kind: kind, Task: p.Address(), Token: p.SourceToken, Message: msg}, now); err != nil {
		return Proposal{}, err
	}
	return proposalTx(t.ctx, t, id)
}

const proposalColumns = `id, edge, edge_hash, propose, type, source_task, source_attempt, source_token, source_index,
	input, def_hash, spec, settings, status, decided_by, reason, earned, created_at, decided_at`

func scanProposal(row interface{ Scan(...any) error }) (Proposal, error) {
	var p Proposal
	var input, spec, settings, status string
	var created int64
	var decided sql.NullInt64
	if err := row.Scan(&p.ID, &p.Edge, &p.EdgeHash, &p.Propose, &p.Type, &p.SourceTask, &p.SourceAttempt, &p.SourceToken, &p.SourceIndex,
		&input, &p.DefHash, &spec, &settings, &status, &p.DecidedBy, &p.Reason, &p.Earned, &created, &decided); err != nil {
		return p, err
	}
	p.Input, p.Spec, p.Settings = []byte(input), []byte(spec), []byte(settings)
	p.Status = ProposalStatus(status)
	p.CreatedAt = fromMS(created)
	p.DecidedAt = fromNullMS(decided)
	return p, nil
}

// proposalTx reads proposal id; ErrNotFound (wrapped) when there is none.
func proposalTx(ctx context.Context, tx *Tx, id int64) (Proposal, error) {
	p, err := scanProposal(tx.QueryRowContext(ctx, `SELECT `+proposalColumns+` FROM proposals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Proposal{}, fmt.Errorf("%s: %w", proposalAddress(id), ErrNotFound)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("read %s: %w", proposalAddress(id), err)
	}
	return p, nil
}

func queryProposals(ctx context.Context, tx *Tx) ([]Proposal, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+proposalColumns+` FROM proposals ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read proposals: %w", err)
	}
	defer rows.Close()
	out := []Proposal{}
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, fmt.Errorf("read proposals: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Proposal returns proposal id. Errors: ErrNotFound when there is none.
func (s *Store) Proposal(ctx context.Context, id int64) (p Proposal, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		p, err = tx.Proposal(id)
		return err
	})
	return p, err
}

// Proposal is Store.Proposal inside t.
func (t *Tx) Proposal(id int64) (Proposal, error) {
	return proposalTx(t.ctx, t, id)
}

// Proposals returns every proposal, by id. The list is non-nil.
func (s *Store) Proposals(ctx context.Context) ([]Proposal, error) {
	var out []Proposal
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		out, err = queryProposals(ctx, tx)
		return err
	})
	return out, err
}

// EdgeRecord is how an edge's proposals were decided so far: what an
// earned approval is counted from.
type EdgeRecord struct {
	Edge     string // the edge's name
	EdgeHash string // the edge definition hash the streak counts under
	// Approvals, Rejections and AutoApprovals count the edge's decided
	// proposals, under any edge hash.
	Approvals, Rejections, AutoApprovals int
	// Streak is the number of consecutive approvals by a person under
	// EdgeHash since the last rejection (auto approvals do not extend it);
	// StreakProposals the ids of its proposals, newest last, at most the
	// last 100. Non-nil.
	Streak          int
	StreakProposals []int64
	UpdatedAt       time.Time
}

const edgeRecordColumns = `edge, edge_hash, approvals, rejections, auto_approvals, streak, streak_proposals, updated_at`

func scanEdgeRecord(row interface{ Scan(...any) error }) (EdgeRecord, error) {
	var r EdgeRecord
	var list string
	var updated int64
	if err := row.Scan(&r.Edge, &r.EdgeHash, &r.Approvals, &r.Rejections, &r.AutoApprovals, &r.Streak, &list, &updated); err != nil {
		return r, err
	}
	r.StreakProposals = []int64{}
	if err := json.Unmarshal([]byte(list), &r.StreakProposals); err != nil {
		return r, fmt.Errorf("edge %s: streak_proposals: %w", r.Edge, err)
	}
	r.UpdatedAt = fromMS(updated)
	return r, nil
}

// edgeRecordTx reads the record of edge; found is false when it has none.
func edgeRecordTx(ctx context.Context, tx *Tx, edge string) (r EdgeRecord, found bool, err error) {
	r, err = scanEdgeRecord(tx.QueryRowContext(ctx, `SELECT `+edgeRecordColumns+` FROM edge_records WHERE edge = ?`, edge))
	if errors.Is(err, sql.ErrNoRows) {
		return EdgeRecord{}, false, nil
	}
	if err != nil {
		return EdgeRecord{}, false, fmt.Errorf("read the record of edge.%s: %w", edge, err)
	}
	return r, true, nil
}

// putEdgeRecordTx writes r (inserting or replacing the edge's row) with
// updated_at now.
func putEdgeRecordTx(ctx context.Context, tx *Tx, r EdgeRecord, now time.Time) error {
	ids := r.StreakProposals
	if ids == nil {
		ids = []int64{}
	}
	list, _ := json.Marshal(ids) // []int64 always marshals
	_, err := tx.ExecContext(ctx, `INSERT INTO edge_records (`+edgeRecordColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (edge) DO UPDATE SET edge_hash = excluded.edge_hash, approvals = excluded.approvals,
			rejections = excluded.rejections, auto_approvals = excluded.auto_approvals, streak = excluded.streak,
			streak_proposals = excluded.streak_proposals, updated_at = excluded.updated_at`,
		r.Edge, r.EdgeHash, r.Approvals, r.Rejections, r.AutoApprovals, r.Streak, string(list), ms(now))
	if err != nil {
		return fmt.Errorf("write the record of edge.%s: %w", r.Edge, err)
	}
	return nil
}

func queryEdgeRecords(ctx context.Context, tx *Tx) ([]EdgeRecord, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+edgeRecordColumns+` FROM edge_records ORDER BY edge`)
	if err != nil {
		return nil, fmt.Errorf("read edge records: %w", err)
	}
	defer rows.Close()
	out := []EdgeRecord{}
	for rows.Next() {
		r, err := scanEdgeRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("read edge records: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// EdgeRecords returns the record of every edge that proposed or had a
// proposal decided, by edge name. The list is non-nil.
func (s *Store) EdgeRecords(ctx context.Context) ([]EdgeRecord, error) {
	var out []EdgeRecord
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		out, err = queryEdgeRecords(ctx, tx)
		return err
	})
	return out, err
}
