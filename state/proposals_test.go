package state

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recs makes n valid recommendations of type typ, with inputs {"n": i}.
func recs(typ string, n int) []RecommendationInput {
	out := make([]RecommendationInput, n)
	for i := range out {
		out[i] = RecommendationInput{Type: typ, Input: []byte(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return out
}

// acceptWith claims task.a for w1 at t0 and posts a successful result
// carrying rs; it returns the lease.
func acceptWith(t *testing.T, s *Store, rs []RecommendationInput) Lease {
	t.Helper()
	l := claim(t, s, "task.a", "w1", t0)
	dec, err := s.AcceptResult(context.Background(), ResultInput{Key: "k-accept", Token: l.Token, Task: l.Task, Attempt: l.Attempt,
		WorkerID: "w1", Recommendations: rs}, nil, t0.Add(time.Second))
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("AcceptResult = %+v, %v", dec, err)
	}
	return l
}

func recommendationsOf(t *testing.T, s *Store) []Recommendation {
	t.Helper()
	rs, err := s.Recommendations(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func eventsOfKind(t *testing.T, s *Store, kind string) []Event {
	t.Helper()
	es, err := s.Events(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []Event
	for _, e := range es {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestRecommendationsOnlyFromAcceptedResult: a result's recommendations
// are recorded when the result is accepted, never when it is rejected
// (stale token, expired lease, wrong worker) and never by a replay.
func TestRecommendationsOnlyFromAcceptedResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		// post returns the result to post (the one carrying the
		// recommendations) and when.
		post     func(t *testing.T, s *Store) (ResultInput, time.Time)
		decision string
	}{
		{"accepted", func(t *testing.T, s *Store) (ResultInput, time.Time) {
			l := claim(t, s, "task.a", "w1", t0)
			return ResultInput{Key: "k", Token: l.Token, WorkerID: "w1"}, t0.Add(time.Second)
		}, DecisionAccepted},
		{"accepted failure", func(t *testing.T, s *Store) (ResultInput, time.Time) {
			l := claim(t, s, "task.a", "w1", t0)
			return ResultInput{Key: "k", Token: l.Token, WorkerID: "w1", Class: FailureClassFailure, Error: "exit status 1"}, t0.Add(time.Second)
		}, DecisionAccepted},
		{"stale token", func(t *testing.T, s *Store) (ResultInput, time.Time) {
			old := claim(t, s, "task.a", "w1", t0)
			if _, err := s.Sweep(ctx, t0.Add(11*time.Second), nil); err != nil {
				t.Fatal(err)
			}
			if err := s.SetWorkerStatus(ctx, "w1", WorkerActive, t0.Add(11*time.Second)); err != nil {
				t.Fatal(err)
			}
			claim(t, s, "task.a", "w1", t0.Add(11*time.Second))
			return ResultInput{Key: "k", Token: old.Token, WorkerID: "w1"}, t0.Add(12 * time.Second)
		}, DecisionRejected},
		{"expired lease", func(t *testing.T, s *Store) (ResultInput, time.Time) {
			l := claim(t, s, "task.a", "w1", t0)
			return ResultInput{Key: "k", Token: l.Token, WorkerID: "w1"}, l.ExpiresAt
		}, DecisionRejected},
		{"wrong worker", func(t *testing.T, s *Store) (ResultInput, time.Time) {
			if _, err := s.RegisterWorker(ctx, Worker{ID: "w2", Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: 10 * time.Second}, t0); err != nil {
				t.Fatal(err)
			}
			l := claim(t, s, "task.a", "w1", t0)
			return ResultInput{Key: "k", Token: l.Token, WorkerID: "w2"}, t0.Add(time.Second)
		}, DecisionRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s)
			in, now := tt.post(t, s)
			in.Recommendations = recs("flake", 2)
			dec, err := s.AcceptResult(ctx, in, nil, now)
			if err != nil || dec.Decision != tt.decision {
				t.Fatalf("AcceptResult = %+v, %v; want %s", dec, err, tt.decision)
			}
			got := recommendationsOf(t, s)
			if tt.decision == DecisionRejected {
				if len(got) != 0 {
					t.Fatalf("a rejected result recorded recommendations: %+v", got)
				}
				return
			}
			if len(got) != 2 {
				t.Fatalf("recommendations = %+v; want 2", got)
			}
			for i, r := range got {
				want := Recommendation{Token: in.Token, Index: i, Task: "task.a", Attempt: 1, Type: "flake",
					Input: []byte(fmt.Sprintf(`{"n": %d}`, i)), Status: RecommendationNew, ReceivedAt: now}
				if d := cmpDiff(want, r); d != "" {
					t.Errorf("recommendation %d (-want +got):\n%s", i, d)
				}
			}
			// A replay of the accepted result with other recommendations
			// changes nothing.
			before := serial(t, s)
			in.Recommendations = recs("other", 5)
			dec, err = s.AcceptResult(ctx, in, nil, now.Add(time.Second))
			if err != nil || !dec.Duplicate {
				t.Fatalf("replay = %+v, %v", dec, err)
			}
			if again := recommendationsOf(t, s); cmpDiff(got, again) != "" || serial(t, s) != before {
				t.Errorf("a replay changed the recommendations: %+v", again)
			}
			news, err := s.NewRecommendations(ctx, 1)
			if err != nil || len(news) != 1 || news[0].Index != 0 {
				t.Errorf("NewRecommendations(1) = %+v, %v", news, err)
			}
			all, _ := s.NewRecommendations(ctx, 0)
			if n, err := s.NewRecommendationCount(ctx); err != nil || n != len(all) {
				t.Errorf("NewRecommendationCount = %d, %v; want %d, as NewRecommendations lists", n, err, len(all))
			}
		})
	}
}

// TestRecommendationIntake: entries the coordinator rejected at intake, and
// entries without a type or whose input is not a JSON object, are stored
// rejected with their reason and an event; the others are new.
func TestRecommendationIntake(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, []RecommendationInput{
		{Type: "flake", Input: []byte(`{"job": "ci"}`)},
		{Type: "flake"}, // no input: {}
		{Input: []byte(`"x"`), Reason: "entry 2 is not a JSON object"},
		{Input: []byte(`{}`)},
		{Type: "flake", Input: []byte(`[1, 2]`)},
		{Type: "flake", Input: []byte(`{"unclosed": `)},
	})
	tests := []struct {
		typ, input string
		status     RecommendationStatus
		reason     string
	}{
		{"flake", `{"job": "ci"}`, RecommendationNew, ""},
		{"flake", `{}`, RecommendationNew, ""},
		{"", `"x"`, RecommendationRejected, "entry 2 is not a JSON object"},
		{"", `{}`, RecommendationRejected, "entry 3 has no type"},
		{"flake", `[1, 2]`, RecommendationRejected, "entry 4: its input is not a JSON object"},
		{"flake", `"{\"unclosed\": "`, RecommendationRejected, "entry 5: its input is not valid JSON"},
	}
	got := recommendationsOf(t, s)
	if len(got) != len(tests) {
		t.Fatalf("recommendations = %+v", got)
	}
	for i, tt := range tests {
		r := got[i]
		if r.Index != i || r.Type != tt.typ || string(r.Input) != tt.input || r.Status != tt.status || r.Reason != tt.reason ||
			r.DecidedAt.IsZero() != (tt.status == RecommendationNew) {
			t.Errorf("recommendation %d = %+v; want %+v", i, r, tt)
		}
	}
	es := eventsOfKind(t, s, EventRecommendationRejected)
	if len(es) != 4 {
		t.Fatalf("rejection events: %+v", es)
	}
	if e := es[0]; e.Task != "task.a" || e.Token != l.Token || e.WorkerID != "w1" ||
		e.Message != "recommendation 2 of task.a attempt 1 (no type) rejected: entry 2 is not a JSON object" {
		t.Errorf("event %+v", e)
	}
	if e := es[2]; e.Message != `recommendation 4 of task.a attempt 1 (type "flake") rejected: entry 4: its input is not a JSON object` {
		t.Errorf("event %+v", e)
	}
}

func TestRejectRecommendation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, recs("flake", 3))
	now := t0.Add(time.Minute)
	if err := s.RejectRecommendation(ctx, l.Token, 1, "no edge takes type \"flake\"", now); err != nil {
		t.Fatal(err)
	}
	r := recommendationsOf(t, s)[1]
	if r.Status != RecommendationRejected || r.Reason != `no edge takes type "flake"` || !r.DecidedAt.Equal(now) || r.ProposalID != 0 {
		t.Errorf("rejected: %+v", r)
	}
	es := eventsOfKind(t, s, EventRecommendationRejected)
	if len(es) != 1 || es[0].Task != "task.a" || es[0].Token != l.Token ||
		es[0].Message != `recommendation 1 of task.a attempt 1 (type "flake") rejected: no edge takes type "flake"` {
		t.Errorf("events %+v", es)
	}
	if _, _, err := s.Propose(ctx, ProposeInput{Token: l.Token, Index: 2, Edge: "e", Propose: "task.b", DefHash: "d"}, now); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		idx    int
		token  int64
		reason string
		want   error
		msg    string
	}{
		{"twice", 1, l.Token, "again", ErrConflict, "already rejected"},
		{"proposed", 2, l.Token, "late", ErrConflict, "already proposed (proposal.1)"},
		{"missing index", 9, l.Token, "x", ErrNotFound, ""},
		{"missing token", 0, 99, "x", ErrNotFound, ""},
		{"empty reason", 0, l.Token, " ", ErrInvalid, ""},
	}
	for _, tt := range tests {
		before := serial(t, s)
		err := s.RejectRecommendation(ctx, tt.token, tt.idx, tt.reason, now)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v; want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
		if serial(t, s) != before {
			t.Errorf("%s: the serial moved", tt.name)
		}
	}
	if r := recommendationsOf(t, s)[0]; r.Status != RecommendationNew {
		t.Errorf("recommendation 0 is %s", r.Status)
	}
}

