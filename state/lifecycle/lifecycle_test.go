package lifecycle

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)

func TestDecide(t *testing.T) {
	t.Parallel()
	settings := Settings{MaxAttempts: 3, MaxLost: 2, Backoff: 5 * time.Second, MaxBackoff: 15 * time.Second}
	at := func(d time.Duration) time.Time { return time.UnixMilli(now.Add(d).UnixMilli()).UTC() }
	tests := []struct {
		name string
		f    Facts
		want Decision
	}{
		{"success spends nothing and promotes",
			Facts{Attempt: 2, Attempts: 2, Class: Success, Settings: settings, Spent: Spent{Failures: 1}, Now: now},
			Decision{Action: Succeed, Spent: Spent{Failures: 1}, Reason: "attempt 2 succeeded", PromoteDependants: true}},
		{"a success's error text is not shown",
			Facts{Attempt: 1, Attempts: 1, Class: Success, Error: "warning", Settings: settings, Now: now},
			Decision{Action: Succeed, Reason: "attempt 1 succeeded", PromoteDependants: true}},
		{"first failure retries after the backoff",
			Facts{Attempt: 1, Attempts: 1, Class: Failure, Error: "exit status 1", Settings: settings, Now: now},
			Decision{Action: Retry, Spent: Spent{Failures: 1},
				Retry: &Directive{NextAttempt: 2, NotBefore: at(5 * time.Second), Kind: Failure,
					Reason: "attempt 1 failed (failure 1 of 3): exit status 1"},
				LastError: "attempt 1 failed (failure 1 of 3): exit status 1",
				Reason:    "attempt 1 failed (failure 1 of 3): exit status 1; retry as attempt 2 not before 2026-01-02T03:04:10.678Z"}},
		{"the second failure waits twice as long; the attempt number follows the task's counter",
			Facts{Attempt: 3, Attempts: 3, Class: Failure, Settings: settings, Spent: Spent{Failures: 1, Lost: 1}, Now: now},
			Decision{Action: Retry, Spent: Spent{Failures: 2, Lost: 1},
				Retry:     &Directive{NextAttempt: 4, NotBefore: at(10 * time.Second), Kind: Failure, Reason: "attempt 3 failed (failure 2 of 3)"},
				LastError: "attempt 3 failed (failure 2 of 3)",
				Reason:    "attempt 3 failed (failure 2 of 3); retry as attempt 4 not before 2026-01-02T03:04:15.678Z"}},
		{"the failure that reaches max_attempts fails for good and cancels",
			Facts{Attempt: 3, Attempts: 3, Class: Failure, Error: "killed by SIGKILL", Settings: settings, Spent: Spent{Failures: 2}, Now: now},
			Decision{Action: Fail, Spent: Spent{Failures: 3},
				LastError:        "attempt 3 failed (failure 3 of 3; failure budget spent): killed by SIGKILL",
				Reason:           "attempt 3 failed (failure 3 of 3; failure budget spent): killed by SIGKILL",
				CancelDependants: true}},
		{"max_attempts 1: the first failure fails",
			Facts{Attempt: 1, Attempts: 1, Class: Failure, Settings: Settings{MaxAttempts: 1, MaxLost: 3}, Now: now},
			Decision{Action: Fail, Spent: Spent{Failures: 1},
				LastError: "attempt 1 failed (failure 1 of 1; failure budget spent)", Reason: "attempt 1 failed (failure 1 of 1; failure budget spent)",
				CancelDependants: true}},
		{"a lost attempt retries at once, spending max_lost",
			Facts{Attempt: 1, Attempts: 1, Class: Lost, Error: "lease 7 expired", Settings: settings, Spent: Spent{Failures: 2}, Now: now},
			Decision{Action: Retry, Spent: Spent{Failures: 2, Lost: 1},
				Retry:     &Directive{NextAttempt: 2, NotBefore: at(0), Kind: Lost, Reason: "attempt 1 was lost (lost 1 of 2): lease 7 expired"},
				LastError: "attempt 1 was lost (lost 1 of 2): lease 7 expired",
				Reason:    "attempt 1 was lost (lost 1 of 2): lease 7 expired; retry as attempt 2 not before 2026-01-02T03:04:05.678Z"}},
		{"lost twice with max_lost 2 fails for good",
			Facts{Attempt: 4, Attempts: 4, Class: Lost, Error: "lease revoked: gone", Settings: settings, Spent: Spent{Lost: 1}, Now: now},
			Decision{Action: Fail, Spent: Spent{Lost: 2},
				LastError:        "attempt 4 was lost; lost twice; its lost budget of 2 is spent: lease revoked: gone",
				Reason:           "attempt 4 was lost; lost twice; its lost budget of 2 is spent: lease revoked: gone",
				CancelDependants: true}},
		{"max_lost 0: lost once fails",
			Facts{Attempt: 1, Attempts: 1, Class: Lost, Settings: Settings{MaxAttempts: 1}, Now: now},
			Decision{Action: Fail, Spent: Spent{Lost: 1},
				LastError: "attempt 1 was lost; lost once; its lost budget of 0 is spent", Reason: "attempt 1 was lost; lost once; its lost budget of 0 is spent",
				CancelDependants: true}},
		{"lost 3 times",
			Facts{Attempt: 5, Attempts: 5, Class: Lost, Settings: Settings{MaxAttempts: 1, MaxLost: 3}, Spent: Spent{Lost: 2}, Now: now},
			Decision{Action: Fail, Spent: Spent{Lost: 3},
				LastError: "attempt 5 was lost; lost 3 times; its lost budget of 3 is spent", Reason: "attempt 5 was lost; lost 3 times; its lost budget of 3 is spent",
				CancelDependants: true}},
		{"refused fails at once, whatever is left",
			Facts{Attempt: 1, Attempts: 1, Class: Refused, Error: "input missing", Settings: settings, Now: now},
			Decision{Action: Fail,
				LastError:        "attempt 1 was refused by the worker (refused fails the task at once): input missing",
				Reason:           "attempt 1 was refused by the worker (refused fails the task at once): input missing",
				CancelDependants: true}},
		{"no backoff: a failure retries at once",
			Facts{Attempt: 1, Attempts: 1, Class: Failure, Settings: Settings{MaxAttempts: 2, MaxLost: 3}, Now: now},
			Decision{Action: Retry, Spent: Spent{Failures: 1},
				Retry:     &Directive{NextAttempt: 2, NotBefore: at(0), Kind: Failure, Reason: "attempt 1 failed (failure 1 of 2)"},
				LastError: "attempt 1 failed (failure 1 of 2)",
				Reason:    "attempt 1 failed (failure 1 of 2); retry as attempt 2 not before 2026-01-02T03:04:05.678Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide(%+v) (-want +got):\n%s", tt.f, diff)
			}
		})
	}
}

