package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/state/lifecycle"
)

// Result decisions and rejection reasons, as stored in the results table
// (the same words as protocol.Decision*/Reason*, docs/design.md §3 rule 3).
const (
	DecisionAccepted = "accepted"
	DecisionRejected = "rejected"

	ReasonStaleToken   = "stale_token"   // a newer lease exists for the task
	ReasonLeaseExpired = "lease_expired" // the task's latest lease, no longer active or past its expiry
	ReasonWrongWorker  = "wrong_worker"  // the lease belongs to another worker
	ReasonUnknownLease = "unknown_lease" // no such lease, or it is not for the named task and attempt
)

// MaxRejectedBodyBytes is how much of a rejected result's body the
// results table keeps (4 KiB); the rest is cut, marked with "…".
const MaxRejectedBodyBytes = 4 << 10

// TaskPolicy is what the state needs to know, beyond the task's row, to
// settle a task when one of its attempts ends. The coordinator supplies it
// from the apply's configuration.
type TaskPolicy struct {
	// Backoff and MaxBackoff shape the delay of a failure's retry:
	// Backoff·2^(k-1) capped at MaxBackoff, where k is the number of
	// failures spent so far, this one included (lifecycle.Backoff); a
	// lost attempt is retried at once. Zero Backoff retries at once.
	Backoff, MaxBackoff time.Duration
	// Dependents are the task's direct dependents among the apply's tasks.
	// When the task succeeds, each one that is pending and whose DependsOn
	// have all succeeded becomes queued.
	Dependents []Dependent
	// Downstream lists every transitive dependent among the apply's tasks.
	// When the task fails for good, each of them that is pending or queued
	// (and has no active lease) is cancelled with the reason
	// "dependency <task> failed".
	Downstream []string
}

// Dependent is a task and the addresses it depends on.
type Dependent struct {
	Address   string
	DependsOn []string
}

// PolicyFunc returns the policy of a task; nil, or a zero TaskPolicy, means
// retry at once and no dependents.
type PolicyFunc func(task string) TaskPolicy

func (f PolicyFunc) of(task string) TaskPolicy {
	if f == nil {
		return TaskPolicy{}
	}
	return f(task)
}

// AttemptOutcome says how an ended attempt settled its task.
type AttemptOutcome struct {
	Task     string
	Attempt  int
	Token    int64
	WorkerID string
	// Class is the attempt's failure class, "" when it succeeded.
	Class FailureClass
	// Status is the task's status afterwards: succeeded, queued (a retry
	// was scheduled) or failed.
	Status TaskStatus
	// Retry is the retry directive written, when Status is queued.
	Retry *RetryDirective
	// Message is the text of the task's event (succeeded, retried or
	// failed); it names the budget spent, e.g.
	// "attempt 2 failed (failure 2 of 3): exit status 1; retry as attempt 3 not before …".
	Message string
	// Queued lists dependents that became queued; Cancelled lists
	// dependents cancelled because the task failed for good.
	Queued, Cancelled []string
	// Unstarted: the lease was a prefetched one that never started; it
	// went back at no cost (Class "", Status queued, no Retry).
	Unstarted bool
}

// taskBudget is what settle reads of a task: its attempts and the budgets
// spent and allowed.
type taskBudget struct {
	Attempts, Failures, Lost, MaxAttempts, MaxLost int
}

