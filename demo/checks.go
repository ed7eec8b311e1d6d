package demo

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// judge makes the checks of each step. Its methods are pure functions of
// the views before and after a step and of the coordinator's answers, so
// a test can hand them a broken state and see the check fail.
type judge struct {
	start        time.Time
	task         string
	ttl, backoff time.Duration
	maxLost      int
}

// rel renders t as an offset from the start of the fake clock: "t+4s";
// "-" for the zero time.
func (j judge) rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(j.start)
	if d < 0 {
		return "t-" + (-d).String()
	}
	return "t+" + d.String()
}

func check(id string, ok bool, invariant, observed string) Check {
	return Check{ID: id, Invariant: invariant, Observed: observed, OK: ok}
}

// expiry is what a lease's expires_at must be: min(renewed_at + ttl,
// hard_expires_at).
func (j judge) expiry(l LeaseView) time.Time {
	e := l.RenewedAt.Add(j.ttl)
	if l.HardExpiresAt.Before(e) {
		return l.HardExpiresAt
	}
	return e
}

// describeLease renders a lease for an Observed text.
func (j judge) describeLease(token int64, l *LeaseView) string {
	if l == nil {
		return fmt.Sprintf("lease %d is not in the state", token)
	}
	s := fmt.Sprintf("lease %d: attempt %d, worker %s, %s", l.Token, l.Attempt, orWorkerID(l.Worker, l.WorkerID), l.Status)
	if l.Status == state.LeaseActive {
		return s + ", expires " + j.rel(l.ExpiresAt)
	}
	return s + ", ended " + j.rel(l.EndedAt)
}

// describeLeases renders every lease, "no lease" when there is none.
func (j judge) describeLeases(v View) string {
	if len(v.Leases) == 0 {
		return "no lease"
	}
	parts := make([]string, len(v.Leases))
	for i := range v.Leases {
		l := v.Leases[i]
		parts[i] = fmt.Sprintf("lease %d %s", l.Token, l.Status)
	}
	return strings.Join(parts, ", ")
}

func (j judge) describeTask(t TaskView) string {
	return fmt.Sprintf("%s %s, %s", t.Address, t.Status, plural.Count(t.Attempts, "attempt", "attempts"))
}

func (j judge) describeWorker(w WorkerView) string {
	return fmt.Sprintf("worker %s %s, last heartbeat %s", w.Name, w.Status, j.rel(w.LastHeartbeatAt))
}

// orWorkerID names a worker by its story name, or by its id when it is
// none of the story's workers.
func orWorkerID(name, id string) string {
	if name != "" {
		return name
	}
	return id
}

// registerChecks: both workers are active, and nothing is leased yet.
func (j judge) registerChecks(cur View) []Check {
	a, b := cur.worker("A"), cur.worker("B")
	return []Check{
		check("workers_active", a.Status == state.WorkerActive && b.Status == state.WorkerActive,
			"both workers register and are active",
			fmt.Sprintf("worker A %s, worker B %s", a.Status, b.Status)),
		check("no_lease", len(cur.Leases) == 0 && cur.Task.Attempts == 0 && cur.Task.Status == state.TaskQueued,
			"no lease exists before a claim",
			fmt.Sprintf("%s, %s", j.describeTask(cur.Task), j.describeLeases(cur))),
	}
}