// TestProposeEarnedApproval walks edges through the earning rule: with
// earn_after 2, two approvals in a row make the next proposal
// auto_approved; auto approvals do not extend the streak; a rejection
// resets it; a changed edge hash starts it again.
func TestProposeEarnedApproval(t *testing.T) {
	t.Parallel()
	type step struct {
		op     string // "propose" (then want is the proposal's status), "approve", "reject" (the proposal made id-th)
		id     int64  // the proposal to decide
		edge   string
		hash   string
		earn   int
		want   ProposalStatus
		earned string // want Earned
	}
	tests := []struct {
		name  string
		steps []step
		want  []EdgeRecord // at the end, without UpdatedAt
	}{
		{"earned after two approvals", []step{
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "approve", id: 1},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "approve", id: 2},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalAutoApproved, earned: "2 consecutive approvals: proposal.1, proposal.2"},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalAutoApproved, earned: "2 consecutive approvals: proposal.1, proposal.2"},
			{op: "propose", edge: "flake", hash: "h1", earn: 0, want: ProposalPending}, // approval "always"
		}, []EdgeRecord{{Edge: "flake", EdgeHash: "h1", Approvals: 2, AutoApprovals: 2, Streak: 2, StreakProposals: []int64{1, 2}}}},
		{"a rejection resets the streak", []step{
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "approve", id: 1},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "reject", id: 2},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "approve", id: 3},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalPending},
			{op: "approve", id: 4},
			{op: "propose", edge: "flake", hash: "h1", earn: 2, want: ProposalAutoApproved, earned: "2 consecutive approvals: proposal.3, proposal.4"},
		}, []EdgeRecord{{Edge: "flake", EdgeHash: "h1", Approvals: 3, Rejections: 1, AutoApprovals: 1, Streak: 2, StreakProposals: []int64{3, 4}}}},
		{"a changed edge hash starts again", []step{
			{op: "propose", edge: "flake", hash: "h1", earn: 1, want: ProposalPending},
			{op: "propose", edge: "flake", hash: "h1", earn: 1, want: ProposalPending},
			{op: "approve", id: 1},
			{op: "propose", edge: "flake", hash: "h1", earn: 1, want: ProposalAutoApproved, earned: "1 consecutive approval: proposal.1"},
			{op: "propose", edge: "flake", hash: "h2", earn: 1, want: ProposalPending},
			{op: "approve", id: 2}, // made under h1: counted, but no streak under h2
			{op: "propose", edge: "flake", hash: "h2", earn: 1, want: ProposalPending},
			{op: "approve", id: 4},
			{op: "propose", edge: "flake", hash: "h2", earn: 1, want: ProposalAutoApproved, earned: "1 consecutive approval: proposal.4"},
		}, []EdgeRecord{{Edge: "flake", EdgeHash: "h2", Approvals: 3, AutoApprovals: 2, Streak: 1, StreakProposals: []int64{4}}}},
		{"edges count apart", []step{
			{op: "propose", edge: "a", hash: "h", earn: 1, want: ProposalPending},
			{op: "approve", id: 1},
			{op: "propose", edge: "b", hash: "h", earn: 1, want: ProposalPending},
			{op: "propose", edge: "a", hash: "h", earn: 1, want: ProposalAutoApproved, earned: "1 consecutive approval: proposal.1"},
		}, []EdgeRecord{
			{Edge: "a", EdgeHash: "h", Approvals: 1, AutoApprovals: 1, Streak: 1, StreakProposals: []int64{1}},
			{Edge: "b", EdgeHash: "h", StreakProposals: []int64{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := setup(t)
			seed(t, s)
			l := acceptWith(t, s, recs("flake", len(tt.steps)))
			next := 0
			now := t0.Add(time.Minute)
			for i, st := range tt.steps {
				now = now.Add(time.Second)
				switch st.op {
				case "propose":
					p, created, err := s.Propose(ctx, ProposeInput{Token: l.Token, Index: next, Edge: st.edge, EdgeHash: st.hash,
						Propose: "task.rerun", DefHash: "d1", Input: []byte(`{"job": "ci"}`), Spec: []byte(`{"command": ["true"]}`),
						EarnAfter: st.earn}, now)
					next++
					if err != nil || !created {
						t.Fatalf("step %d: Propose = %v, %v", i, created, err)
					}
					if p.Status != st.want || p.Earned != st.earned {
						t.Fatalf("step %d: proposal %s is %s (earned %q); want %s (earned %q)", i, p.Address(), p.Status, p.Earned, st.want, st.earned)
					}
					if auto := st.want == ProposalAutoApproved; auto != p.Status.Approved() || auto != (p.DecidedBy == "edge."+st.edge) ||
						auto == p.DecidedAt.IsZero() {
						t.Errorf("step %d: %+v", i, p)
					}
				case "approve", "reject":
					reason := ""
					if st.op == "reject" {
						reason = "not now"
					}
					p, err := s.DecideProposal(ctx, st.id, st.op == "approve", "alice", reason, now)
					if err != nil || p.DecidedBy != "alice" || !p.DecidedAt.Equal(now) || p.Status.Approved() != (st.op == "approve") {
						t.Fatalf("step %d: DecideProposal = %+v, %v", i, p, err)
					}
				}
			}
			got, err := s.EdgeRecords(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].UpdatedAt = time.Time{}
			}
			if d := cmpDiff(tt.want, got); d != "" {
				t.Errorf("edge records (-want +got):\n%s", d)
			}
			snap, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ps, _ := s.Proposals(ctx)
			if len(snap.Proposals) != len(ps) || len(snap.EdgeRecords) != len(got) {
				t.Errorf("snapshot has %d proposals and %d edge records", len(snap.Proposals), len(snap.EdgeRecords))
			}
		})
	}
}

