package coordinator_test

// The sequential specification of the lease rules (docs/design.md §3) that
// TestLinearizability checks recorded protocol histories against with
// porcupine. A history is split by task: each task's partition holds the
// grants of its leases, the results that name it, the lookups of its
// latest lease, the heartbeats of the workers that may hold one of its
// leases (in two steps, renewal and release, as the coordinator makes
// them), and every sweep, revoke and restart; one more partition
// (linTokens) holds every grant, for the fencing counter that all tasks
// share. Each partition is checked on its own, so the check is of the
// projections: what fails is not linearizable, but an anomaly visible only
// across tasks would pass.
//
// Time. The coordinator decides by its own clock, which the workers cannot
// read; the test gives it a fake clock that only moves in steps of
// linTaskConf.Step and reads that clock just before each call and just
// after its answer. So the server's time of a decision is one of the clock
// values in [From, To], and decisions follow each other in time: the model
// keeps the lowest time the next decision may have (linState.Now) and, where
// the answer depends on where in [From, To] the decision fell (a result or
// heartbeat whose interval spans its lease's expiry), returns every state
// that a time in the interval leads to. Sweeps that Run makes are not in
// the history: a lease past its expiry may have been swept or not, and the
// model keeps both possibilities until an answer tells them apart.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// linTokens is the partition of the fencing counter.
const linTokens = "(fencing tokens)"

// linKind is an operation of the model.
type linKind uint8

const (
	linGrant     linKind = iota + 1 // one assignment of a claim
	linHeartbeat                    // a heartbeat of a worker that held a lease of the task
	linResult                       // a result naming the task
	linLookup                       // the operator's lookup of the task's latest lease
	linSweep                        // the operator's sweep
	linRevoke                       // coordinator.Coordinator.RevokeLeases
	linRestart                      // the coordinator stopped and a new one opened the state file
	linRelease                      // a heartbeat's second step: the release of leases it did not report
	linStart                        // a worker's report that it started a prefetched lease's attempt
)

func (k linKind) String() string {
	return [...]string{"?", "grant", "heartbeat", "result", "lookup", "sweep", "revoke", "restart", "release", "start"}[k]
}

// linTaskConf is what the model knows of a task and its pool, in fake
// milliseconds: budgets, ttl, timeout + lease grace (Limit), heartbeat
// interval, backoff, and the step of the fake clock.
type linTaskConf struct {
	MaxAttempts, MaxLost int
	TTL, Limit, Interval int64
	Backoff, MaxBackoff  int64
	Step                 int64
}

// backoff is the delay of the k-th failure's retry: Backoff·2^(k-1),
// capped at MaxBackoff.
func (c linTaskConf) backoff(k int) int64 {
	d := c.Backoff
	for i := 1; i < k && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.MaxBackoff)
}

// linInput is one operation as its partition sees it. Times are fake
// milliseconds since the clock's start; From and To are the clock just
// before the call and just after the answer.
type linInput struct {
	Part     string
	Kind     linKind
	Conf     linTaskConf
	Worker   string
	Epoch    int // the number of revokes and restarts before the worker registered
	From, To int64

	Token     int64  // grant, result, start
	Attempt   int    // grant, result (0: not named)
	ExpiresAt int64  // grant
	Key       string // result
	Class     string // result: "", failure, lost or refused
	// Prefetched: a grant of a lease beyond the worker's capacity, whose
	// attempt has not started (docs/design.md §3, prefetched leases).
	Prefetched bool
	// Reported lists the task's tokens a heartbeat reported.
	Reported []int64
	// Release: the heartbeat may release a lease of the task it did not
	// report; a linRelease operation of the same call follows it, unless
	// Atomic, when the heartbeat releases in its own step (as if renewal
	// and release were one transaction).
	Release, Atomic bool
}

// linLeaseView is a lease as the operator's lookup shows it.
type linLeaseView struct {
	Token            int64
	Worker           string
	Attempt          int
	Status           state.LeaseStatus
	Granted, Expires int64
	Unstarted        bool
}

// linOutput is an operation's answer, restricted to the partition.
type linOutput struct {
	// Unauthorized: the call was answered 401 (its session is gone).
	Unauthorized bool
	// Decision, Reason, Duplicate: a result's answer.
	Decision, Reason string
	Duplicate        bool
	// Cancelled: the reported tokens of the task a heartbeat answered in
	// cancel_leases; for a start, the started token when the start was
	// refused (its lease is not the worker's live one).
	Cancelled []int64
	// Lease: the lookup's answer (nil: the task never had a lease).
	Lease *linLeaseView
	// Expired: the task's tokens an operator sweep expired.
	Expired []int64
	// Unknown: no answer arrived, the coordinator was killed during the
	// call (linearizability_crash_test.go); the other fields are empty.
	Unknown bool
}

// linLease is a lease in the model.
type linLease struct {
	Token                  int64
	Worker                 string
	Attempt                int
	Granted, Expires, Hard int64
	Status                 state.LeaseStatus
	// Unstarted: a prefetched lease whose attempt no report has started.
	// Its Hard is unbounded (linUnbounded) until the start: the task's
	// timeout counts from there.
	Unstarted bool
}

// linUnbounded is the hard expiry of an unstarted lease.
const linUnbounded = math.MaxInt64 / 4

// linDecision is the first decision on a result, by (Key, Token, Worker).
type linDecision struct {
	Key              string
	Token            int64
	Worker           string
	Decision, Reason string
	// Unsure: a rejection for a lease not the poster's own (unknown_lease,
	// wrong_worker), which the coordinator records once per
	// RefusalInterval of the poster's: the model cannot tell whether it
	// was, so a post of its key again may replay it or be judged afresh.
	Unsure bool
}

// linState is the model's state of one task (or, in linTokens, the last
// token granted). It is never changed in place: steps copy.
type linState struct {
	Now                    int64 // the earliest time the next decision may have
	Epoch                  int   // revokes and restarts so far
	Status                 state.TaskStatus
	Attempts               int
	FailuresUsed, LostUsed int
	NotBefore              int64         // of the open retry directive
	Leases                 []linLease    // every lease of the task, by token
	Decisions              []linDecision // sorted by Key, Token, Worker
	LastToken              int64         // linTokens only
	// Due lists the workers whose heartbeat renewed but has not yet
	// released (linRelease), with the time it decided at.
	Due []linDue
}

// linDue is a heartbeat between its two steps.
type linDue struct {
	Worker string
	At     int64
}