// settle settles the task of an attempt that just ended with class ("" =
// success) and error text errMsg: it reads the task's budgets, asks
// lifecycle.Decide what the attempt means for the task, and applies the
// decision: the task's budgets, status and last_error; a retry directive;
// dependents queued or cancelled; and the task's event (succeeded, retried
// or failed). The lease and the attempt row must already be ended by the
// caller. b is the task's budgets as the caller read them in this
// transaction (nil: settle reads them, unless the attempt succeeded).
func (t *Tx) settle(l Lease, class FailureClass, errMsg string, pol TaskPolicy, b *taskBudget, now time.Time) (AttemptOutcome, error) {
	out := AttemptOutcome{Task: l.Task, Attempt: l.Attempt, Token: l.Token, WorkerID: l.WorkerID, Class: class}
	f := lifecycle.Facts{Attempt: l.Attempt, Class: lifecycle.Class(class), Error: errMsg, Now: now,
		Settings: lifecycle.Settings{Backoff: pol.Backoff, MaxBackoff: pol.MaxBackoff}}
	switch {
	case b != nil:
		f.Attempts, f.Spent.Failures, f.Spent.Lost = b.Attempts, b.Failures, b.Lost
		f.Settings.MaxAttempts, f.Settings.MaxLost = b.MaxAttempts, b.MaxLost
	case class == "":
		// A success spends no budget: lifecycle.Decide reads none.
	default:
		err := t.QueryRowContext(t.ctx, `SELECT attempts, failures_used, lost_used, max_attempts, max_lost FROM tasks WHERE address = ?`,
			l.Task).Scan(&f.Attempts, &f.Spent.Failures, &f.Spent.Lost, &f.Settings.MaxAttempts, &f.Settings.MaxLost)
		if err != nil {
			return out, fmt.Errorf("settle task %s: %w", l.Task, err)
		}
	}
	d, err := lifecycle.Decide(f)
	if err != nil {
		return out, invalidf("settle task %s: unknown failure class %q", l.Task, class)
	}
	out.Message = d.Reason
	nowMS := ms(now)
	kind := EventFailed
	switch d.Action {
	case lifecycle.Succeed:
		kind, out.Status = EventSucceeded, TaskSucceeded
		if _, err := t.ExecContext(t.ctx, `UPDATE tasks SET status = 'succeeded', last_error = '', updated_at = ?, finished_at = ?
			WHERE address = ?`, nowMS, nowMS, l.Task); err != nil {
			return out, fmt.Errorf("succeed task %s: %w", l.Task, err)
		}
	case lifecycle.Retry:
		kind, out.Status = EventRetried, TaskQueued
		r, err := writeDirectiveTx(t.ctx, t, RetryDirective{Task: l.Task, NextAttempt: d.Retry.NextAttempt,
			NotBefore: d.Retry.NotBefore, Kind: FailureClass(d.Retry.Kind), Reason: d.Retry.Reason}, now)
		if err != nil {
			return out, err
		}
		out.Retry = &r
		if _, err := t.ExecContext(t.ctx, `UPDATE tasks SET status = 'queued', failures_used = ?, lost_used = ?, last_error = ?,
			updated_at = ? WHERE address = ?`, d.Spent.Failures, d.Spent.Lost, d.LastError, nowMS, l.Task); err != nil {
			return out, fmt.Errorf("requeue task %s: %w", l.Task, err)
		}
	case lifecycle.Fail:
		out.Status = TaskFailed
		if _, err := t.ExecContext(t.ctx, `UPDATE tasks SET status = 'failed', failures_used = ?, lost_used = ?, last_error = ?,
			updated_at = ?, finished_at = ? WHERE address = ?`, d.Spent.Failures, d.Spent.Lost, d.LastError, nowMS, nowMS, l.Task); err != nil {
			return out, fmt.Errorf("fail task %s: %w", l.Task, err)
		}
	}
	if d.PromoteDependants {
		if out.Queued, err = promoteTx(t.ctx, t, pol.Dependents, now); err != nil {
			return out, err
		}
	}
	if d.CancelDependants {
		if out.Cancelled, err = cancelDownstreamTx(t.ctx, t, l.Task, pol.Downstream, now); err != nil {
			return out, err
		}
	}
	if err := appendEvent(t.ctx, t, Event{Kind: kind, Task: l.Task, WorkerID: l.WorkerID, Token: l.Token, Message: out.Message}, now); err != nil {
		return out, err
	}
	return out, nil
}

// cancelDownstreamTx cancels every task of downstream that is pending or
// queued and has no active lease, with reason "dependency <failed> failed".
func cancelDownstreamTx(ctx context.Context, tx *Tx, failed string, downstream []string, now time.Time) ([]string, error) {
	reason := lifecycle.CancelledBy(failed)
	var out []string
	for _, addr := range downstream {
		changed, err := changedRows(tx.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled', last_error = ?, updated_at = ?, finished_at = ?
			WHERE address = ? AND status IN ('pending', 'queued')
			  AND NOT EXISTS (SELECT 1 FROM leases WHERE task = ? AND status = 'active')`, reason, ms(now), ms(now), addr, addr))
		if err != nil {
			return nil, fmt.Errorf("cancel %s: %w", addr, err)
		}
		if changed == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE retry_directives SET consumed_at = ? WHERE task = ? AND consumed_at IS NULL`,
			ms(now), addr); err != nil {
			return nil, fmt.Errorf("cancel %s: %w", addr, err)
		}
		if err := appendEvent(ctx, tx, Event{Kind: EventCancelled, Task: addr, Message: reason}, now); err != nil {
			return nil, err
		}
		out = append(out, addr)
	}
	return out, nil
}

// promoteTx makes each pending dependent whose dependencies have all
// succeeded queued, and returns those it changed.
func promoteTx(ctx context.Context, tx *Tx, deps []Dependent, now time.Time) ([]string, error) {
	var out []string
	for _, d := range deps {
		uniq := map[string]bool{}
		for _, a := range d.DependsOn {
			uniq[a] = true
		}
		list := make([]string, 0, len(uniq))
		for a := range uniq {
			list = append(list, a)
		}
		js, _ := json.Marshal(list) // []string always marshals
		changed, err := changedRows(tx.ExecContext(ctx, `UPDATE tasks SET status = 'queued', updated_at = ?
			WHERE address = ? AND status = 'pending'
			  AND (SELECT count(*) FROM tasks d WHERE d.address IN (SELECT value FROM json_each(?)) AND d.status = 'succeeded') = ?`,
			ms(now), d.Address, string(js), len(list)))
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", d.Address, err)
		}
		if changed == 0 {
			continue
		}
		if err := appendEvent(ctx, tx, Event{Kind: EventQueued, Task: d.Address, Message: lifecycle.Promoted(d.DependsOn)}, now); err != nil {
			return nil, err
		}
		out = append(out, d.Address)
	}
	return out, nil
}