func TestDecideUnknownClass(t *testing.T) {
	t.Parallel()
	_, err := Decide(Facts{Attempt: 1, Attempts: 1, Class: "crashed", Settings: Settings{MaxAttempts: 1}, Now: now})
	if !errors.Is(err, ErrUnknownClass) || err.Error() != `unknown failure class "crashed"` {
		t.Fatalf("Decide: %v; want ErrUnknownClass", err)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		base, max time.Duration
		k         int
		want      time.Duration
	}{
		{5 * time.Second, 5 * time.Minute, 1, 5 * time.Second},
		{5 * time.Second, 5 * time.Minute, 2, 10 * time.Second},
		{5 * time.Second, 5 * time.Minute, 4, 40 * time.Second},
		{5 * time.Second, 5 * time.Minute, 7, 5 * time.Minute},
		{5 * time.Second, 5 * time.Minute, 1000, 5 * time.Minute},
		{10 * time.Minute, 5 * time.Minute, 1, 5 * time.Minute}, // a base above the cap is capped
		{time.Hour, 0, 100, 0},                                  // no cap: stops doubling before overflow
		{0, time.Minute, 3, 0},
	}
	for _, c := range cases {
		got := Backoff(c.base, c.max, c.k)
		if c.max == 0 {
			if got <= 0 {
				t.Errorf("Backoff(%s, none, %d) = %s; want positive", c.base, c.k, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("Backoff(%s, %s, %d) = %s; want %s", c.base, c.max, c.k, got, c.want)
		}
	}
}

// TestBackoffProperties: the delay never exceeds max_backoff, never
// decreases as failures add up, and is positive exactly when a backoff is
// set.
func TestBackoffProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		base := time.Duration(rapid.Int64Range(-1, int64(24*time.Hour)).Draw(t, "base"))
		maxB := time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "max"))
		k := rapid.IntRange(1, 200).Draw(t, "k")
		d, next := Backoff(base, maxB, k), Backoff(base, maxB, k+1)
		if maxB > 0 && d > maxB {
			t.Fatalf("Backoff(%s, %s, %d) = %s > max", base, maxB, k, d)
		}
		if next < d {
			t.Fatalf("Backoff(%s, %s, %d) = %s > Backoff(…, %d) = %s", base, maxB, k, d, k+1, next)
		}
		if (d > 0) != (base > 0) {
			t.Fatalf("Backoff(%s, %s, %d) = %s", base, maxB, k, d)
		}
	})
}