func (s linState) clone() linState {
	s.Leases = slices.Clone(s.Leases)
	s.Decisions = slices.Clone(s.Decisions)
	s.Due = slices.Clone(s.Due)
	return s
}

// latest returns the index of the task's latest lease, or -1.
func (s linState) latest() int { return len(s.Leases) - 1 }

// active reports whether the latest lease is active (in the state: it may
// be past its expiry and not swept yet).
func (s linState) active() bool {
	i := s.latest()
	return i >= 0 && s.Leases[i].Status == state.LeaseActive
}

func (s linState) decision(key string, token int64, worker string) (linDecision, bool) {
	for _, d := range s.Decisions {
		if d.Key == key && d.Token == token && d.Worker == worker {
			return d, true
		}
	}
	return linDecision{}, false
}

// lateRecorded reports whether a late result of worker's lease token
// (stale_token, lease_expired) was recorded: the coordinator records only
// the first.
func (s linState) lateRecorded(token int64, worker string) bool {
	return slices.ContainsFunc(s.Decisions, func(d linDecision) bool {
		return d.Token == token && d.Worker == worker && (d.Reason == protocol.ReasonStaleToken || d.Reason == protocol.ReasonLeaseExpired)
	})
}

func (s *linState) record(d linDecision) {
	i, _ := slices.BinarySearchFunc(s.Decisions, d, func(a, b linDecision) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Token != b.Token {
			return int(a.Token - b.Token)
		}
		return strings.Compare(a.Worker, b.Worker)
	})
	s.Decisions = slices.Insert(s.Decisions, i, d)
}

// lose ends the latest lease with status (expired or revoked) at time t:
// the attempt is lost, the task spends one of its lost budget and is queued
// again at once, or fails when the budget is spent. An unstarted lease
// goes back at no cost: the task is queued again at once.
func (s *linState) lose(c linTaskConf, status state.LeaseStatus, t int64) {
	s.Leases[s.latest()].Status = status
	if s.Leases[s.latest()].Unstarted {
		s.Status, s.NotBefore = state.TaskQueued, t
		return
	}
	s.LostUsed++
	if s.LostUsed >= c.MaxLost {
		s.Status = state.TaskFailed
		return
	}
	s.Status, s.NotBefore = state.TaskQueued, t
}

// settle returns the states the task may be in at time t as far as the
// sweeps of Run go: as it is, and, when its latest lease is active but
// expires at or before t, with that lease expired by a sweep at the
// earliest time one could have run.
func settle(s linState, c linTaskConf, t int64) []linState {
	i := s.latest()
	if !s.active() || s.Leases[i].Expires > t {
		return []linState{s}
	}
	at := max(s.Now, s.Leases[i].Expires)
	if at > t {
		return []linState{s}
	}
	swept := s.clone()
	swept.lose(c, state.LeaseExpired, at)
	swept.Now = at
	return []linState{s, swept}
}

// times returns the candidate times of a decision in [lo, to]: lo, and
// the latest lease's expiry when it falls inside (the only time at which
// the answer of a result, sweep or revoke can change).
func (s linState) times(lo, to int64) []int64 {
	if lo > to {
		return nil
	}
	ts := []int64{lo}
	if i := s.latest(); s.active() && s.Leases[i].Expires > lo && s.Leases[i].Expires <= to {
		ts = append(ts, s.Leases[i].Expires)
	}
	return ts
}

// linModel is the model; see the comment at the top of the file. Its
// state is the set of linStates a task may be in ([]linState), stepped
// element by element, as porcupine's NondeterministicModel.ToModel does,
// but pruned: of two states that differ only in Now and NotBefore, the one
// with both no later allows every step the other allows, so only it is
// kept. Without that, every call whose time is uncertain would multiply
// the set.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		parts := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			p := op.Input.(linInput).Part
			if _, ok := parts[p]; !ok {
				order = append(order, p)
			}
			parts[p] = append(parts[p], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, p := range order {
			out = append(out, parts[p])
		}
		return out
	},
	Init: func() interface{} {
		return []linState{{Status: state.TaskQueued}}
	},
	Step: func(st, in, out interface{}) (bool, interface{}) {
		var next []linState
		for _, s := range st.([]linState) {
			next = append(next, linStep(s, in.(linInput), out.(linOutput))...)
		}
		next = prune(next)
		return len(next) > 0, next
	},
	Equal: func(a, b interface{}) bool {
		x, y := a.([]linState), b.([]linState)
		if len(x) != len(y) {
			return false
		}
		for _, s := range x {
			if !slices.ContainsFunc(y, func(t linState) bool { return s.equal(t) }) {
				return false
			}
		}
		return true
	},
	Hash: func(st interface{}) uint64 {
		var h uint64
		for _, s := range st.([]linState) {
			h ^= s.hash()
		}
		return h
	},
	DescribeOperation: func(in, out interface{}) string {
		return describeLinOp(in.(linInput), out.(linOutput))
	},
	DescribeState: func(st interface{}) string {
		var parts []string
		for _, s := range st.([]linState) {
			parts = append(parts, s.String())
		}
		return "{" + strings.Join(parts, " | ") + "}"
	},
}

// prune drops from states every state that another one dominates: equal
// but for Now and NotBefore, which are lower bounds of the times of later
// decisions (the lower, the more a state allows). Only states of one
// hash but for those two are compared: a call whose time spans many ms
// makes hundreds of states.
func prune(states []linState) []linState {
	groups := map[uint64][]int{}
	key := func(s linState) uint64 {
		s.Now, s.NotBefore = 0, 0
		return s.hash()
	}
	for i, s := range states {
		groups[key(s)] = append(groups[key(s)], i)
	}
	out := states[:0:0]
	for i, s := range states {
		dominated := false
		for _, j := range groups[key(s)] {
			o := states[j]
			if i == j || !s.equalBut(o) || o.Now > s.Now || o.NotBefore > s.NotBefore {
				continue
			}
			// o is no later in both; of two equal states keep the first.
			if o.Now < s.Now || o.NotBefore < s.NotBefore || j < i {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, s)
		}
	}
	return out
}

// equalBut reports whether s and o are equal but for Now and NotBefore.
func (s linState) equalBut(o linState) bool {
	return s.Epoch == o.Epoch && s.Status == o.Status && s.Attempts == o.Attempts &&
		s.FailuresUsed == o.FailuresUsed && s.LostUsed == o.LostUsed && s.LastToken == o.LastToken &&
		slices.Equal(s.Leases, o.Leases) && slices.Equal(s.Decisions, o.Decisions) && slices.Equal(s.Due, o.Due)
}

