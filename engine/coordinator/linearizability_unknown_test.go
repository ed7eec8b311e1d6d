package coordinator_test

// The model's steps for calls of unknown outcome: calls in flight when the
// coordinator was killed whose answer never arrived (linOutput.Unknown;
// linearizability_crash_test.go records them). linStep hands them, and
// every step from a state whose latest lease has an unknown token, to
// stepUncertain.
//
// A lease whose token nobody saw (granted by a claim of unknown outcome)
// keeps, in linLease.Token, -1 − L, where L is the token of the task's
// lease before it (0: none), which its token is above: a negative token
// in a state's description is such a lease. No call can name it (a
// result for it is unknown_lease, a heartbeat does not report it), a
// grant after it must have a token above L, and a lookup, a sweep or a
// result that shows a token above L may be of it, which then pins it.

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// unknownToken is the token of a lease nobody saw, above below.
func unknownToken(below int64) int64 { return -1 - below }

// tokenFloor is a token, or the token an unknown one is above.
func tokenFloor(token int64) int64 {
	if token < 0 {
		return -1 - token
	}
	return token
}

// unknownLatest reports whether the token of the latest lease is unknown.
func (s linState) unknownLatest() bool {
	i := s.latest()
	return i >= 0 && s.Leases[i].Token < 0
}

// stepUncertain is linStep for an operation of unknown outcome, and for
// any operation from a state whose latest lease's token is unknown.
//
// An unknown outcome may have taken effect or not: its states are s
// unchanged (it never reached the coordinator, or was not decided, or was
// answered 401) and every state that linStep reaches from s for an answer
// the coordinator could have given (linAnswers). A claim of unknown
// outcome, in every task's partition, may have granted this task to its
// worker at any ms of the call: a lease with the next attempt number and
// an unknown token, which no one heartbeats, so it expires after its ttl
// and is swept, spending the lost budget.
func stepUncertain(s linState, in linInput, out linOutput) []linState {
	if out.Unknown {
		next := []linState{s}
		if in.Kind == linGrant {
			return append(next, stepUnknownGrant(s, in)...)
		}
		for _, o := range linAnswers(s, in) {
			next = append(next, linStep(s, in, o)...)
		}
		return next
	}
	i := s.latest()
	floor := tokenFloor(s.Leases[i].Token)
	if in.Kind == linGrant && in.Token <= floor {
		return nil
	}
	next := stepKnown(s, in, out)
	for _, tok := range revealedTokens(in, out) {
		if tok > floor {
			pinned := s.clone()
			pinned.Leases[i].Token = tok
			next = append(next, stepKnown(pinned, in, out)...)
		}
	}
	return next
}

// stepUnknownGrant: the grant, at a ms of the call, of a lease of the task
// to the claim's worker with the next attempt and an unknown token.
func stepUnknownGrant(s linState, in linInput) []linState {
	c := in.Conf
	var below int64
	if i := s.latest(); i >= 0 {
		below = tokenFloor(s.Leases[i].Token)
	}
	var next []linState
	for g := max(s.Now, in.From); g <= in.To; g += max(c.Step, 1) {
		grant := in
		// A token above every other, for stepGrant; then unknown.
		grant.Token, grant.Attempt, grant.ExpiresAt = math.MaxInt64, s.Attempts+1, g+min(c.TTL, c.Limit)
		if in.Prefetched {
			grant.ExpiresAt = g + c.TTL
		}
		for _, s2 := range linStep(s, grant, linOutput{}) {
			s2.Leases[s2.latest()].Token = unknownToken(below)
			next = append(next, s2)
		}
	}
	return next
}