// PromoteReady makes each of deps that is pending, and whose dependencies
// have all succeeded in the state, queued (appending an EventQueued event),
// and returns the addresses it changed. The coordinator calls it at start;
// later promotions happen inside AcceptResult.
func (s *Store) PromoteReady(ctx context.Context, deps []Dependent, now time.Time) ([]string, error) {
	var out []string
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.PromoteReady(deps, now)
		return err
	})
	return out, err
}

// PromoteReady is Store.PromoteReady inside t.
func (t *Tx) PromoteReady(deps []Dependent, now time.Time) ([]string, error) {
	return promoteTx(t.ctx, t, deps, now)
}

// ResultInput is a result posted for a lease (POST /v1/leases/{token}/result).
type ResultInput struct {
	Key      string // idempotency key, non-empty
	Token    int64  // the fencing token the poster names
	Task     string // the task the poster names; "" leaves it to the lease
	Attempt  int    // the attempt the poster names; 0 leaves it to the lease
	WorkerID string // the posting worker
	// Class is "" for success, else failure, lost or refused.
	Class      FailureClass
	ExitCode   *int
	Signal     string
	Error      string
	StdoutPath string
	StderrPath string
	// DefHash, when set, must be the lease's definition hash (else the
	// result is rejected as unknown_lease: it is not about this lease).
	DefHash string
	// Artifacts are the logs and outputs the result binds, by hash.
	Artifacts []Artifact
	// Check, when set, is asked — before Held and anything written —
	// whether the result may settle a lease of task (the coordinator
	// checks its outputs against the task's declared ones); if it answers
	// an error for a result that passed the fencing checks, AcceptResult
	// changes nothing and returns that error (the result is not a
	// decision). Its answer counts only then: a result of no current lease
	// gets its rejection whatever else is wrong with it. It may be asked
	// before the fencing checks, for the task the result names (for a
	// result that names its task and attempt, the common case settled in
	// one statement, which settles it only for a lease of that task), so
	// it must change nothing.
	Check func(task string) error
	// Held, when set, is asked — after the fencing checks and Check
	// passed and before anything is written — which of the artifacts' hashes the
	// store does not hold; if any, AcceptResult changes nothing and fails
	// with a *MissingArtifactsError (the result is not a decision yet).
	Held func(hashes []string) (missing []string, err error)
	// Keep, when set, is asked — inside the transaction, when the fencing
	// checks reject the result — whether the state records the
	// rejection (its row in results and its EventRejected event): false
	// answers it without writing anything (ResultDecision.Unrecorded), so
	// a replay of its key is judged afresh, to a rejection again; note,
	// when not empty, is added to the rejection's Detail and so to its
	// event. Nil records every rejection. The coordinator bounds with it
	// what one worker's rejected results make the state keep.
	Keep func(rej ResultDecision) (keep bool, note string)
	// Body is the request as posted (JSON). The results table keeps it
	// of a rejected result only (at most MaxRejectedBodyBytes of it): an
	// accepted result's is in its attempt, lease and artifacts rows.
	Body []byte
	// Recommendations are the attempt's recommendations, as the
	// coordinator read them. They are recorded, in the same transaction,
	// only when this call accepts the result (whatever its class; not for
	// a duplicate or a rejection), each with its position in the slice as
	// its index: status new, or rejected (with an
	// EventRecommendationRejected event) when rejected at intake — its
	// Reason is set, or it has no type or its input is not a JSON object.
	Recommendations []RecommendationInput
}

// MissingArtifactsError is returned by AcceptResult when a result that
// would be accepted names blobs the store does not hold: upload them and
// post again. Nothing was recorded.
type MissingArtifactsError struct {
	Missing []string // hashes, in the result's order
}

func (e *MissingArtifactsError) Error() string {
	return fmt.Sprintf("the result names %d artifact(s) the coordinator does not hold: upload them first", len(e.Missing))
}