func (s linState) equal(o linState) bool {
	return s.Now == o.Now && s.NotBefore == o.NotBefore && s.equalBut(o)
}

func (s linState) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(v int64) { h = (h ^ uint64(v)) * 1099511628211 }
	mix(s.Now)
	mix(int64(s.Epoch))
	mix(int64(len(s.Status)))
	mix(int64(s.Attempts<<16 | s.FailuresUsed<<8 | s.LostUsed))
	mix(s.NotBefore)
	mix(s.LastToken)
	mix(int64(len(s.Decisions)))
	mix(int64(len(s.Due)))
	for _, l := range s.Leases {
		mix(l.Token)
		mix(l.Expires)
		mix(int64(len(l.Status)))
		if l.Unstarted {
			mix(1)
		}
	}
	return h
}

func (s linState) String() string {
	if s.LastToken != 0 {
		return fmt.Sprintf("last token %d", s.LastToken)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "now %d, epoch %d, %s, attempts %d, failures %d, lost %d", s.Now, s.Epoch, s.Status, s.Attempts, s.FailuresUsed, s.LostUsed)
	if s.Status == state.TaskQueued && s.NotBefore > 0 {
		fmt.Fprintf(&b, ", not before %d", s.NotBefore)
	}
	for _, l := range s.Leases {
		fmt.Fprintf(&b, "; lease %d %s attempt %d %s granted %d expires %d", l.Token, l.Worker, l.Attempt, l.Status, l.Granted, l.Expires)
		if l.Unstarted {
			b.WriteString(" unstarted")
		} else {
			fmt.Fprintf(&b, " hard %d", l.Hard)
		}
	}
	return b.String()
}

// linStep is the model's step: the states that in, answered out, may lead
// s to (none: the answer is impossible).
func linStep(s linState, in linInput, out linOutput) []linState {
	if out.Unknown || s.unknownLatest() {
		return stepUncertain(s, in, out) // linearizability_unknown_test.go
	}
	return stepKnown(s, in, out)
}

// stepKnown is linStep for an answer that arrived, from a state whose
// latest lease's token is known.
func stepKnown(s linState, in linInput, out linOutput) []linState {
	if in.Part == linTokens {
		if in.Token <= s.LastToken {
			return nil
		}
		s.LastToken = in.Token
		return []linState{s}
	}
	if s.Now > in.To {
		// Something ordered before this call was decided after its answer.
		return nil
	}
	c := in.Conf
	switch in.Kind {
	case linGrant:
		return stepGrant(s, c, in)
	case linHeartbeat, linResult, linStart:
		if out.Unauthorized {
			// Sessions die with a revoke or a restart, never otherwise.
			if s.Epoch > in.Epoch {
				return []linState{s}
			}
			return nil
		}
		switch in.Kind {
		case linHeartbeat:
			return stepHeartbeat(s, c, in, out)
		case linStart:
			return stepStart(s, c, in, out)
		}
		return stepResult(s, c, in, out)
	case linRelease:
		return stepRelease(s, c, in)
	case linLookup:
		// A read: it decides nothing, so it moves no clock; a sweep it
		// sees ran before its answer.
		var next []linState
		for _, s2 := range settle(s, c, in.To) {
			v := lookupView(s2)
			if (v == nil) == (out.Lease == nil) && (v == nil || *v == *out.Lease) {
				next = append(next, s2)
			}
		}
		return next
	case linSweep, linRevoke:
		var next []linState
		for _, t := range s.times(max(s.Now, in.From), in.To) {
			for _, s2 := range settle(s, c, t) {
				s3 := s2.clone()
				s3.Now = t
				var expired []int64
				if s3.active() {
					l := s3.Leases[s3.latest()]
					switch {
					case in.Kind == linRevoke:
						s3.lose(c, state.LeaseRevoked, t)
					case l.Expires <= t:
						expired = []int64{l.Token}
						s3.lose(c, state.LeaseExpired, t)
					}
				}
				if in.Kind == linRevoke {
					s3.Epoch++
				} else if !sameSet(expired, out.Expired) {
					continue
				}
				next = append(next, s3)
			}
		}
		return next
	case linRestart:
		// Nothing of the task changes, but every session ends.
		s = s.clone()
		s.Epoch++
		return []linState{s}
	}
	return nil
}

// stepGrant: a new lease is granted only to a worker of the current epoch,
// for a queued task whose latest lease has ended (expired leases only by a
// sweep), whose retry is due, with the next attempt number, a token above
// every earlier one, and expires_at = grant time + min(ttl, timeout +
// grace) for a grant time inside the call. A prefetched lease is granted
// by the same rules but unstarted: expires_at = grant time + ttl, and no
// hard expiry until its start (stepStart). Its attempt number is spent
// even if it never starts: a number is never granted twice, so two
// processes never run one attempt's folders. A grant may take over
// another worker's unstarted lease of the task: released at no cost, at
// the grant's time (a claim with a free slot that found nothing queued).
func stepGrant(s linState, c linTaskConf, in linInput) []linState {
	g := in.ExpiresAt - min(c.TTL, c.Limit)
	if in.Prefetched {
		g = in.ExpiresAt - c.TTL
	}
	if g < max(s.Now, in.From) || g > in.To {
		return nil
	}
	var next []linState
	for _, s2 := range settle(s, c, g) {
		if i := s2.latest(); s2.active() && s2.Leases[i].Unstarted && s2.Leases[i].Worker != in.Worker && s2.Leases[i].Expires > g {
			// A claim takes over another worker's unstarted lease: it is
			// released at no cost, in the claim's write, then granted.
			s2 = s2.clone()
			s2.Leases[i].Status = state.LeaseReleased
			s2.Status, s2.NotBefore = state.TaskQueued, 0
		}
		if in.Epoch != s2.Epoch || s2.Status != state.TaskQueued || g < s2.NotBefore || in.Attempt != s2.Attempts+1 {
			continue
		}
		if i := s2.latest(); i >= 0 && (s2.active() || s2.Leases[i].Token >= in.Token) {
			continue
		}
		s3 := s2.clone()
		if i := s3.latest(); i >= 0 {
			// Only the latest lease's times can still be seen (a
			// lookup): forget the others', so that states that differ
			// only there become one.
			l := &s3.Leases[i]
			l.Granted, l.Expires, l.Hard = 0, 0, 0
		}
		l := linLease{Token: in.Token, Worker: in.Worker, Attempt: in.Attempt,
			Granted: g, Expires: in.ExpiresAt, Hard: g + c.Limit, Status: state.LeaseActive}
		if in.Prefetched {
			l.Hard, l.Unstarted = linUnbounded, true
		}
		s3.Leases = append(s3.Leases, l)
		s3.Status, s3.Attempts, s3.NotBefore, s3.Now = state.TaskRunning, s3.Attempts+1, 0, g
		next = append(next, s3)
	}
	return next
}