// TestDecideProperties: an attempt spends at most one budget, of its own
// class; a task is retried only while that budget is not spent, never
// before now's millisecond nor after max_backoff past it, as the next
// attempt; it fails for good exactly when it is not retried and did not
// succeed, and only then cancels its dependants.
func TestDecideProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := Settings{
			MaxAttempts: rapid.IntRange(1, 6).Draw(t, "max_attempts"),
			MaxLost:     rapid.IntRange(0, 6).Draw(t, "max_lost"),
			// (whole milliseconds, as configuration gives them, so the
			// retry's time rounds as now does)
			Backoff:    time.Duration(rapid.Int64Range(0, 3_600_000).Draw(t, "backoff_ms")) * time.Millisecond,
			MaxBackoff: time.Duration(rapid.Int64Range(0, 7_200_000).Draw(t, "max_backoff_ms")) * time.Millisecond,
		}
		spent := Spent{Failures: rapid.IntRange(0, s.MaxAttempts-1).Draw(t, "failures"), Lost: rapid.IntRange(0, 6).Draw(t, "lost")}
		attempts := spent.Failures + spent.Lost + 1 + rapid.IntRange(0, 3).Draw(t, "released")
		f := Facts{
			Attempt: attempts, Attempts: attempts,
			Class:    rapid.SampledFrom([]Class{Success, Failure, Lost, Refused}).Draw(t, "class"),
			Error:    rapid.SampledFrom([]string{"", "exit status 1"}).Draw(t, "error"),
			Settings: s, Spent: spent,
			Now: now.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "now"))),
		}
		d, err := Decide(f)
		if err != nil {
			t.Fatal(err)
		}
		want := spent
		switch f.Class {
		case Failure:
			want.Failures++
		case Lost:
			want.Lost++
		}
		if d.Spent != want {
			t.Fatalf("spent %+v after %+v of class %q; want %+v", d.Spent, spent, f.Class, want)
		}
		if (d.Action == Succeed) != (f.Class == Success) {
			t.Fatalf("%s for class %q", d.Action, f.Class)
		}
		if d.PromoteDependants != (d.Action == Succeed) || d.CancelDependants != (d.Action == Fail) {
			t.Fatalf("%+v", d)
		}
		if (d.Retry != nil) != (d.Action == Retry) {
			t.Fatalf("%+v", d)
		}
		if d.Reason == "" || (d.Action != Succeed && d.LastError == "") {
			t.Fatalf("no words: %+v", d)
		}
		if d.Action != Retry {
			if f.Class == Failure && d.Spent.Failures < s.MaxAttempts || f.Class == Lost && d.Spent.Lost < s.MaxLost {
				t.Fatalf("%s with a budget left: %+v", d.Action, d)
			}
			return
		}
		r := d.Retry
		if f.Class == Refused || r.Kind != f.Class || r.NextAttempt != f.Attempts+1 || d.LastError != r.Reason {
			t.Fatalf("retry %+v of %+v", r, f)
		}
		if f.Class == Failure && d.Spent.Failures >= s.MaxAttempts || f.Class == Lost && d.Spent.Lost >= s.MaxLost {
			t.Fatalf("retried with its budget spent: %+v", d)
		}
		floor := time.UnixMilli(f.Now.UnixMilli()).UTC()
		delay := r.NotBefore.Sub(floor)
		if delay < 0 || (s.MaxBackoff > 0 && delay > s.MaxBackoff) || (f.Class == Lost && delay != 0) {
			t.Fatalf("not before %s, %s after %s (max_backoff %s, class %s)", r.NotBefore, delay, f.Now, s.MaxBackoff, f.Class)
		}
	})
}
