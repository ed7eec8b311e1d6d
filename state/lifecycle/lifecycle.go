package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Class is how an attempt ended, in the state's words (state.FailureClass).
type Class string

// The ways an attempt ends.
const (
	Success Class = ""        // the command succeeded
	Failure Class = "failure" // it failed or ran past its timeout: spends max_attempts
	Lost    Class = "lost"    // its worker died, went silent or was lost with its apply: spends max_lost
	Refused Class = "refused" // the worker refused the assignment: the task fails at once
)

// ErrUnknownClass is returned by Decide for a Class that is none of the
// above.
var ErrUnknownClass = errors.New("unknown failure class")

// Settings are a task's retry settings: its retry block, with the budgets
// the state keeps in its row.
type Settings struct {
	// MaxAttempts is how many failures the task may have (max_attempts,
	// at least 1): the one that reaches it fails the task.
	MaxAttempts int
	// MaxLost is how many lost attempts it may have (max_lost): the one
	// that reaches it fails the task.
	MaxLost int
	// Backoff and MaxBackoff shape the delay of a failure's retry (see
	// Backoff); zero Backoff retries at once.
	Backoff, MaxBackoff time.Duration
}

// Spent counts the attempts of a task that spent a budget: failures
// against MaxAttempts, lost attempts against MaxLost.
type Spent struct {
	Failures, Lost int
}

// Facts are what Decide decides from.
type Facts struct {
	Attempt  int   // the number of the attempt that ended
	Attempts int   // the attempts granted to the task so far: a retry is attempt Attempts+1
	Class    Class // how it ended
	// Error is the attempt's error text ("" for none); the texts of a
	// failed or retried task end with ": " and it.
	Error    string
	Settings Settings
	Spent    Spent     // before this attempt
	Now      time.Time // when the attempt ended
}

// Action is what happens to the task.
type Action string

// The actions of a Decision.
const (
	Succeed Action = "succeed" // the task succeeded
	Retry   Action = "retry"   // the task is queued again, with a retry directive
	Fail    Action = "fail"    // the task failed for good
)

// Directive is the retry a Decision schedules.
type Directive struct {
	NextAttempt int       // the number the retry gets
	NotBefore   time.Time // not granted before this, in whole milliseconds, UTC (as the state stores it)
	Kind        Class     // the budget it spends: Failure or Lost
	// Reason says which budget it spends, e.g.
	// "attempt 2 failed (failure 2 of 3): exit status 1".
	Reason string
}

// Decision is what an ended attempt means for its task.
type Decision struct {
	Action Action
	// Spent is the budgets spent, this attempt included: the task's
	// failures_used and lost_used afterwards.
	Spent Spent
	// Retry is the retry to schedule when Action is Retry, else nil.
	Retry *Directive
	// LastError is the task's last error afterwards: "" after a success,
	// the retry's reason, or why it failed for good.
	LastError string
	// Reason is the decision in words, the text of the task's event, e.g.
	// "attempt 2 failed (failure 2 of 3): exit status 1; retry as attempt 3 not before 2026-01-02T03:04:05.678Z".
	Reason string
	// PromoteDependants (after a success): queue each pending dependant
	// whose dependencies have all succeeded, with the reason Promoted.
	PromoteDependants bool
	// CancelDependants (after a failure for good): cancel each pending or
	// queued dependant, transitively, with the reason CancelledBy.
	CancelDependants bool
}