// stepHeartbeat: a heartbeat at time t renews the worker's active lease
// when it has not expired yet (expires = max(expires, min(t + ttl, hard)))
// and answers cancel for every reported token that is not the task's
// active, unexpired lease. When it may release a lease the worker did not
// report (in.Release), it does that in a second step, linRelease, with the
// same time: the coordinator renews and releases in two transactions, and a
// reader may see the lease between them.
func stepHeartbeat(s linState, c linTaskConf, in linInput, out linOutput) []linState {
	lo := max(s.Now, in.From)
	var ts []int64
	if i := s.latest(); s.active() && s.Leases[i].Worker == in.Worker {
		// Every time in the interval renews to another expiry.
		step := max(c.Step, 1)
		for t := lo; t <= in.To; t += step {
			ts = append(ts, t)
		}
	} else if lo <= in.To {
		ts = []int64{lo}
	}
	var next []linState
	for _, t := range ts {
		for _, s2 := range settle(s, c, t) {
			s3 := s2.clone()
			s3.Now = t
			var live int64 = -1
			if i := s3.latest(); s3.active() && s3.Leases[i].Worker == in.Worker {
				l := &s3.Leases[i]
				if l.Expires > t {
					l.Expires = max(l.Expires, min(t+c.TTL, l.Hard))
					live = l.Token
				}
			}
			var cancel []int64
			for _, tok := range in.Reported {
				if tok != live {
					cancel = append(cancel, tok)
				}
			}
			if !sameSet(cancel, out.Cancelled) {
				continue
			}
			switch {
			case in.Release && in.Atomic:
				s3.release(c, in.Worker, in.Reported, t)
			case in.Release:
				if slices.ContainsFunc(s3.Due, func(d linDue) bool { return d.Worker == in.Worker }) {
					continue
				}
				i, _ := slices.BinarySearchFunc(s3.Due, in.Worker, func(d linDue, w string) int { return strings.Compare(d.Worker, w) })
				s3.Due = slices.Insert(s3.Due, i, linDue{Worker: in.Worker, At: t})
			}
			next = append(next, s3)
		}
	}
	return next
}

// stepStart: a worker's report (with a result or a heartbeat) that it
// started the attempt of its prefetched lease in.Token, decided at a time
// t in the call. When that lease is the task's latest, active and
// unexpired at t, and the worker's, the start is taken: an unstarted lease
// starts, its attempt counting from t (hard expiry t + timeout + grace,
// expiry min(max(expiry, t + ttl), hard)); one started already is left as
// it is. Any other start is refused: its token is answered cancelled, and
// the worker stops the attempt.
func stepStart(s linState, c linTaskConf, in linInput, out linOutput) []linState {
	lo := max(s.Now, in.From)
	ts := []int64{lo}
	if i := s.latest(); s.active() && s.Leases[i].Token == in.Token && s.Leases[i].Unstarted {
		// Every time in the interval starts it with other expiries.
		ts = nil
		for t := lo; t <= in.To; t += max(c.Step, 1) {
			ts = append(ts, t)
		}
	}
	var next []linState
	for _, t := range ts {
		if t > in.To {
			break
		}
		for _, s2 := range settle(s, c, t) {
			s3 := s2.clone()
			s3.Now = t
			var cancel []int64
			if i := s3.latest(); s3.active() && s3.Leases[i].Token == in.Token && s3.Leases[i].Worker == in.Worker && s3.Leases[i].Expires > t {
				if l := &s3.Leases[i]; l.Unstarted {
					l.Unstarted, l.Hard = false, t+c.Limit
					l.Expires = min(max(l.Expires, t+c.TTL), l.Hard)
				}
			} else {
				cancel = []int64{in.Token}
			}
			if !sameSet(cancel, out.Cancelled) {
				continue
			}
			next = append(next, s3)
		}
	}
	return next
}

// stepRelease is a heartbeat's second step: at the time of its first, it
// releases the worker's active lease (no budget spent, the task queued
// again) when the heartbeat did not report it and it was granted more than
// two heartbeat intervals before.
func stepRelease(s linState, c linTaskConf, in linInput) []linState {
	d := slices.IndexFunc(s.Due, func(d linDue) bool { return d.Worker == in.Worker })
	if d < 0 {
		return nil
	}
	s = s.clone()
	t := s.Due[d].At
	s.Due = slices.Delete(s.Due, d, d+1)
	s.release(c, in.Worker, in.Reported, t)
	return []linState{s}
}

// release releases the worker's active lease when the heartbeat at t did
// not report it and it was granted more than two intervals before t.
func (s *linState) release(c linTaskConf, worker string, reported []int64, t int64) {
	if i := s.latest(); s.active() && s.Leases[i].Worker == worker &&
		!slices.Contains(reported, s.Leases[i].Token) && t-s.Leases[i].Granted > 2*c.Interval {
		s.Leases[i].Status = state.LeaseReleased
		s.Status, s.NotBefore = state.TaskQueued, 0
	}
}