// assignChecks: worker A's claim is granted attempt 1 with token 1, the
// only active lease, expiring one ttl after its grant.
func (j judge) assignChecks(cur View, got protocol.Assignment, othersGranted int) []Check {
	l := cur.lease(got.FencingToken)
	first := l != nil && l.Token == 1 && l.Attempt == 1 && l.Worker == "A" && l.Status == state.LeaseActive &&
		got.Attempt == 1 && got.FencingToken == 1 && cur.FencingCounter == 1
	expiryOK := l != nil && l.ExpiresAt.Equal(j.expiry(*l)) && got.ExpiresAt.Equal(l.ExpiresAt)
	expiryText := "no lease"
	if l != nil {
		expiryText = fmt.Sprintf("renewed %s + ttl %s; expires %s", j.rel(l.RenewedAt), j.ttl, j.rel(l.ExpiresAt))
	}
	return []Check{
		check("first_lease", first, "the first grant is attempt 1 with fencing token 1",
			j.describeLease(got.FencingToken, l)),
		check("one_active", len(cur.active()) == 1 && othersGranted == 0,
			"at most one active lease per task (worker B's claim is granted nothing)",
			fmt.Sprintf("%s; worker B's claim was granted %s", plural.Count(len(cur.active()), "active lease", "active leases"), tasksGranted(othersGranted))),
		check("expiry", expiryOK, "a lease expires at min(renewed_at + ttl, hard_expires_at)",
			expiryText),
		check("task_running", cur.Task.Status == state.TaskRunning && cur.Task.Attempts == 1,
			"a task with an active lease is running", j.describeTask(cur.Task)),
	}
}

// renewChecks: the heartbeat at now renewed worker A's lease by a ttl and
// changed nothing else about it.
func (j judge) renewChecks(prev, cur View, token int64, renewed int, now time.Time) []Check {
	before, after := prev.lease(token), cur.lease(token)
	ok := renewed == 1 && before != nil && after != nil && after.RenewedAt.Equal(now) &&
		after.ExpiresAt.Equal(j.expiry(*after)) && after.ExpiresAt.After(before.ExpiresAt)
	obs := fmt.Sprintf("renewed %d; lease %d is not in the state", renewed, token)
	if before != nil && after != nil {
		obs = fmt.Sprintf("renewed %d; lease %d renewed %s, expires %s (was %s)", renewed, token,
			j.rel(after.RenewedAt), j.rel(after.ExpiresAt), j.rel(before.ExpiresAt))
	}
	same := before != nil && after != nil && after.Token == before.Token && after.Attempt == before.Attempt &&
		after.WorkerID == before.WorkerID && after.Status == state.LeaseActive
	return []Check{
		check("renewed", ok, "a heartbeat renews every lease its worker holds, to min(now + ttl, hard_expires_at)", obs),
		check("same_lease", same, "a renewal keeps the lease's token, attempt and holder", j.describeLease(token, after)),
	}
}

// silenceChecks: at now worker A has been silent past its lease's expiry,
// which nothing but the sweep acts on; worker B's heartbeats keep it alive.
func (j judge) silenceChecks(prev, cur View, token int64, now time.Time) []Check {
	l := cur.lease(token)
	a, aBefore, b := cur.worker("A"), prev.worker("A"), cur.worker("B")
	past := l != nil && !l.ExpiresAt.After(now) && a.LastHeartbeatAt.Equal(aBefore.LastHeartbeatAt)
	pastText := fmt.Sprintf("lease %d is not in the state", token)
	if l != nil {
		pastText = fmt.Sprintf("lease %d expires %s, now %s; worker A's last heartbeat %s", token, j.rel(l.ExpiresAt), j.rel(now), j.rel(a.LastHeartbeatAt))
	}
	return []Check{
		check("past_expiry", past, "nothing renews a silent worker's lease", pastText),
		check("until_sweep", l != nil && l.Status == state.LeaseActive && a.Status == state.WorkerActive,
			"a lease past its expiry stays as it is until the sweep ends it",
			fmt.Sprintf("%s; %s", j.describeLease(token, l), j.describeWorker(a))),
		check("b_alive", b.Status == state.WorkerActive && b.LastHeartbeatAt.Add(j.ttl).After(now),
			"heartbeats keep worker B alive", j.describeWorker(b)),
	}
}