// linAnswers lists the answers the coordinator may give to in: a
// heartbeat's cancel_leases is a subset of the task's tokens it
// reported; a result is accepted or rejected for each reason, first or as
// a replay; a sweep expired nothing or the latest lease; a lookup reads
// and changes nothing, so none is needed; a release, revoke or restart
// has one.
func linAnswers(s linState, in linInput) []linOutput {
	var outs []linOutput
	switch in.Kind {
	case linHeartbeat:
		for set := range 1 << len(in.Reported) {
			var cancelled []int64
			for j, tok := range in.Reported {
				if set&(1<<j) != 0 {
					cancelled = append(cancelled, tok)
				}
			}
			outs = append(outs, linOutput{Cancelled: cancelled})
		}
	case linResult:
		for _, dup := range []bool{false, true} {
			outs = append(outs, linOutput{Decision: protocol.DecisionAccepted, Duplicate: dup})
			for _, r := range []string{protocol.ReasonUnknownLease, protocol.ReasonWrongWorker, protocol.ReasonStaleToken, protocol.ReasonLeaseExpired} {
				outs = append(outs, linOutput{Decision: protocol.DecisionRejected, Reason: r, Duplicate: dup})
			}
		}
	case linStart:
		outs = append(outs, linOutput{}, linOutput{Cancelled: []int64{in.Token}})
	case linSweep:
		outs = append(outs, linOutput{})
		if i := s.latest(); i >= 0 {
			outs = append(outs, linOutput{Expired: []int64{s.Leases[i].Token}})
		}
	case linLookup:
	default:
		outs = append(outs, linOutput{})
	}
	return outs
}

// revealedTokens lists the tokens of the task an answer shows, which may
// be the latest lease's unknown one.
func revealedTokens(in linInput, out linOutput) []int64 {
	switch in.Kind {
	case linLookup:
		if out.Lease != nil {
			return []int64{out.Lease.Token}
		}
	case linSweep:
		return out.Expired
	case linResult, linStart:
		return []int64{in.Token}
	}
	return nil
}