// Decide returns what the attempt f describes means for its task:
//
//   - success: the task succeeds and its ready dependants are queued; no
//     budget is spent;
//   - failure: one failure is spent; below MaxAttempts the task is
//     retried after Backoff(Backoff, MaxBackoff, failures spent), else it
//     fails for good;
//   - lost: one lost attempt is spent; below MaxLost the task is retried
//     at once (backoff is for failures of the task itself), else it fails
//     for good;
//   - refused: the task fails for good at once, spending nothing.
//
// A task that fails for good cancels its dependants. Errors:
// ErrUnknownClass.
func Decide(f Facts) (Decision, error) {
	detail := ""
	if f.Error != "" {
		detail = ": " + f.Error
	}
	d := Decision{Spent: f.Spent}
	switch f.Class {
	case Success:
		d.Action, d.PromoteDependants = Succeed, true
		d.Reason = fmt.Sprintf("attempt %d succeeded", f.Attempt)
		return d, nil
	case Failure:
		d.Spent.Failures++
		if d.Spent.Failures < f.Settings.MaxAttempts {
			return d.retry(f, d.Spent.Failures, f.Settings.MaxAttempts, detail), nil
		}
		return d.fail(fmt.Sprintf("attempt %d failed (failure %d of %d; failure budget spent)%s",
			f.Attempt, d.Spent.Failures, f.Settings.MaxAttempts, detail)), nil
	case Lost:
		d.Spent.Lost++
		if d.Spent.Lost < f.Settings.MaxLost {
			return d.retry(f, d.Spent.Lost, f.Settings.MaxLost, detail), nil
		}
		return d.fail(fmt.Sprintf("attempt %d was lost; %s; its lost budget of %d is spent%s",
			f.Attempt, lostTimes(d.Spent.Lost), f.Settings.MaxLost, detail)), nil
	case Refused:
		return d.fail(fmt.Sprintf("attempt %d was refused by the worker (refused fails the task at once)%s", f.Attempt, detail)), nil
	}
	return Decision{}, fmt.Errorf("%w %q", ErrUnknownClass, f.Class)
}

// retry makes d the retry of f's attempt, the k-th of its class against
// budget.
func (d Decision) retry(f Facts, k, budget int, detail string) Decision {
	notBefore := f.Now
	if f.Class != Lost {
		// Backoff is for failures of the task itself; a lost attempt (its
		// worker died or went silent) runs again at once.
		notBefore = f.Now.Add(Backoff(f.Settings.Backoff, f.Settings.MaxBackoff, k))
	}
	r := &Directive{
		NextAttempt: f.Attempts + 1,
		NotBefore:   time.UnixMilli(notBefore.UnixMilli()).UTC(),
		Kind:        f.Class,
		Reason:      fmt.Sprintf("attempt %d %s (%s %d of %d)%s", f.Attempt, verb(f.Class), f.Class, k, budget, detail),
	}
	d.Action, d.Retry, d.LastError = Retry, r, r.Reason
	d.Reason = fmt.Sprintf("%s; retry as attempt %d not before %s", r.Reason, r.NextAttempt, r.NotBefore.Format(time.RFC3339Nano))
	return d
}

// fail makes d a failure for good, for the reason why.
func (d Decision) fail(why string) Decision {
	d.Action, d.CancelDependants, d.LastError, d.Reason = Fail, true, why, why
	return d
}

// Backoff returns the delay before the k-th retry of a failing task:
// base·2^(k-1) capped at max (max <= 0 means no cap), for k >= 1; 0 for
// base <= 0. It never exceeds max (when max > 0), never decreases as k
// grows, and never overflows.
func Backoff(base, max time.Duration, k int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < k; i++ {
		if max > 0 && d >= max {
			break
		}
		if d > (1<<62)/2 {
			break
		}
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// CancelledBy is the reason a dependant of the failed task is cancelled:
// "dependency task.build failed".
func CancelledBy(failed string) string {
	return "dependency " + failed + " failed"
}

// Promoted is the reason a pending task whose dependencies dependsOn all
// succeeded is queued: "dependencies succeeded: task.a, task.b".
func Promoted(dependsOn []string) string {
	return "dependencies succeeded: " + strings.Join(dependsOn, ", ")
}

// lostTimes says how often a task was lost: "lost once", "lost twice",
// "lost 3 times".
func lostTimes(n int) string {
	switch n {
	case 1:
		return "lost once"
	case 2:
		return "lost twice"
	}
	return fmt.Sprintf("lost %d times", n)
}

// verb is what a retried attempt of class did: "failed" or "was lost".
func verb(class Class) string {
	if class == Lost {
		return "was lost"
	}
	return "failed"
}