// sweepChecks: the sweep at now expired the lease, marked worker A (and
// only A) stale, and queued the task for its next attempt, due at once
// (backoff is for failures of the task itself), without completing it.
func (j judge) sweepChecks(prev, cur View, token int64, now time.Time) []Check {
	l := cur.lease(token)
	a, b := cur.worker("A"), cur.worker("B")
	retryOK := cur.Retry != nil && cur.Retry.NextAttempt == prev.Task.Attempts+1 && cur.Retry.Kind == state.FailureClassLost &&
		cur.Retry.NotBefore.Equal(now) && cur.Retry.ConsumedAt.IsZero()
	retryText := "no retry directive"
	if r := cur.Retry; r != nil {
		retryText = fmt.Sprintf("attempt %d, %s, not before %s", r.NextAttempt, r.Kind, j.rel(r.NotBefore))
		if !r.ConsumedAt.IsZero() {
			retryText += ", consumed " + j.rel(r.ConsumedAt)
		}
	}
	return []Check{
		check("lease_expired", l != nil && l.Status == state.LeaseExpired && l.EndedAt.Equal(now),
			"the sweep expires a lease past its expiry", j.describeLease(token, l)),
		check("worker_stale", a.Status == state.WorkerStale && b.Status == state.WorkerActive,
			"the sweep marks a worker silent past its ttl stale, and only that one",
			fmt.Sprintf("worker A %s (last heartbeat %s, ttl %s), worker B %s", a.Status, j.rel(a.LastHeartbeatAt), j.ttl, b.Status)),
		check("not_done", cur.Task.Status == state.TaskQueued && cur.Task.LostUsed == prev.Task.LostUsed+1,
			"the sweep never completes a task; the lost attempt spends retry.max_lost",
			fmt.Sprintf("%s %s, lost %d of %d", cur.Task.Address, cur.Task.Status, cur.Task.LostUsed, j.maxLost)),
		check("retry", retryOK, "a lost attempt gets a retry directive for the next attempt, due at once (backoff is for failures)", retryText),
		check("no_active", len(cur.active()) == 0, "no lease of the task is active after the expiry",
			plural.Count(len(cur.active()), "active lease", "active leases")),
	}
}

// reassignChecks: worker B's claim at now was granted the next attempt,
// with a token above every token granted before, as the only active lease.
func (j judge) reassignChecks(prev, cur View, got protocol.Assignment, oldToken int64, now time.Time) []Check {
	l := cur.lease(got.FencingToken)
	old := cur.lease(oldToken)
	b := cur.worker("B")
	active := cur.active()
	activeText := make([]string, len(active))
	for i, a := range active {
		activeText[i] = fmt.Sprintf("lease %d", a.Token)
	}
	consumed := cur.Retry != nil && cur.Retry.ConsumedAt.Equal(now)
	consumedText := "no retry directive"
	if cur.Retry != nil {
		consumedText = fmt.Sprintf("attempt %d's directive consumed %s", cur.Retry.NextAttempt, j.rel(cur.Retry.ConsumedAt))
	}
	attempt := 0
	if l != nil {
		attempt = l.Attempt
	}
	return []Check{
		check("token_increases", l != nil && got.FencingToken > prev.FencingCounter && cur.FencingCounter == got.FencingToken,
			"fencing tokens strictly increase",
			fmt.Sprintf("lease %d has token %d; the highest granted before was %d", got.FencingToken, got.FencingToken, prev.FencingCounter)),
		check("attempt_increments", l != nil && attempt == prev.Task.Attempts+1 && cur.Task.Attempts == attempt && got.Attempt == attempt,
			"the retry is the next attempt",
			fmt.Sprintf("attempt %d after attempt %d", attempt, prev.Task.Attempts)),
		check("live_holder", l != nil && l.Worker == "B" && b.Status == state.WorkerActive,
			"the retry goes to a live worker", fmt.Sprintf("%s; %s", j.describeLease(got.FencingToken, l), j.describeWorker(b))),
		check("one_active", len(active) == 1 && active[0].Token == got.FencingToken && old != nil && old.Status == state.LeaseExpired,
			"at most one active lease per task",
			fmt.Sprintf("active: %s; lease %d %s", orNone(strings.Join(activeText, ", ")), oldToken, leaseStatus(old))),
		check("directive_consumed", consumed, "the grant consumes the retry directive", consumedText),
	}
}