// TestLinearizabilityUnknownOutcomes checks the steps for calls of
// unknown outcome on small hand-made histories: both outcomes of a result
// across a crash, a claim that granted a lease nobody saw, which expires
// (or is shown by a lookup); and the rules they must not loosen.
func TestLinearizabilityUnknownOutcomes(t *testing.T) {
	t.Parallel()
	conf := linTaskConf{MaxAttempts: 2, MaxLost: 2, TTL: 100, Limit: 1000, Interval: 25, Backoff: 20, MaxBackoff: 80, Step: 1}
	once, three := conf, conf
	once.MaxLost, three.MaxLost = 1, 3
	// at is an operation of task.a whose call spans [from, to]; unknown
	// ones end at the kill, and restart starts 1 after it.
	at := func(from, to int64, in linInput, out linOutput) porcupine.Operation {
		return linTestOp(conf, in, from, to, out)
	}
	unknown := linOutput{Unknown: true}
	claim := linInput{Kind: linGrant, Worker: "w1"}
	granted := func(worker string, epoch int, token int64, attempt int, g int64) linInput {
		return linInput{Kind: linGrant, Worker: worker, Epoch: epoch, Token: token, Attempt: attempt, ExpiresAt: g + conf.TTL}
	}
	post := func(token int64, key, class string) linInput {
		return linInput{Kind: linResult, Worker: "w1", Token: token, Attempt: 1, Key: key, Class: class}
	}
	restart := func(kill int64) porcupine.Operation {
		return porcupine.Operation{Input: linInput{Part: "task.a", Kind: linRestart, Conf: conf, From: kill, To: kill + 5},
			Call: kill + 1, Output: linOutput{}, Return: kill + 5}
	}
	shows := func(token int64, worker string, attempt int, status state.LeaseStatus, granted, expires int64) linOutput {
		return linOutput{Lease: &linLeaseView{Token: token, Worker: worker, Attempt: attempt, Status: status, Granted: granted, Expires: expires}}
	}
	lookup := linInput{Kind: linLookup}
	accepted := linOutput{Decision: protocol.DecisionAccepted}
	tests := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"a result of unknown outcome, accepted", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 1, 1, 0), linOutput{}),
			at(10, 20, post(1, "k1", ""), unknown), restart(20),
			at(30, 30, lookup, shows(1, "w1", 1, state.LeaseCompleted, 0, 100)),
		}, true},
		{"a result of unknown outcome, not taken", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 1, 1, 0), linOutput{}),
			at(10, 20, post(1, "k1", ""), unknown), restart(20),
			at(30, 30, lookup, shows(1, "w1", 1, state.LeaseActive, 0, 100)),
		}, true},
		{"a heartbeat of unknown outcome, renewed", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 1, 1, 0), linOutput{}),
			at(50, 60, linInput{Kind: linHeartbeat, Worker: "w1", Reported: []int64{1}}, unknown), restart(60),
			at(120, 120, lookup, shows(1, "w1", 1, state.LeaseActive, 0, 155)),
		}, true},
		{"a claim of unknown outcome that took no lease", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(20, 20, granted("w2", 1, 3, 1, 20), linOutput{}),
		}, true},
		{"a claim that granted a lease nobody saw, which expires", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(150, 150, granted("w2", 1, 3, 2, 150), linOutput{}),
		}, true},
		{"a lookup shows the lease nobody saw; it expires, swept", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(20, 20, lookup, shows(7, "w1", 1, state.LeaseActive, 3, 103)),
			at(110, 110, linInput{Kind: linSweep}, linOutput{Expired: []int64{7}}),
			at(120, 120, granted("w2", 1, 9, 2, 120), linOutput{}),
		}, true},
		{"the lease nobody saw spends the last lost budget", []porcupine.Operation{
			at(0, 5, linInput{Kind: linGrant, Conf: once, Worker: "w1"}, unknown), restart(5),
			at(200, 200, linInput{Kind: linLookup, Conf: once}, shows(4, "w1", 1, state.LeaseExpired, 2, 102)),
		}, true},

		{"an unknown claim does not allow a lower token", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 5, 1, 0), linOutput{}),
			at(10, 10, post(5, "k1", "lost"), accepted),
			at(20, 25, claim, unknown), restart(25),
			at(40, 40, lookup, shows(4, "w1", 2, state.LeaseActive, 22, 122)),
		}, false},
		{"an unknown claim does not allow a lower token later", []porcupine.Operation{
			at(0, 0, linInput{Kind: linGrant, Conf: three, Worker: "w1", Token: 5, Attempt: 1, ExpiresAt: 100}, linOutput{}),
			at(10, 10, linInput{Kind: linResult, Conf: three, Worker: "w1", Token: 5, Attempt: 1, Key: "k1", Class: "lost"}, accepted),
			at(20, 25, linInput{Kind: linGrant, Conf: three, Worker: "w1"}, unknown), restart(25),
			at(200, 200, linInput{Kind: linGrant, Conf: three, Worker: "w2", Epoch: 1, Token: 4, Attempt: 3, ExpiresAt: 300}, linOutput{}),
		}, false},
		{"a result accepted twice across a crash", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 1, 1, 0), linOutput{}),
			at(10, 10, post(1, "k1", ""), accepted),
			at(15, 20, post(1, "k2", ""), unknown), restart(20),
			at(30, 30, post(1, "k3", ""), accepted),
		}, false},
		{"a result of unknown outcome takes effect before its kill or never", []porcupine.Operation{
			at(0, 0, granted("w1", 0, 1, 1, 0), linOutput{}),
			at(90, 95, post(1, "k1", ""), unknown), restart(95),
			at(98, 98, lookup, shows(1, "w1", 1, state.LeaseActive, 0, 100)),
			at(130, 130, lookup, shows(1, "w1", 1, state.LeaseCompleted, 0, 100)),
		}, false},
		{"the lease nobody saw spent the last lost budget: no grant after it", []porcupine.Operation{
			at(0, 5, linInput{Kind: linGrant, Conf: once, Worker: "w1"}, unknown), restart(5),
			at(200, 200, linInput{Kind: linLookup, Conf: once}, shows(4, "w1", 1, state.LeaseExpired, 2, 102)),
			at(210, 210, linInput{Kind: linGrant, Conf: once, Worker: "w2", Epoch: 1, Token: 5, Attempt: 2, ExpiresAt: 310}, linOutput{}),
		}, false},
		{"the lease nobody saw is one active lease", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(20, 20, lookup, shows(7, "w1", 1, state.LeaseActive, 3, 103)),
			at(30, 30, granted("w2", 1, 8, 2, 30), linOutput{}),
		}, false},
		{"the lease nobody saw is not renewed", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(120, 120, lookup, shows(7, "w1", 1, state.LeaseActive, 3, 160)),
		}, false},
		{"a claim of unknown outcome grants no lease after its kill", []porcupine.Operation{
			at(0, 5, claim, unknown), restart(5),
			at(20, 20, lookup, shows(7, "w1", 1, state.LeaseActive, 10, 110)),
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(linModel, tc.ops); got != tc.legal {
				for _, o := range tc.ops {
					t.Logf("  %s", describeLinOp(o.Input.(linInput), o.Output.(linOutput)))
				}
				t.Errorf("linearizable = %v, want %v", got, tc.legal)
			}
		})
	}
}