// checkArtifacts validates the artifacts of a result.
func checkArtifacts(as []Artifact) error {
	seen := map[[2]string]bool{}
	for _, a := range as {
		switch {
		case a.Kind != ArtifactLog && a.Kind != ArtifactOutput:
			return invalidf("artifact %q: kind must be log or output, have %q", a.Name, a.Kind)
		case a.Name == "":
			return invalidf("an artifact has no name")
		case !isHexHash(a.SHA256):
			return invalidf("artifact %q: sha256 must be 64 lowercase hex digits", a.Name)
		case a.Size < 0:
			return invalidf("artifact %q: size must not be negative", a.Name)
		case seen[[2]string{a.Kind, a.Name}]:
			return invalidf("artifact %s %q is named twice", a.Kind, a.Name)
		}
		seen[[2]string{a.Kind, a.Name}] = true
	}
	return nil
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ResultDecision answers AcceptResult.
type ResultDecision struct {
	Decision string // DecisionAccepted or DecisionRejected
	Reason   string // a Reason* constant when rejected, else ""
	// Detail explains a rejection in words (e.g. "lease 7 is expired").
	Detail string
	// Task is the task the decision concerns: the lease's when the token
	// names one, else the task the poster named (maybe ""). Unset for
	// duplicates.
	Task string
	// Duplicate is true when the key was seen before: Decision and Reason
	// are the first answer and nothing changed.
	Duplicate bool
	// Unrecorded is true for a rejection ResultInput.Keep did not let the
	// state record: nothing was written.
	Unrecorded bool
	// Outcome is how the task was settled; set only when the result was
	// accepted by this call (not for duplicates).
	Outcome *AttemptOutcome
}

// Result is a row of the results table.
type Result struct {
	Key        string
	Token      int64
	Task       string
	Attempt    int
	WorkerID   string
	Decision   string
	Reason     string
	Body       []byte // a rejected result's request as posted; empty for an accepted one
	ReceivedAt time.Time
}

// AcceptResult decides a posted result in one write transaction (docs/design.md §3
// rules 3 and 4):
//
//   - a key seen before for the same token and worker returns the first
//     decision with Duplicate set, and changes nothing (not even the
//     serial). The same key with another token or worker replays nothing:
//     it is judged afresh and recorded beside the first, so a poster that
//     uses another worker's key cannot turn that worker's real result into
//     a duplicate of its own rejection;
//   - the result is rejected, before any task state changes, unless it
//     names the task's current active, unexpired lease (expires_at > now)
//     with the same worker, attempt and token. Reasons, checked in this
//     order: unknown_lease (no lease with the token, or it is for another
//     task or attempt than a non-empty Task or non-zero Attempt names),
//     wrong_worker, stale_token (a newer lease exists for
//     the task), lease_expired (the latest lease, but ended or past its
//     expiry). The rejection is recorded in results and as an EventRejected
//     event naming task, worker, token and reason, unless in.Keep says
//     otherwise;
//   - an accepted result is recorded, the lease completed, the attempt row
//     ended with the exit code, signal, failure class, error and log paths,
//     and the task settled by its class with pol (see AttemptOutcome):
//     success → succeeded and ready dependents queued; failure → a retry
//     directive (kind failure) while failures_used < max_attempts, else
//     failed; lost → likewise with lost_used and max_lost; refused → failed
//     at once. A task that fails for good cancels its Downstream. Its
//     Recommendations are recorded with it.
//
// Errors: ErrInvalid for an empty key, a token < 1 or an unknown class;
// in.Check's, or a *MissingArtifactsError, for a result that passed the
// fencing checks (nothing changed); database errors otherwise (nothing
// changed).
func (s *Store) AcceptResult(ctx context.Context, in ResultInput, pol PolicyFunc, now time.Time) (ResultDecision, error) {
	var dec ResultDecision
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		dec, err = tx.AcceptResult(in, pol, now)
		return err
	})
	if err != nil {
		return ResultDecision{}, err
	}
	return dec, nil
}

// AcceptResult is Store.AcceptResult inside t. A replay reads the first
// decision and writes nothing, so a group of replays leaves the serial
// alone (see Store.Write).
func (t *Tx) AcceptResult(in ResultInput, pol PolicyFunc, now time.Time) (ResultDecision, error) {
	switch {
	case in.Key == "":
		return ResultDecision{}, invalidf("result for lease %d: idempotency key is empty", in.Token)
	case in.Class != "" && !in.Class.Valid():
		return ResultDecision{}, invalidf("result for lease %d: unknown failure class %q", in.Token, in.Class)
	}
	if err := checkArtifacts(in.Artifacts); err != nil {
		return ResultDecision{}, err
	}
	stored, _ := splitEmptyLogs(in.Artifacts) // the artifacts that need a blob
	if l, ok, err := t.completeFenced(in, stored, now); err != nil || ok {
		if err != nil {
			return ResultDecision{}, err
		}
		return t.accept(in, l, nil, pol.of(l.Task), now, true)
	}
	l, budget, first, rej, err := t.fence(in, now)
	if err != nil {
		return ResultDecision{}, err
	}
	if first != nil {
		return *first, nil
	}
	if rej != nil {
		if in.Keep != nil {
			keep, note := in.Keep(*rej)
			if !keep {
				rej.Unrecorded = true
				return *rej, nil
			}
			if note != "" {
				rej.Detail += " (" + note + ")"
			}
		}
		if err := t.recordRejection(in, *rej, now); err != nil {
			return ResultDecision{}, err
		}
		return *rej, nil
	}
	if err := t.admit(in, l.Task, stored); err != nil {
		return ResultDecision{}, err
	}
	return t.accept(in, l, budget, pol.of(l.Task), now, false)
}