// staleResultChecks: worker A's result for its superseded lease was
// rejected as stale_token, recorded, and changed no task or lease.
func (j judge) staleResultChecks(prev, cur View, resp protocol.ResultResponse, token int64) []Check {
	r := cur.result(token)
	recordedText := fmt.Sprintf("no result recorded for lease %d", token)
	if r != nil {
		recordedText = fmt.Sprintf("result for lease %d from worker %s: %s %s", token, r.Worker, r.Decision, r.Reason)
	}
	return []Check{
		check("rejected_stale", resp.Decision == protocol.DecisionRejected && resp.Reason == protocol.ReasonStaleToken && !resp.Duplicate,
			"a result for a superseded lease is rejected as stale_token",
			strings.TrimSpace(resp.Decision+" "+resp.Reason)),
		check("task_unchanged", cur.Task == prev.Task, "a rejected result changes no task", j.describeTask(cur.Task)),
		check("leases_unchanged", reflect.DeepEqual(cur.Leases, prev.Leases), "a rejected result changes no lease", j.describeLeases(cur)),
		check("recorded", r != nil && r.Decision == protocol.DecisionRejected && r.Reason == protocol.ReasonStaleToken && r.Worker == "A",
			"the rejection is recorded with its reason", recordedText),
	}
}

// resultChecks: worker B's result was accepted, completed its lease and
// succeeded the task.
func (j judge) resultChecks(cur View, resp protocol.ResultResponse, token int64, now time.Time) []Check {
	l := cur.lease(token)
	return []Check{
		check("accepted", resp.Decision == protocol.DecisionAccepted && resp.Reason == "" && !resp.Duplicate,
			"the current holder's result is accepted", strings.TrimSpace(resp.Decision+" "+resp.Reason)),
		check("lease_completed", l != nil && l.Status == state.LeaseCompleted && l.EndedAt.Equal(now),
			"an accepted result completes its lease", j.describeLease(token, l)),
		check("task_succeeded", cur.Task.Status == state.TaskSucceeded && l != nil && cur.Task.Attempts == l.Attempt,
			"an accepted result marks the task done", j.describeTask(cur.Task)),
		check("no_active", len(cur.active()) == 0, "no lease of a finished task is active",
			plural.Count(len(cur.active()), "active lease", "active leases")),
	}
}

// returnChecks: worker A's heartbeat at now made it active again, renewed
// nothing (it holds no lease) and changed no lease or task.
func (j judge) returnChecks(prev, cur View, resp protocol.HeartbeatResponse, now time.Time) []Check {
	a := cur.worker("A")
	return []Check{
		check("active_again", a.Status == state.WorkerActive && a.LastHeartbeatAt.Equal(now) && !resp.Drain,
			"a stale worker that heartbeats is active again", fmt.Sprintf("%s; drain %t", j.describeWorker(a), resp.Drain)),
		check("nothing_renewed", resp.Renewed == 0 && a.LeasesHeld == 0,
			"a heartbeat renews only active leases, and worker A holds none",
			fmt.Sprintf("renewed %d; worker A holds %s", resp.Renewed, plural.Count(a.LeasesHeld, "lease", "leases"))),
		check("history_unchanged", cur.Task == prev.Task && reflect.DeepEqual(cur.Leases, prev.Leases),
			"coming back changes no lease and no task",
			fmt.Sprintf("%s; %s", j.describeTask(cur.Task), j.describeLeases(cur))),
	}
}

// tasksGranted renders how many tasks a claim was granted.
func tasksGranted(n int) string {
	if n == 0 {
		return "nothing"
	}
	return plural.Count(n, "task", "tasks")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func leaseStatus(l *LeaseView) string {
	if l == nil {
		return "is not in the state"
	}
	return string(l.Status)
}