// stepResult: a replay (same key, token and worker) of a recorded
// decision gets it with duplicate set and changes nothing; otherwise the
// result is judged at a time t in the call: unknown_lease (no lease of the
// task has the token, or another attempt is named), wrong_worker,
// stale_token (a newer lease exists), lease_expired (the latest lease,
// but ended or t at or past its expiry), else accepted, which completes
// the lease and settles the task by the result's class. Of a worker's late
// results of one lease (stale_token, lease_expired) only the first is
// recorded; whether a rejection for a lease not its own was is unsure
// (see linDecision.Unsure).
func stepResult(s linState, c linTaskConf, in linInput, out linOutput) []linState {
	d, seen := s.decision(in.Key, in.Token, in.Worker)
	if seen {
		if out.Duplicate && out.Decision == d.Decision && out.Reason == d.Reason {
			return []linState{s}
		}
		if !d.Unsure {
			return nil
		}
	}
	if out.Duplicate {
		return nil
	}
	var next []linState
	for _, t := range s.times(max(s.Now, in.From), in.To) {
		for _, s2 := range settle(s, c, t) {
			idx := slices.IndexFunc(s2.Leases, func(l linLease) bool { return l.Token == in.Token })
			decision, reason := protocol.DecisionRejected, ""
			switch {
			case idx < 0 || (in.Attempt != 0 && in.Attempt != s2.Leases[idx].Attempt):
				reason = protocol.ReasonUnknownLease
			case s2.Leases[idx].Worker != in.Worker:
				reason = protocol.ReasonWrongWorker
			case idx != s2.latest():
				reason = protocol.ReasonStaleToken
			case s2.Leases[idx].Status != state.LeaseActive || t >= s2.Leases[idx].Expires:
				reason = protocol.ReasonLeaseExpired
			default:
				decision = protocol.DecisionAccepted
			}
			if out.Decision != decision || out.Reason != reason {
				continue
			}
			s3 := s2.clone()
			s3.Now = t
			switch {
			case seen && decision == protocol.DecisionRejected: // an unsure rejection judged afresh
			case seen: // a token granted since: the acceptance replaces it
				s3.Decisions = slices.DeleteFunc(s3.Decisions, func(x linDecision) bool { return x == d })
				s3.record(linDecision{Key: in.Key, Token: in.Token, Worker: in.Worker, Decision: decision, Reason: reason})
			case reason == protocol.ReasonStaleToken || reason == protocol.ReasonLeaseExpired:
				if !s3.lateRecorded(in.Token, in.Worker) {
					s3.record(linDecision{Key: in.Key, Token: in.Token, Worker: in.Worker, Decision: decision, Reason: reason})
				}
			default:
				s3.record(linDecision{Key: in.Key, Token: in.Token, Worker: in.Worker, Decision: decision, Reason: reason,
					Unsure: decision == protocol.DecisionRejected})
			}
			if decision == protocol.DecisionAccepted {
				// A result is its lease's start too: the lease ends started.
				s3.Leases[idx].Status, s3.Leases[idx].Unstarted = state.LeaseCompleted, false
				switch state.FailureClass(in.Class) {
				case "":
					s3.Status = state.TaskSucceeded
				case state.FailureClassFailure:
					s3.FailuresUsed++
					if s3.FailuresUsed >= c.MaxAttempts {
						s3.Status = state.TaskFailed
					} else {
						s3.Status, s3.NotBefore = state.TaskQueued, t+c.backoff(s3.FailuresUsed)
					}
				case state.FailureClassLost:
					s3.LostUsed++
					if s3.LostUsed >= c.MaxLost {
						s3.Status = state.TaskFailed
					} else {
						s3.Status, s3.NotBefore = state.TaskQueued, t
					}
				default: // refused
					s3.Status = state.TaskFailed
				}
			}
			next = append(next, s3)
		}
	}
	return next
}

// lookupView is what the operator's lookup shows of s: its latest lease.
func lookupView(s linState) *linLeaseView {
	i := s.latest()
	if i < 0 {
		return nil
	}
	l := s.Leases[i]
	return &linLeaseView{Token: l.Token, Worker: l.Worker, Attempt: l.Attempt, Status: l.Status, Granted: l.Granted, Expires: l.Expires, Unstarted: l.Unstarted}
}

// sameSet reports whether a and b hold the same tokens.
func sameSet(a, b []int64) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// describeLinOp renders an operation for logs and porcupine's visualization.
func describeLinOp(in linInput, out linOutput) string {
	answered := !out.Unauthorized && !out.Unknown
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%d,%d]", in.Kind, in.From, in.To)
	if in.Worker != "" {
		fmt.Fprintf(&b, " %s/e%d", in.Worker, in.Epoch)
	}
	switch in.Kind {
	case linGrant:
		if out.Unknown {
			b.WriteString(" (a claim: this task or another, token unseen)")
		} else {
			fmt.Fprintf(&b, " token %d attempt %d expires %d", in.Token, in.Attempt, in.ExpiresAt)
		}
		if in.Prefetched {
			b.WriteString(" prefetched")
		}
	case linStart:
		fmt.Fprintf(&b, " token %d", in.Token)
		if answered {
			fmt.Fprintf(&b, " → cancel %v", out.Cancelled)
		}
	case linHeartbeat, linRelease:
		fmt.Fprintf(&b, " reports %v", in.Reported)
		if in.Kind == linHeartbeat && answered {
			fmt.Fprintf(&b, " → cancel %v", out.Cancelled)
		}
	case linResult:
		fmt.Fprintf(&b, " token %d attempt %d key %s class %q", in.Token, in.Attempt, in.Key, in.Class)
		if answered {
			fmt.Fprintf(&b, " → %s %s", out.Decision, out.Reason)
			if out.Duplicate {
				b.WriteString(" (duplicate)")
			}
		}
	case linLookup:
		switch {
		case !answered:
		case out.Lease == nil:
			b.WriteString(" → none")
		default:
			l := out.Lease
			fmt.Fprintf(&b, " → lease %d %s attempt %d %s granted %d expires %d", l.Token, l.Worker, l.Attempt, l.Status, l.Granted, l.Expires)
			if l.Unstarted {
				b.WriteString(" unstarted")
			}
		}
	case linSweep:
		if answered {
			fmt.Fprintf(&b, " → expired %v", out.Expired)
		}
	}
	if out.Unauthorized {
		b.WriteString(" → 401")
	}
	if out.Unknown {
		b.WriteString(" → unknown: the coordinator was killed")
	}
	return b.String()
}

// linTestOp is an operation of a hand-made history: of task.a unless in
// names its partition, with conf unless in has its own, whose call spans
// [from, to] (the real times are the fake ones).
func linTestOp(conf linTaskConf, in linInput, from, to int64, out linOutput) porcupine.Operation {
	if in.Part == "" {
		in.Part = "task.a"
	}
	if in.Conf == (linTaskConf{}) {
		in.Conf = conf
	}
	in.From, in.To = from, to
	return porcupine.Operation{Input: in, Call: from, Output: out, Return: to}
}