// completeFenced is the common case of AcceptResult in one statement: a
// result that names its task and attempt, binds no artifact but empty logs
// (the blob store is asked only after the fencing checks), that in.Check
// admits, and whose lease passes every check of fence (no decision on its key yet;
// the lease in names, for that task, attempt, definition and worker; no
// newer lease of the task; active and not expired at now) completes its
// lease in the UPDATE whose WHERE makes those checks, and ok is true: the
// caller records the rest of the acceptance. Otherwise nothing changed
// and ok is false: fence decides, in its order (a replay, a rejection, or
// the error of in.Check or in.Held after the fencing checks).
func (t *Tx) completeFenced(in ResultInput, stored []Artifact, now time.Time) (l Lease, ok bool, err error) {
	if in.Task == "" || in.Attempt == 0 || len(stored) > 0 || t.admit(in, in.Task, nil) != nil {
		return Lease{}, false, nil
	}
	// An active lease has no newer one (a task's next lease is granted
	// only once its active one ended, leases_one_active_per_task, and an
	// ended lease never becomes active again, leases_no_reactivation), so
	// status = 'active' makes fence's stale-token check too.
	ok, err = t.guardedUpdate(completeLease+` AND worker_id = ?3 AND task = ?4 AND attempt = ?5 AND expires_at > ?1
		  AND (?6 = '' OR def_hash = ?6)
		  AND NOT EXISTS (SELECT 1 FROM results r WHERE r.idempotency_key = ?7 AND r.token = ?2 AND r.worker_id = ?3)`,
		ms(now), in.Token, in.WorkerID, in.Task, in.Attempt, in.DefHash, in.Key)
	if err != nil {
		return Lease{}, false, fmt.Errorf("result %q: complete lease %d: %w", in.Key, in.Token, err)
	}
	if !ok {
		return Lease{}, false, nil
	}
	return Lease{Token: in.Token, Task: in.Task, DefHash: in.DefHash, WorkerID: in.WorkerID, Attempt: in.Attempt}, true, nil
}

// completeLease completes the active lease ?2 at ?1 (a WHERE may go on
// with AND). A result completes an unstarted lease as started (its
// attempt ran): its hard expiry becomes its expiry.
const completeLease = `UPDATE leases SET status = 'completed', ended_at = ?1,
		hard_expires_at = CASE unstarted WHEN 1 THEN expires_at ELSE hard_expires_at END, unstarted = 0
	WHERE token = ?2 AND status = 'active'`

// admit lets in.Check and in.Held (every artifact of stored, those in
// binds that need a blob, is held) decide whether the result for a lease
// of task may be accepted. It changes nothing.
func (t *Tx) admit(in ResultInput, task string, stored []Artifact) error {
	if in.Check != nil {
		if err := in.Check(task); err != nil {
			return err
		}
	}
	if in.Held != nil && len(stored) > 0 {
		hashes := make([]string, len(stored))
		for i, a := range stored {
			hashes[i] = a.SHA256
		}
		missing, err := in.Held(hashes)
		if err != nil {
			return fmt.Errorf("result %q: checking its artifacts: %w", in.Key, err)
		}
		if len(missing) > 0 {
			return &MissingArtifactsError{Missing: missing}
		}
	}
	return nil
}