// TestProposeRecordsAndIsIdempotent checks what one Propose writes, and
// that proposing the same recommendation again returns the same proposal
// and changes nothing, also when two retries race.
func TestProposeRecordsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, recs("flake", 2))
	now := t0.Add(time.Minute)
	in := ProposeInput{Token: l.Token, Index: 1, Edge: "flake_rerun", EdgeHash: "eh", Propose: "task.ci_rerun",
		Input: []byte(`{"n": 1}`), DefHash: "d1", Spec: []byte(`{"command":["make"]}`), Settings: []byte(`{"priority":1}`)}
	p, created, err := s.Propose(ctx, in, now)
	if err != nil || !created {
		t.Fatalf("Propose = %v, %v", created, err)
	}
	want := Proposal{ID: 1, Edge: "flake_rerun", EdgeHash: "eh", Propose: "task.ci_rerun", Type: "flake",
		SourceTask: "task.a", SourceAttempt: 1, SourceToken: l.Token, SourceIndex: 1,
		Input: []byte(`{"n": 1}`), DefHash: "d1", Spec: []byte(`{"command":["make"]}`), Settings: []byte(`{"priority":1}`),
		Status: ProposalPending, CreatedAt: now}
	if d := cmpDiff(want, p); d != "" {
		t.Errorf("proposal (-want +got):\n%s", d)
	}
	if p.Address() != "proposal.1" {
		t.Errorf("address %s", p.Address())
	}
	r := recommendationsOf(t, s)[1]
	if r.Status != RecommendationProposed || r.ProposalID != 1 || !r.DecidedAt.Equal(now) {
		t.Errorf("recommendation %+v", r)
	}
	es := eventsOfKind(t, s, EventProposed)
	if len(es) != 1 || es[0].Task != "proposal.1" || es[0].Token != l.Token ||
		es[0].Message != "proposal.1: task.ci_rerun proposed by task.a attempt 1 via edge.flake_rerun, waiting for approval" {
		t.Errorf("events %+v", es)
	}

	before := serial(t, s)
	again, created, err := s.Propose(ctx, ProposeInput{Token: l.Token, Index: 1, Edge: "other", Propose: "task.other", DefHash: "d2"}, now.Add(time.Hour))
	if err != nil || created || cmpDiff(p, again) != "" {
		t.Errorf("Propose again = %+v, %v, %v", again, created, err)
	}
	if serial(t, s) != before || len(eventsOfKind(t, s, EventProposed)) != 1 {
		t.Errorf("proposing again wrote")
	}

	// Two retries of the same Propose at once: one creates, the other
	// gets the same proposal.
	in.Index = 0
	var wg sync.WaitGroup
	got := make([]Proposal, 2)
	made := make([]bool, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], made[i], errs[i] = s.Propose(ctx, in, now)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || made[0] == made[1] || got[0].ID != got[1].ID || got[0].ID != 2 {
		t.Errorf("racing Propose: %v %v, created %v, ids %d %d", errs[0], errs[1], made, got[0].ID, got[1].ID)
	}
}

func TestProposeErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, append(recs("flake", 1), RecommendationInput{Reason: "bad entry"}))
	ok := ProposeInput{Token: l.Token, Index: 0, Edge: "e", Propose: "task.b", DefHash: "d"}
	tests := []struct {
		name string
		edit func(in *ProposeInput)
		want error
		msg  string
	}{
		{"missing recommendation", func(in *ProposeInput) { in.Index = 5 }, ErrNotFound, ""},
		{"missing lease", func(in *ProposeInput) { in.Token = 99 }, ErrNotFound, ""},
		{"rejected recommendation", func(in *ProposeInput) { in.Index = 1 }, ErrConflict, "already rejected: bad entry"},
		{"empty edge", func(in *ProposeInput) { in.Edge = "" }, ErrInvalid, ""},
		{"edge address", func(in *ProposeInput) { in.Edge = "edge.e" }, ErrInvalid, "name"},
		{"empty propose", func(in *ProposeInput) { in.Propose = "" }, ErrInvalid, ""},
		{"empty def hash", func(in *ProposeInput) { in.DefHash = "" }, ErrInvalid, ""},
		{"negative earn_after", func(in *ProposeInput) { in.EarnAfter = -1 }, ErrInvalid, ""},
		{"bad input", func(in *ProposeInput) { in.Input = []byte(`{`) }, ErrInvalid, "input"},
		{"bad spec", func(in *ProposeInput) { in.Spec = []byte(`nope`) }, ErrInvalid, "spec"},
		{"bad settings", func(in *ProposeInput) { in.Settings = []byte(`[`) }, ErrInvalid, "settings"},
	}
	for _, tt := range tests {
		in := ok
		tt.edit(&in)
		before := serial(t, s)
		_, _, err := s.Propose(ctx, in, t0)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v; want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
		if serial(t, s) != before {
			t.Errorf("%s: the serial moved", tt.name)
		}
	}
	if ps, err := s.Proposals(ctx); err != nil || ps == nil || len(ps) != 0 {
		t.Errorf("Proposals = %v, %v", ps, err)
	}
}

func TestDecideProposalErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, recs("flake", 3))
	for i := range 3 {
		if _, _, err := s.Propose(ctx, ProposeInput{Token: l.Token, Index: i, Edge: "e", Propose: "task.b", DefHash: "d", EarnAfter: 1}, t0); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := s.DecideProposal(ctx, 1, true, "alice", "", t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.DecideProposal(ctx, 2, false, "bob", "wrong fix", t0); err != nil { // proposal.2 was auto-approved
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "proposal.2 is already auto-approved") {
			t.Errorf("deciding an auto-approved proposal: %v", err)
		}
	} else {
		t.Errorf("an auto-approved proposal was decided again")
	}
	tests := []struct {
		name    string
		id      int64
		approve bool
		reason  string
		want    error
		msg     string
	}{
		{"approved twice", 1, true, "", ErrConflict, "proposal.1 is already approved"},
		{"rejected after approval", 1, false, "no", ErrConflict, "proposal.1 is already approved"},
		{"no such proposal", 9, true, "", ErrNotFound, "proposal.9"},
		{"reject without reason", 3, false, "", ErrInvalid, "reason"},
	}
	for _, tt := range tests {
		before := serial(t, s)
		_, err := s.DecideProposal(ctx, tt.id, tt.approve, "carol", tt.reason, t0)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v; want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
		if serial(t, s) != before {
			t.Errorf("%s: the serial moved", tt.name)
		}
	}
	if _, err := s.Proposal(ctx, 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("Proposal(9): %v", err)
	}
	es := eventsOfKind(t, s, EventProposalApproved)
	if len(es) != 1 || es[0].Task != "proposal.1" || es[0].Message != "proposal.1 (task.b via edge.e) approved by alice" {
		t.Errorf("approval events %+v", es)
	}
	es = eventsOfKind(t, s, EventProposalAutoApproved)
	if len(es) != 2 || es[0].Task != "proposal.2" || es[0].Message != "proposal.2 (task.b) approved by edge.e: 1 consecutive approval: proposal.1" {
		t.Errorf("auto approval events %+v", es)
	}
}