// TestLinearizabilityModel checks the model on small hand-made histories:
// legal ones, among them both answers to a result whose call spans its
// lease's expiry, and doctored ones that break a rule of docs/design.md §3,
// which porcupine must report Illegal.
func TestLinearizabilityModel(t *testing.T) {
	t.Parallel()
	conf := linTaskConf{MaxAttempts: 2, MaxLost: 2, TTL: 100, Limit: 1000, Interval: 25, Backoff: 20, MaxBackoff: 80, Step: 10}
	short := conf
	short.Limit = 150 // timeout + grace: no renewal past 150 ms after the grant
	// op is an operation of task.a (or, with part linTokens, of the
	// counter) whose call spans fake times [from, to].
	op := func(in linInput, from, to int64, out linOutput) porcupine.Operation {
		return linTestOp(conf, in, from, to, out)
	}
	grant := func(worker string, epoch int, token int64, attempt int, g int64) linInput {
		return linInput{Kind: linGrant, Worker: worker, Epoch: epoch, Token: token, Attempt: attempt, ExpiresAt: g + conf.TTL}
	}
	prefetch := func(worker string, epoch int, token int64, attempt int, g int64) linInput {
		in := grant(worker, epoch, token, attempt, g)
		in.Prefetched = true
		return in
	}
	start := func(worker string, token int64) linInput {
		return linInput{Kind: linStart, Worker: worker, Token: token}
	}
	once := conf
	once.MaxLost = 1
	result := func(worker string, token int64, attempt int, key, class string) linInput {
		return linInput{Kind: linResult, Worker: worker, Token: token, Attempt: attempt, Key: key, Class: class}
	}
	hb := func(worker string, reported ...int64) linInput {
		return linInput{Kind: linHeartbeat, Worker: worker, Reported: reported}
	}
	// hbRel is a heartbeat that may release what it does not report:
	// its two steps.
	hbRel := func(from, to int64, out linOutput, worker string, reported ...int64) []porcupine.Operation {
		in := hb(worker, reported...)
		in.Release = true
		rel := in
		rel.Kind = linRelease
		return []porcupine.Operation{op(in, from, to, out), op(rel, from, to, linOutput{})}
	}
	accepted := linOutput{Decision: protocol.DecisionAccepted}
	rejected := func(reason string) linOutput { return linOutput{Decision: protocol.DecisionRejected, Reason: reason} }
	lookup := func(token int64, worker string, attempt int, status state.LeaseStatus, granted, expires int64) linOutput {
		return linOutput{Lease: &linLeaseView{Token: token, Worker: worker, Attempt: attempt, Status: status, Granted: granted, Expires: expires}}
	}
	tests := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"renewed lease, accepted result", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(hb("w1", 1), 50, 50, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 120, 120, accepted),
			op(linInput{Kind: linLookup}, 130, 130, lookup(1, "w1", 1, state.LeaseCompleted, 0, 150)),
		}, true},
		{"result across the expiry, accepted", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 90, 110, accepted),
		}, true},
		{"result across the expiry, rejected", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 90, 110, rejected(protocol.ReasonLeaseExpired)),
		}, true},
		{"heartbeat across the expiry, renewed or not", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(hb("w1", 1), 90, 110, linOutput{}),
			op(linInput{Kind: linLookup}, 120, 120, lookup(1, "w1", 1, state.LeaseActive, 0, 190)),
		}, true},
		{"expired lease swept unseen, then granted again", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(grant("w2", 0, 5, 2, 150), 140, 160, linOutput{}),
			op(linInput{Kind: linLookup}, 170, 170, lookup(5, "w2", 2, state.LeaseActive, 150, 250)),
		}, true},
		{"unswept expired lease looks active", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linLookup}, 150, 150, lookup(1, "w1", 1, state.LeaseActive, 0, 100)),
			op(linInput{Kind: linSweep}, 160, 160, linOutput{Expired: []int64{1}}),
			op(linInput{Kind: linLookup}, 170, 170, lookup(1, "w1", 1, state.LeaseExpired, 0, 100)),
		}, true},
		{"revoke ends the lease at once", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linRevoke}, 10, 10, linOutput{}),
			op(hb("w1", 1), 20, 20, linOutput{Unauthorized: true}),
			op(grant("w2", 1, 2, 2, 30), 30, 30, linOutput{}),
			op(result("w2", 1, 1, "k-w2", ""), 40, 40, rejected(protocol.ReasonWrongWorker)),
		}, true},
		{"replay gets the first decision", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", "failure"), 10, 10, accepted),
			op(result("w1", 1, 1, "k1", "failure"), 20, 20, linOutput{Decision: protocol.DecisionAccepted, Duplicate: true}),
			op(grant("w1", 0, 2, 2, 30), 30, 30, linOutput{}),
		}, true},
		{"a late result of one lease recorded once: a later key is judged afresh", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "late-1", ""), 150, 150, rejected(protocol.ReasonLeaseExpired)),
			op(result("w1", 1, 1, "late-2", ""), 160, 160, rejected(protocol.ReasonLeaseExpired)),
			op(result("w1", 1, 1, "late-1", ""), 170, 170, linOutput{Decision: protocol.DecisionRejected, Reason: protocol.ReasonLeaseExpired, Duplicate: true}),
			op(result("w1", 1, 1, "late-2", ""), 180, 180, rejected(protocol.ReasonLeaseExpired)),
		}, true},
		{"a rejection for a lease not its own, recorded or not", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w2", 1, 1, "k1", ""), 10, 10, rejected(protocol.ReasonWrongWorker)),
			op(result("w2", 1, 1, "k2", ""), 20, 20, rejected(protocol.ReasonWrongWorker)),
			op(result("w2", 1, 1, "k1", ""), 30, 30, linOutput{Decision: protocol.DecisionRejected, Reason: protocol.ReasonWrongWorker, Duplicate: true}),
			op(result("w2", 1, 1, "k2", ""), 40, 40, rejected(protocol.ReasonWrongWorker)),
		}, true},
		{"unreported lease released", slices.Concat(
			[]porcupine.Operation{op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{})},
			hbRel(60, 60, linOutput{}, "w1"),
			[]porcupine.Operation{
				op(grant("w2", 0, 2, 2, 70), 70, 70, linOutput{}),
				op(linInput{Kind: linLookup}, 80, 80, lookup(2, "w2", 2, state.LeaseActive, 70, 170)),
			}), true},
		{"a lookup between a heartbeat's renewal and its release", slices.Concat(
			[]porcupine.Operation{op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{})},
			hbRel(60, 70, linOutput{}, "w1"),
			[]porcupine.Operation{
				op(linInput{Kind: linLookup}, 65, 65, lookup(1, "w1", 1, state.LeaseActive, 0, 160)),
				op(grant("w2", 0, 2, 2, 80), 80, 80, linOutput{}),
			}), true},
		{"restart ends sessions, not leases", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linRestart}, 10, 10, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 20, 20, linOutput{Unauthorized: true}),
			op(linInput{Kind: linLookup}, 30, 30, lookup(1, "w1", 1, state.LeaseActive, 0, 100)),
		}, true},

		{"a prefetched lease expired unstarted spends no budget", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linSweep}, 150, 150, linOutput{Expired: []int64{1}}),
			op(grant("w2", 0, 2, 2, 160), 160, 160, linOutput{}),
			op(linInput{Kind: linSweep}, 300, 300, linOutput{Expired: []int64{2}}),
			op(grant("w2", 0, 3, 3, 310), 310, 310, linOutput{}),
		}, true},
		{"a prefetched lease revoked unstarted spends no budget", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: once, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100, Prefetched: true}, 0, 0, linOutput{}),
			op(linInput{Kind: linRevoke, Conf: once}, 10, 10, linOutput{}),
			op(linInput{Kind: linGrant, Conf: once, Worker: "w2", Epoch: 1, Token: 2, Attempt: 2, ExpiresAt: 120}, 20, 20, linOutput{}),
		}, true},
		{"a prefetched lease's timeout counts from its start", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: short, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100, Prefetched: true}, 0, 0, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 90, 90, linOutput{}),
			op(linInput{Kind: linStart, Conf: short, Worker: "w1", Token: 1}, 180, 180, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 270, 270, linOutput{}),
			op(linInput{Kind: linLookup, Conf: short}, 275, 275, lookup(1, "w1", 1, state.LeaseActive, 0, 330)),
			op(linInput{Kind: linResult, Conf: short, Worker: "w1", Token: 1, Attempt: 1, Key: "k1"}, 320, 320, accepted),
		}, true},
		{"a lookup shows an unstarted lease, then its start", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linLookup}, 5, 5, linOutput{Lease: &linLeaseView{Token: 1, Worker: "w1", Attempt: 1, Status: state.LeaseActive, Granted: 0, Expires: 100, Unstarted: true}}),
			op(start("w1", 1), 10, 10, linOutput{}),
			op(start("w1", 1), 20, 20, linOutput{}),
			op(linInput{Kind: linLookup}, 25, 25, lookup(1, "w1", 1, state.LeaseActive, 0, 110)),
		}, true},
		{"a start after its lease expired is refused", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w1", 1), 150, 150, linOutput{Cancelled: []int64{1}}),
			op(grant("w2", 0, 2, 2, 160), 160, 160, linOutput{}),
			op(start("w1", 1), 170, 170, linOutput{Cancelled: []int64{1}}),
		}, true},
		{"a claim takes over another worker's unstarted lease", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(grant("w2", 0, 2, 2, 10), 10, 10, linOutput{}),
			op(start("w1", 1), 20, 20, linOutput{Cancelled: []int64{1}}),
			op(linInput{Kind: linLookup}, 25, 25, lookup(2, "w2", 2, state.LeaseActive, 10, 110)),
		}, true},
		{"a result of an unstarted lease is its start", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 50, 50, accepted),
		}, true},

		{"two accepted results for one lease", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 10, 10, accepted),
			op(result("w1", 1, 1, "k2", ""), 20, 20, accepted),
		}, false},
		{"two concurrent accepted results for one lease", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", "failure"), 10, 20, accepted),
			op(result("w1", 1, 1, "k2", "failure"), 10, 20, accepted),
		}, false},
		{"a lookup between a heartbeat's renewal and its release, heartbeats atomic", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linHeartbeat, Worker: "w1", Release: true, Atomic: true}, 60, 70, linOutput{}),
			op(linInput{Kind: linLookup}, 65, 65, lookup(1, "w1", 1, state.LeaseActive, 0, 160)),
			op(grant("w2", 0, 2, 2, 80), 80, 80, linOutput{}),
		}, false},
		{"a reported lease released", slices.Concat(
			[]porcupine.Operation{op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{})},
			hbRel(60, 60, linOutput{}, "w1", 1),
			[]porcupine.Operation{op(grant("w2", 0, 2, 2, 70), 70, 70, linOutput{})}), false},
		{"a young unreported lease released", slices.Concat(
			[]porcupine.Operation{op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{})},
			hbRel(40, 40, linOutput{}, "w1"),
			[]porcupine.Operation{op(grant("w2", 0, 2, 2, 45), 45, 45, linOutput{})}), false},
		{"second active lease", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(grant("w2", 0, 2, 2, 50), 50, 50, linOutput{}),
		}, false},
		{"token goes backwards", []porcupine.Operation{
			op(linInput{Part: linTokens, Kind: linGrant, Token: 5}, 0, 0, linOutput{}),
			op(linInput{Part: linTokens, Kind: linGrant, Token: 3}, 10, 10, linOutput{}),
		}, false},
		{"token reused", []porcupine.Operation{
			op(linInput{Part: linTokens, Kind: linGrant, Token: 5}, 0, 10, linOutput{}),
			op(linInput{Part: linTokens, Kind: linGrant, Token: 5}, 0, 10, linOutput{}),
		}, false},
		{"token of a later lease of the task lower", []porcupine.Operation{
			op(grant("w1", 0, 7, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 7, 1, "k1", "lost"), 10, 10, accepted),
			op(grant("w1", 0, 6, 2, 20), 20, 20, linOutput{}),
		}, false},
		{"accepted well after expiry", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 150, 160, accepted),
		}, false},
		{"accepted after a renewal capped by the hard expiry", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: short, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100}, 0, 0, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 90, 90, linOutput{}),
			op(linInput{Kind: linResult, Conf: short, Worker: "w1", Token: 1, Attempt: 1, Key: "k1"}, 160, 160, accepted),
		}, false},
		{"rejected although current and unexpired", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 10, 10, rejected(protocol.ReasonLeaseExpired)),
		}, false},
		{"accepted from another worker", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w2", 1, 1, "k-w2", ""), 10, 10, accepted),
		}, false},
		{"accepted for a stale token", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", "lost"), 10, 10, accepted),
			op(grant("w1", 0, 2, 2, 20), 20, 20, linOutput{}),
			op(result("w1", 1, 1, "k1b", ""), 30, 30, accepted),
		}, false},
		{"accepted after a revoke", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linRevoke}, 10, 10, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 20, 20, accepted),
		}, false},
		{"grant after a revoke to a worker of before", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linRevoke}, 10, 10, linOutput{}),
			op(grant("w1", 0, 2, 2, 20), 20, 20, linOutput{}),
		}, false},
		{"a second late result of one lease replayed as recorded", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "late-1", ""), 150, 150, rejected(protocol.ReasonLeaseExpired)),
			op(result("w1", 1, 1, "late-2", ""), 160, 160, rejected(protocol.ReasonLeaseExpired)),
			op(result("w1", 1, 1, "late-2", ""), 170, 170, linOutput{Decision: protocol.DecisionRejected, Reason: protocol.ReasonLeaseExpired, Duplicate: true}),
		}, false},
		{"a rejection for a lease not its own replayed as another", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w2", 1, 1, "k1", ""), 10, 10, rejected(protocol.ReasonWrongWorker)),
			op(result("w2", 1, 1, "k1", ""), 20, 20, linOutput{Decision: protocol.DecisionRejected, Reason: protocol.ReasonStaleToken, Duplicate: true}),
		}, false},
		{"replay answered differently", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 10, 10, accepted),
			op(result("w1", 1, 1, "k1", ""), 20, 20, linOutput{Decision: protocol.DecisionRejected, Reason: protocol.ReasonLeaseExpired, Duplicate: true}),
		}, false},
		{"first post answered as a duplicate", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 10, 10, linOutput{Decision: protocol.DecisionAccepted, Duplicate: true}),
		}, false},
		{"grant before the failure's backoff", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", "failure"), 10, 10, accepted),
			op(grant("w1", 0, 2, 2, 20), 20, 20, linOutput{}),
		}, false},
		{"grant after success", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", ""), 10, 10, accepted),
			op(grant("w1", 0, 2, 2, 200), 200, 200, linOutput{}),
		}, false},
		{"grant after the lost budget is spent", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(grant("w1", 0, 2, 2, 100), 100, 100, linOutput{}),
			op(grant("w1", 0, 3, 3, 200), 200, 200, linOutput{}),
		}, false},
		{"attempt number skipped", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(result("w1", 1, 1, "k1", "lost"), 10, 10, accepted),
			op(grant("w1", 0, 2, 3, 20), 20, 20, linOutput{}),
		}, false},
		{"grant outside its call", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 40), 0, 10, linOutput{}),
		}, false},
		{"heartbeat keeps an expired lease", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(hb("w1", 1), 150, 150, linOutput{}),
		}, false},
		{"heartbeat cancels a live lease", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(hb("w1", 1), 50, 50, linOutput{Cancelled: []int64{1}}),
		}, false},
		{"lookup shows a renewal no heartbeat made", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linLookup}, 50, 50, lookup(1, "w1", 1, state.LeaseActive, 0, 130)),
		}, false},
		{"renewal past the hard expiry", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: short, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100}, 0, 0, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 90, 90, linOutput{}),
			op(linInput{Kind: linLookup, Conf: short}, 100, 100, lookup(1, "w1", 1, state.LeaseActive, 0, 190)),
		}, false},
		{"operator sweep leaves an expired lease active", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linSweep}, 150, 150, linOutput{}),
			op(linInput{Kind: linLookup}, 160, 160, lookup(1, "w1", 1, state.LeaseActive, 0, 100)),
		}, false},
		{"a started prefetched lease expired spends budget", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w1", 1), 10, 10, linOutput{}),
			op(linInput{Kind: linSweep}, 150, 150, linOutput{Expired: []int64{1}}),
			op(grant("w2", 0, 2, 2, 160), 160, 160, linOutput{}),
			op(linInput{Kind: linSweep}, 300, 300, linOutput{Expired: []int64{2}}),
			op(grant("w2", 0, 3, 3, 310), 310, 310, linOutput{}),
		}, false},
		{"a revoked lease spends budget unless prefetched", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: once, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100}, 0, 0, linOutput{}),
			op(linInput{Kind: linRevoke, Conf: once}, 10, 10, linOutput{}),
			op(linInput{Kind: linGrant, Conf: once, Worker: "w2", Epoch: 1, Token: 2, Attempt: 2, ExpiresAt: 120}, 20, 20, linOutput{}),
		}, false},
		{"a started prefetched lease accepted past its hard expiry", []porcupine.Operation{
			op(linInput{Kind: linGrant, Conf: short, Worker: "w1", Token: 1, Attempt: 1, ExpiresAt: 100, Prefetched: true}, 0, 0, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 90, 90, linOutput{}),
			op(linInput{Kind: linStart, Conf: short, Worker: "w1", Token: 1}, 180, 180, linOutput{}),
			op(linInput{Kind: linHeartbeat, Conf: short, Worker: "w1", Reported: []int64{1}}, 270, 270, linOutput{}),
			op(linInput{Kind: linResult, Conf: short, Worker: "w1", Token: 1, Attempt: 1, Key: "k1"}, 340, 340, accepted),
		}, false},
		{"a claim takes over a started lease", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w1", 1), 5, 5, linOutput{}),
			op(grant("w2", 0, 2, 2, 10), 10, 10, linOutput{}),
		}, false},
		{"a start taken after its lease expired", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w1", 1), 150, 150, linOutput{}),
		}, false},
		{"a start refused for the worker's live lease", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w1", 1), 10, 10, linOutput{Cancelled: []int64{1}}),
		}, false},
		{"a start of another worker's lease taken", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(start("w2", 1), 10, 10, linOutput{}),
		}, false},
		{"a lookup shows a prefetched lease started that no report started", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linLookup}, 5, 5, lookup(1, "w1", 1, state.LeaseActive, 0, 100)),
		}, false},
		{"an unstarted lease's attempt number granted again", []porcupine.Operation{
			op(prefetch("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(linInput{Kind: linSweep}, 150, 150, linOutput{Expired: []int64{1}}),
			op(grant("w2", 0, 2, 1, 160), 160, 160, linOutput{}),
		}, false},
		{"401 without a revoke or restart", []porcupine.Operation{
			op(grant("w1", 0, 1, 1, 0), 0, 0, linOutput{}),
			op(hb("w1", 1), 10, 10, linOutput{Unauthorized: true}),
		}, false},
	}
	model := linModel
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := porcupine.CheckOperations(model, tc.ops)
			if got != tc.legal {
				for _, o := range tc.ops {
					t.Logf("  %s", describeLinOp(o.Input.(linInput), o.Output.(linOutput)))
				}
				t.Errorf("linearizable = %v, want %v", got, tc.legal)
			}
		})
	}
}