// fence reads, in one statement, the first decision on in's key (a
// replay gets it back: first), the lease in names, the task's latest
// token and the task's budgets, and checks that in may settle the lease
// (docs/design.md §3 rule 3): it returns the lease and the budgets, or the
// rejection to record, in the order of the checks AcceptResult lists.
func (t *Tx) fence(in ResultInput, now time.Time) (l Lease, b *taskBudget, first, rej *ResultDecision, err error) {
	reject := func(task, reason, detail string) (Lease, *taskBudget, *ResultDecision, *ResultDecision, error) {
		return Lease{}, nil, nil, &ResultDecision{Decision: DecisionRejected, Reason: reason, Detail: detail, Task: task}, nil
	}
	var decision, reason, task, defHash, worker, status sql.NullString
	var token, attempt, granted, renewed, expires, hard, ended, latest sql.NullInt64
	var attempts, failures, lost, maxAttempts, maxLost sql.NullInt64
	err = t.QueryRowContext(t.ctx, `SELECT r.decision, r.reason,
			l.token, l.task, l.def_hash, l.worker_id, l.attempt, l.status, l.granted_at, l.renewed_at,
			l.expires_at, l.hard_expires_at, l.ended_at,
			(SELECT max(m.token) FROM leases m WHERE m.task = l.task),
			t.attempts, t.failures_used, t.lost_used, t.max_attempts, t.max_lost
		FROM (SELECT 1)
		LEFT JOIN results r ON r.idempotency_key = ?1 AND r.token = ?2 AND r.worker_id = ?3
		LEFT JOIN leases l ON l.token = ?2
		LEFT JOIN tasks t ON t.address = l.task`, in.Key, in.Token, in.WorkerID).Scan(&decision, &reason,
		&token, &task, &defHash, &worker, &attempt, &status, &granted, &renewed, &expires, &hard, &ended, &latest,
		&attempts, &failures, &lost, &maxAttempts, &maxLost)
	if err != nil {
		return Lease{}, nil, nil, nil, fmt.Errorf("result %q: read lease %d: %w", in.Key, in.Token, err)
	}
	if decision.Valid {
		return Lease{}, nil, &ResultDecision{Decision: decision.String, Reason: reason.String, Duplicate: true}, nil, nil
	}
	if !token.Valid {
		return reject(in.Task, ReasonUnknownLease, fmt.Sprintf("no lease has token %d", in.Token))
	}
	l = Lease{Token: token.Int64, Task: task.String, DefHash: defHash.String, WorkerID: worker.String, Attempt: int(attempt.Int64),
		Status: LeaseStatus(status.String), GrantedAt: fromMS(granted.Int64), RenewedAt: fromMS(renewed.Int64),
		ExpiresAt: fromMS(expires.Int64), HardExpiresAt: fromMS(hard.Int64), EndedAt: fromNullMS(ended)}
	if attempts.Valid {
		b = &taskBudget{Attempts: int(attempts.Int64), Failures: int(failures.Int64), Lost: int(lost.Int64),
			MaxAttempts: int(maxAttempts.Int64), MaxLost: int(maxLost.Int64)}
	}
	switch {
	case (in.Task != "" && l.Task != in.Task) || (in.Attempt != 0 && l.Attempt != in.Attempt):
		return reject(in.Task, ReasonUnknownLease, fmt.Sprintf("lease %d is for %s attempt %d, not %s attempt %d",
			l.Token, l.Task, l.Attempt, in.Task, in.Attempt))
	case in.DefHash != "" && in.DefHash != l.DefHash:
		return reject(l.Task, ReasonUnknownLease, fmt.Sprintf("lease %d is for definition %s, not %s",
			l.Token, shortHash(l.DefHash), shortHash(in.DefHash)))
	case l.WorkerID != in.WorkerID:
		return reject(l.Task, ReasonWrongWorker, fmt.Sprintf("lease %d belongs to worker %s, not %s", l.Token, l.WorkerID, in.WorkerID))
	case latest.Int64 > l.Token:
		return reject(l.Task, ReasonStaleToken, fmt.Sprintf("lease %d of %s was superseded by lease %d", l.Token, l.Task, latest.Int64))
	case l.Status != LeaseActive:
		return reject(l.Task, ReasonLeaseExpired, fmt.Sprintf("lease %d is %s", l.Token, l.Status))
	case !now.Before(l.ExpiresAt):
		return reject(l.Task, ReasonLeaseExpired, fmt.Sprintf("lease %d expired at %s", l.Token, l.ExpiresAt.Format(time.RFC3339Nano)))
	}
	return l, b, nil, nil, nil
}

// recordRejection records the rejected result in and its EventRejected
// event.
func (t *Tx) recordRejection(in ResultInput, rej ResultDecision, now time.Time) error {
	body := in.Body
	if len(body) > MaxRejectedBodyBytes {
		// A rejection changes nothing; keeping all of what any poster
		// sent would let rejected posts grow the state without bound.
		body = []byte(strings.ToValidUTF8(string(body[:MaxRejectedBodyBytes]), "") + "…")
	}
	if _, err := t.ExecContext(t.ctx, `INSERT INTO results (idempotency_key, token, task, attempt, worker_id, decision, reason, body, received_at)
		VALUES (?, ?, ?, ?, ?, 'rejected', ?, ?, ?)`, in.Key, in.Token, rej.Task, in.Attempt, in.WorkerID, rej.Reason, string(body), ms(now)); err != nil {
		return fmt.Errorf("record rejected result %q: %w", in.Key, err)
	}
	return appendEvent(t.ctx, t, Event{Kind: EventRejected, Task: rej.Task, WorkerID: in.WorkerID, Token: in.Token,
		Message: rej.Reason + ": " + rej.Detail}, now)
}