// TestProposalSchemaInvariants checks with raw SQL that SQLite itself
// refuses what the chaining tables forbid. Each case starts from a fresh
// file with lease 1 of task.a accepted with three recommendations:
// 0 proposed as proposal.1 and approved, 1 proposed as proposal.2
// (pending), 2 new; and lease 2 of task.b, unfinished.
func TestProposalSchemaInvariants(t *testing.T) {
	t.Parallel()
	const insertProposal = `INSERT INTO proposals (edge, propose, type, source_task, source_attempt, source_token, source_index,
		def_hash, status, created_at) VALUES ('e', 'task.c', 'flake', 'task.a', 1, 1, %d, 'd', 'pending', 0)`
	tests := []struct {
		name string
		stmt string
		want string
	}{
		{"decided proposal changes status", `UPDATE proposals SET status = 'rejected', reason = 'no' WHERE id = 1`, "never changes again"},
		{"decided proposal changes decider", `UPDATE proposals SET decided_by = 'mallory' WHERE id = 1`, "never changes again"},
		{"decided proposal back to pending", `UPDATE proposals SET status = 'pending', decided_at = NULL WHERE id = 1`, "never changes again"},
		{"proposal rendering changes", `UPDATE proposals SET spec = '{"command": ["rm"]}' WHERE id = 2`, "never change"},
		{"proposal source changes", `UPDATE proposals SET source_index = 2 WHERE id = 2`, "never change"},
		{"proposal deleted", `DELETE FROM proposals WHERE id = 2`, "never deleted"},
		{"second proposal for a recommendation", fmt.Sprintf(insertProposal, 0),
			"UNIQUE constraint failed: proposals.source_token, proposals.source_index"},
		{"proposal for no recommendation", fmt.Sprintf(insertProposal, 7), "FOREIGN KEY constraint failed"},
		{"proposal status", `UPDATE proposals SET status = 'maybe', decided_at = 1 WHERE id = 2`, "CHECK constraint failed"},
		{"decided proposal without decided_at", `UPDATE proposals SET status = 'approved' WHERE id = 2`, "CHECK constraint failed"},
		{"rejected proposal without reason", `UPDATE proposals SET status = 'rejected', decided_at = 1 WHERE id = 2`, "CHECK constraint failed"},
		{"auto approval without record", `UPDATE proposals SET status = 'auto_approved', decided_at = 1 WHERE id = 2`, "CHECK constraint failed"},
		{"proposal spec not JSON", `INSERT INTO proposals (edge, propose, type, source_task, source_attempt, source_token, source_index, spec, def_hash, status, created_at)
			 VALUES ('e', 'task.c', 'flake', 'task.a', 1, 1, 2, '{', 'd', 'pending', 0)`, "CHECK constraint failed"},
		{"proposed recommendation changes", `UPDATE recommendations SET status = 'new', proposal_id = NULL, decided_at = NULL WHERE idx = 0`,
			"never changes again"},
		{"recommendation input changes", `UPDATE recommendations SET input = '{"n": 9}' WHERE idx = 2`, "never changes"},
		{"recommendation deleted", `DELETE FROM recommendations WHERE idx = 2`, "never deleted"},
		{"proposed recommendation without proposal", `UPDATE recommendations SET status = 'proposed', decided_at = 1 WHERE idx = 2`,
			"CHECK constraint failed"},
		{"rejected recommendation without reason", `UPDATE recommendations SET status = 'rejected', decided_at = 1 WHERE idx = 2`,
			"CHECK constraint failed"},
		{"new recommendation without type", `INSERT INTO recommendations (fencing_token, idx, task, attempt, type, status, received_at)
			VALUES (1, 5, 'task.a', 1, '', 'new', 0)`, "CHECK constraint failed"},
		{"recommendation of an unaccepted lease", `INSERT INTO recommendations (fencing_token, idx, task, attempt, type, status, received_at)
			VALUES (2, 0, 'task.b', 1, 'flake', 'new', 0)`, "accepted result"},
		{"recommendation naming another task", `INSERT INTO recommendations (fencing_token, idx, task, attempt, type, status, received_at)
			VALUES (1, 5, 'task.b', 1, 'flake', 'new', 0)`, "accepted result"},
		{"recommendation input not JSON", `INSERT INTO recommendations (fencing_token, idx, task, attempt, type, input, status, received_at)
			VALUES (1, 5, 'task.a', 1, 'flake', '{', 'new', 0)`, "CHECK constraint failed"},
		{"edge streak above approvals", `UPDATE edge_records SET streak = 5, streak_proposals = '[1,2,3,4,5]'`, "CHECK constraint failed"},
		{"edge streak without its proposals", `UPDATE edge_records SET streak = 0`, "CHECK constraint failed"},
		{"edge streak proposals not an array", `UPDATE edge_records SET streak_proposals = '{"a": 1}'`, "CHECK constraint failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := setup(t)
			seed(t, s)
			addTask(t, s, "task.b", TaskQueued, 1, 1)
			l := acceptWith(t, s, recs("flake", 3))
			claim(t, s, "task.b", "w1", t0)
			for i := range 2 {
				if _, _, err := s.Propose(ctx, ProposeInput{Token: l.Token, Index: i, Edge: "e", Propose: "task.c", DefHash: "d"}, t0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.DecideProposal(ctx, 1, true, "alice", "", t0); err != nil {
				t.Fatal(err)
			}
			_, err := s.db.Exec(tt.stmt)
			if err == nil {
				t.Fatalf("SQLite accepted %s", tt.stmt)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestUpgradeFromVersion4TakesRecommendations opens a state file at schema
// version 4 holding a running lease, and checks that after the upgrade
// the lease's accepted result records its recommendations and one can be
// proposed.
func TestUpgradeFromVersion4TakesRecommendations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := openDB(DSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(createSchemaMigrations); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:4] {
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO pools (name, provider, min, max, capacity, created_at, updated_at) VALUES ('p', 'local', 0, 4, 1, 0, 0)`,
		`INSERT INTO workers (id, pool, capacity, status, registered_at, last_heartbeat_at, heartbeat_interval_ms, ttl_ms)
		 VALUES ('w1', 'p', 1, 'active', 0, 0, 1000, 3600000)`,
		`INSERT INTO tasks (address, name, def_hash, status, attempts, max_attempts, max_lost, created_at, updated_at)
		 VALUES ('task.a', 'a', 'h1', 'running', 1, 3, 3, 0, 0)`,
		`UPDATE fencing_counter SET last_token = 1`,
		fmt.Sprintf(`INSERT INTO leases (token, task, def_hash, worker_id, attempt, status, granted_at, renewed_at, expires_at, hard_expires_at)
		 VALUES (1, 'task.a', 'h1', 'w1', 1, 'active', %d, %d, %d, %d)`, ms(t0), ms(t0), ms(t0.Add(time.Hour)), ms(t0.Add(time.Hour))),
		fmt.Sprintf(`INSERT INTO attempts (task, number, worker_id, fencing_token, started_at) VALUES ('task.a', 1, 'w1', 1, %d)`, ms(t0)),
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != SchemaVersion() || version < 5 {
		t.Fatalf("schema version %d, %v", version, err)
	}
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: 1, WorkerID: "w1", Recommendations: recs("flake", 1)}, nil, t0.Add(time.Second))
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("AcceptResult = %+v, %v", dec, err)
	}
	p, created, err := s.Propose(ctx, ProposeInput{Token: 1, Index: 0, Edge: "e", Propose: "task.b", DefHash: "d"}, t0.Add(time.Second))
	if err != nil || !created || p.SourceTask != "task.a" {
		t.Fatalf("Propose = %+v, %v, %v", p, created, err)
	}
}

// TestProposeInsideTx: the Tx wrappers run inside one write, so a
// coordinator can judge a recommendation in the write that reads it.
func TestProposeInsideTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := acceptWith(t, s, recs("flake", 2))
	err := s.Write(ctx, func(tx *Tx) error {
		news, err := tx.NewRecommendations(0)
		if err != nil || len(news) != 2 {
			return fmt.Errorf("new recommendations %+v, %v", news, err)
		}
		p, _, err := tx.Propose(ProposeInput{Token: l.Token, Index: 0, Edge: "e", Propose: "task.b", DefHash: "d"}, t0)
		if err != nil {
			return err
		}
		if _, err := tx.Proposal(p.ID); err != nil {
			return err
		}
		return tx.RejectRecommendation(l.Token, 1, "no edge", t0)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	news, err := s.NewRecommendations(ctx, 0)
	if err != nil || len(news) != 0 {
		t.Errorf("new recommendations after the write: %+v, %v", news, err)
	}
	snap := EmptySnapshot()
	if snap.Proposals == nil || snap.EdgeRecords == nil {
		t.Errorf("EmptySnapshot has nil lists")
	}
}