// accept records the accepted result in for lease l, once admit let it:
// its artifacts, the result, the lease completed (unless completed: its
// caller did), the attempt ended, the task settled with pol and its
// recommendations.
func (t *Tx) accept(in ResultInput, l Lease, b *taskBudget, pol TaskPolicy, now time.Time, completed bool) (ResultDecision, error) {
	stored, emptyLogs := splitEmptyLogs(in.Artifacts)
	if err := insertArtifactsTx(t, l, stored); err != nil {
		return ResultDecision{}, err
	}
	if _, err := t.ExecContext(t.ctx, `INSERT INTO results (idempotency_key, token, task, attempt, worker_id, decision, reason, body, received_at)
		VALUES (?, ?, ?, ?, ?, 'accepted', NULL, '', ?)`, in.Key, in.Token, l.Task, l.Attempt, in.WorkerID, ms(now)); err != nil {
		return ResultDecision{}, fmt.Errorf("record result %q: %w", in.Key, err)
	}
	if !completed {
		if _, err := t.ExecContext(t.ctx, completeLease, ms(now), l.Token); err != nil {
			return ResultDecision{}, fmt.Errorf("complete lease %d: %w", l.Token, err)
		}
	}
	var exit sql.NullInt64
	if in.ExitCode != nil {
		exit = sql.NullInt64{Int64: int64(*in.ExitCode), Valid: true}
	}
	var fc sql.NullString
	if in.Class != "" {
		fc = sql.NullString{String: string(in.Class), Valid: true}
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE attempts SET ended_at = ?, exit_code = ?, signal = ?, failure_class = ?, error = ?,
			stdout_path = ?, stderr_path = ?, empty_logs = ?
		WHERE fencing_token = ?`, ms(now), exit, in.Signal, fc, in.Error, in.StdoutPath, in.StderrPath, emptyLogs, l.Token); err != nil {
		return ResultDecision{}, fmt.Errorf("end attempt %d of %s: %w", l.Attempt, l.Task, err)
	}
	out, err := t.settle(l, in.Class, describe(in), pol, b, now)
	if err != nil {
		return ResultDecision{}, err
	}
	if err := recordRecommendationsTx(t.ctx, t, l, in.WorkerID, in.Recommendations, now); err != nil {
		return ResultDecision{}, err
	}
	return ResultDecision{Decision: DecisionAccepted, Outcome: &out, Task: l.Task}, nil
}

// describe is the error text of a result: its error, exit code or signal.
func describe(in ResultInput) string {
	var parts []string
	if in.Error != "" {
		parts = append(parts, in.Error)
	}
	if in.Class != "" {
		// The agent's error usually says this already ("exit status 1").
		var status string
		switch {
		case in.Signal != "":
			status = "killed by " + in.Signal
		case in.ExitCode != nil && *in.ExitCode != 0:
			// (an exit status 0 says nothing about why it failed)
			status = fmt.Sprintf("exit status %d", *in.ExitCode)
		}
		// (an older agent said "killed by signal SIGKILL")
		if status != "" && !strings.Contains(in.Error, status) && !strings.Contains(in.Error, "signal "+in.Signal) {
			parts = append(parts, status)
		}
	}
	return strings.Join(parts, "; ")
}

// Results returns the results posted for the task (task "" = all), in the
// order they were received (then by key).
func (s *Store) Results(ctx context.Context, task string) ([]Result, error) {
	out := []Result{}
	err := s.read(ctx, func(tx *Tx) error {
		q := `SELECT idempotency_key, token, task, attempt, worker_id, decision, reason, body, received_at FROM results`
		var args []any
		if task != "" {
			q += ` WHERE task = ?`
			args = append(args, task)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY received_at, rowid`, args...)
		if err != nil {
			return fmt.Errorf("read results: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var r Result
			var reason sql.NullString
			var body string
			var at int64
			if err := rows.Scan(&r.Key, &r.Token, &r.Task, &r.Attempt, &r.WorkerID, &r.Decision, &reason, &body, &at); err != nil {
				return fmt.Errorf("read results: %w", err)
			}
			r.Reason = reason.String
			if body != "" {
				r.Body = []byte(body)
			}
			r.ReceivedAt = fromMS(at)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

func shortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// ArtifactsOf returns the artifacts bound to one attempt of a task, by
// kind then name (empty when none, or for an unknown attempt).
func (s *Store) ArtifactsOf(ctx context.Context, task string, attempt int) ([]Artifact, error) {
	var out []Artifact
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		out, err = queryArtifacts(ctx, tx, `WHERE fencing_token = (SELECT fencing_token FROM attempts WHERE task = ? AND number = ?)`, task, attempt)
		return err
	})
	return out, err
}

// EmptySHA256 is the SHA-256 of no bytes: the hash of every empty
// artifact, which attempt_artifacts keeps as ”.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// storedSHA256 is how attempt_artifacts keeps the hash of an artifact of
// size bytes; readSHA256 undoes it.
func storedSHA256(sha string, size int64) string {
	if size == 0 && sha == EmptySHA256 {
		return ""
	}
	return sha
}

// LogMediaType is the media type of every log, which attempt_artifacts
// keeps as ” for an artifact of kind log.
const LogMediaType = "text/plain; charset=utf-8"

// storedMediaType is how attempt_artifacts keeps the media type of an
// artifact of kind; readMediaType undoes it.
func storedMediaType(kind, mt string) string {
	if kind == "log" && mt == LogMediaType {
		return ""
	}
	return mt
}

func readMediaType(kind, stored string) string {
	if kind == "log" && stored == "" {
		return LogMediaType
	}
	return stored
}

func readSHA256(stored string) string {
	if stored == "" {
		return EmptySHA256
	}
	return stored
}

// artifactRowsPerInsert bounds the rows of one INSERT of artifacts (8
// parameters each; see insertRows): 1,000 rows a statement spent more on
// binding than on the rows (BenchmarkAcceptArtifacts).
const artifactRowsPerInsert = 40

// insertArtifactsTx records the artifacts as of lease l, in multi-row
// statements of artifactRowsPerInsert.
func insertArtifactsTx(t *Tx, l Lease, as []Artifact) error {
	_, _, err := t.insertRows(`INSERT INTO attempt_artifacts (fencing_token, task, attempt, kind, name, sha256, size, media_type) VALUES `, "",
		len(as), 8, artifactRowsPerInsert, func(args []any, i int) []any {
			a := as[i]
			return append(args, l.Token, l.Task, l.Attempt, a.Kind, a.Name, storedSHA256(a.SHA256, a.Size), a.Size, storedMediaType(a.Kind, a.MediaType))
		})
	if err != nil {
		return fmt.Errorf("record the artifacts of %s attempt %d: %w", l.Task, l.Attempt, err)
	}
	return nil
}

// emptyLogs are the logs an accepted result may name empty without a row
// of attempt_artifacts, each with its bit of attempts.empty_logs
// (migration 012).
var emptyLogs = [...]struct {
	name string
	bit  int
}{{"stdout", 1}, {"stderr", 2}}

// splitEmptyLogs returns the artifacts of as that are rows of
// attempt_artifacts, and the bits of attempts.empty_logs for the empty
// stdout and stderr logs it leaves out.
func splitEmptyLogs(as []Artifact) (stored []Artifact, bits int) {
	stored = as[:0:0]
	for _, a := range as {
		bit := 0
		if a.Kind == "log" && a.Size == 0 && a.SHA256 == EmptySHA256 && (a.MediaType == "" || a.MediaType == LogMediaType) {
			for _, e := range emptyLogs {
				if a.Name == e.name {
					bit = e.bit
				}
			}
		}
		if bit == 0 || bits&bit != 0 {
			stored = append(stored, a)
			continue
		}
		bits |= bit
	}
	return stored, bits
}

// queryArtifacts reads the artifacts of the attempts that where (a
// condition on fencing_token alone, with args) selects, by kind then name,
// with the empty logs attempts.empty_logs names.
func queryArtifacts(ctx context.Context, tx *Tx, where string, args ...any) ([]Artifact, error) {
	q := `SELECT kind, name, sha256, size, media_type FROM attempt_artifacts ` + where
	all := append([]any(nil), args...)
	for _, e := range emptyLogs {
		q += ` UNION ALL SELECT 'log', '` + e.name + `', '', 0, '' FROM attempts ` + where + ` AND empty_logs & ` + strconv.Itoa(e.bit) + ` != 0`
		all = append(all, args...)
	}
	return scanArtifacts(tx.QueryContext(ctx, q+` ORDER BY kind, name`, all...))
}

// queryOutputs reads the outputs of the attempt of token, by name.
func queryOutputs(ctx context.Context, tx *Tx, token int64) ([]Artifact, error) {
	return scanArtifacts(tx.QueryContext(ctx, `SELECT kind, name, sha256, size, media_type FROM attempt_artifacts
		WHERE fencing_token = ? AND kind = 'output' ORDER BY kind, name`, token))
}

func scanArtifacts(rows *sql.Rows, err error) ([]Artifact, error) {
	if err != nil {
		return nil, fmt.Errorf("read artifacts: %w", err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		var a Artifact
		if err := rows.Scan(&a.Kind, &a.Name, &a.SHA256, &a.Size, &a.MediaType); err != nil {
			return nil, fmt.Errorf("read artifacts: %w", err)
		}
		a.SHA256, a.MediaType = readSHA256(a.SHA256), readMediaType(a.Kind, a.MediaType)
		out = append(out, a)
	}
	return out, rows.Err()
}

// AcceptedOutputs returns the outputs bound to the attempt whose accepted
// result succeeded task under its current definition (the lease's def_hash
// is the task's), by name; none when the task has not succeeded so.
func (s *Store) AcceptedOutputs(ctx context.Context, task string) ([]Artifact, error) {
	var out []Artifact
	err := s.read(ctx, func(tx *Tx) error {
		var token int64
		err := tx.QueryRowContext(ctx, `SELECT a.fencing_token FROM attempts a
			JOIN leases l ON l.token = a.fencing_token
			JOIN tasks t ON t.address = a.task AND t.def_hash = l.def_hash
			WHERE a.task = ? AND a.ended_at IS NOT NULL AND a.failure_class IS NULL AND l.status = 'completed'
			ORDER BY a.number DESC LIMIT 1`, task).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("accepted outputs of %s: %w", task, err)
		}
		out, err = queryOutputs(ctx, tx, token)
		return err
	})
	return out, err
}
