package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// addTask upserts a task with the given status and budgets.
func addTask(t *testing.T, s *Store, addr string, status TaskStatus, maxAttempts, maxLost int) {
	t.Helper()
	name := strings.TrimPrefix(addr, "task.")
	if err := s.UpsertTask(context.Background(), TaskDef{Address: addr, Name: name, Index: -1, DefHash: "h-" + name,
		Status: status, MaxAttempts: maxAttempts, MaxLost: maxLost}, t0); err != nil {
		t.Fatal(err)
	}
}

func claim(t *testing.T, s *Store, task, worker string, now time.Time) Lease {
	t.Helper()
	l, err := s.ClaimLease(context.Background(), GrantRequest{Task: task, WorkerID: worker, Timeout: time.Hour, Grace: time.Minute}, now)
	if err != nil {
		t.Fatalf("ClaimLease(%s): %v", task, err)
	}
	return l
}

// addWorker registers worker id in pool p (capacity 1, heartbeats every
// second, ttl 10 s) at t0.
func addWorker(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, err := s.RegisterWorker(context.Background(), Worker{ID: id, Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: 10 * time.Second}, t0); err != nil {
		t.Fatal(err)
	}
}

func taskOf(t *testing.T, s *Store, addr string) Task {
	t.Helper()
	task, err := s.Task(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestClaimLeaseOnlyQueuedAndDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addTask(t, s, "task.p", TaskPending, 1, 1)
	if _, err := s.ClaimLease(ctx, GrantRequest{Task: "task.p", WorkerID: "w1", Timeout: time.Hour}, t0); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("pending task: %v; want ErrNotClaimable", err)
	}
	l := claim(t, s, "task.a", "w1", t0)
	if _, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("running task: %v; want ErrNotClaimable", err)
	}
	// A failure with backoff 10s: not claimable before not_before, then claimable, and the directive is consumed.
	pol := func(string) TaskPolicy { return TaskPolicy{Backoff: 10 * time.Second, MaxBackoff: time.Minute} }
	code := 1
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k1", Token: l.Token, Task: "task.a", Attempt: 1, WorkerID: "w1",
		Class: FailureClassFailure, ExitCode: &code}, pol, t0.Add(time.Second))
	if err != nil || dec.Decision != DecisionAccepted || dec.Outcome.Status != TaskQueued || dec.Outcome.Retry == nil {
		t.Fatalf("AcceptResult = %+v, %v", dec, err)
	}
	if want := t0.Add(11 * time.Second); !dec.Outcome.Retry.NotBefore.Equal(want) {
		t.Errorf("not_before = %s; want %s", dec.Outcome.Retry.NotBefore, want)
	}
	if _, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0.Add(10*time.Second)); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("before not_before: %v; want ErrNotClaimable", err)
	}
	l2 := claim(t, s, "task.a", "w1", t0.Add(11*time.Second))
	if l2.Attempt != 2 || l2.Token <= l.Token {
		t.Errorf("retry lease %+v", l2)
	}
	open, err := s.OpenRetryDirectives(ctx)
	if err != nil || len(open) != 0 {
		t.Errorf("open directives after claim: %v, %v", open, err)
	}
	ds, _ := s.RetryDirectives(ctx, "task.a")
	if len(ds) != 1 || ds[0].ConsumedAt.IsZero() || ds[0].Kind != FailureClassFailure || ds[0].NextAttempt != 2 {
		t.Errorf("directives: %+v", ds)
	}
}

// TestClaimLeaseRefusesBeforeWriting: a claim that is refused — the
// worker is not active, or a queued task already has an active lease (a
// state another writer left) — changes nothing: the retry directive stays
// open and no attempt is counted.
func TestClaimLeaseRefusesBeforeWriting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, s *Store)
		want    error
	}{
		{"worker not active", func(t *testing.T, s *Store) {
			if err := s.SetWorkerStatus(context.Background(), "w1", WorkerDraining, t0); err != nil {
				t.Fatal(err)
			}
		}, ErrWorkerNotActive},
		{"queued task with an active lease", func(t *testing.T, s *Store) {
			claim(t, s, "task.a", "w1", t0)
			if err := s.write(context.Background(), func(tx *Tx) error {
				_, err := tx.ExecContext(context.Background(), `UPDATE tasks SET status = 'queued' WHERE address = 'task.a'`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}, ErrLeaseHeld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := setup(t)
			seed(t, s)
			tt.prepare(t, s)
			if err := s.write(ctx, func(tx *Tx) error {
				_, err := writeDirectiveTx(ctx, tx, RetryDirective{Task: "task.a", NextAttempt: 9, Kind: FailureClassLost, NotBefore: t0}, t0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			before, _ := s.Task(ctx, "task.a")
			_, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ClaimLease: %v; want %v", err, tt.want)
			}
			after, _ := s.Task(ctx, "task.a")
			open, _ := s.OpenRetryDirectives(ctx)
			if after.Attempts != before.Attempts || len(open) != 1 {
				t.Errorf("a refused claim changed the state: attempts %d → %d, open directives %d", before.Attempts, after.Attempts, len(open))
			}
		})
	}
}

func TestAcceptResultRejections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addWorker(t, s, "w2")
	old := claim(t, s, "task.a", "w1", t0)
	// Expire it by the sweep, then lease again: old is stale.
	if _, err := s.Sweep(ctx, t0.Add(11*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWorkerStatus(ctx, "w1", WorkerActive, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	cur := claim(t, s, "task.a", "w1", t0.Add(11*time.Second))
	now := t0.Add(12 * time.Second)
	cases := []struct {
		name   string
		in     ResultInput
		reason string
	}{
		{"unknown token", ResultInput{Key: "u1", Token: 999, Task: "task.a", Attempt: 1, WorkerID: "w1"}, ReasonUnknownLease},
		{"other task", ResultInput{Key: "u2", Token: cur.Token, Task: "task.b", Attempt: cur.Attempt, WorkerID: "w1"}, ReasonUnknownLease},
		{"other attempt", ResultInput{Key: "u3", Token: cur.Token, Task: "task.a", Attempt: 9, WorkerID: "w1"}, ReasonUnknownLease},
		{"wrong worker", ResultInput{Key: "w", Token: cur.Token, Task: "task.a", Attempt: cur.Attempt, WorkerID: "w2"}, ReasonWrongWorker},
		{"stale token", ResultInput{Key: "s", Token: old.Token, Task: "task.a", Attempt: old.Attempt, WorkerID: "w1"}, ReasonStaleToken},
	}
	for _, c := range cases {
		before := serial(t, s)
		dec, err := s.AcceptResult(ctx, c.in, nil, now)
		if err != nil || dec.Decision != DecisionRejected || dec.Reason != c.reason || dec.Duplicate {
			t.Errorf("%s: %+v, %v; want rejected %s", c.name, dec, err, c.reason)
		}
		if task := taskOf(t, s, "task.a"); task.Status != TaskRunning {
			t.Errorf("%s: task status %s", c.name, task.Status)
		}
		// Replay: same decision, duplicate, nothing written.
		mid := serial(t, s)
		dec2, err := s.AcceptResult(ctx, c.in, nil, now)
		if err != nil || dec2.Decision != DecisionRejected || dec2.Reason != c.reason || !dec2.Duplicate {
			t.Errorf("%s replay: %+v, %v", c.name, dec2, err)
		}
		if after := serial(t, s); after != mid || mid != before+1 {
			t.Errorf("%s: serial %d → %d → %d; want one write", c.name, before, mid, after)
		}
	}
	// Latest lease, past its expiry (not swept yet): lease_expired.
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "e", Token: cur.Token, Task: "task.a", Attempt: cur.Attempt, WorkerID: "w1"},
		nil, cur.ExpiresAt)
	if err != nil || dec.Reason != ReasonLeaseExpired {
		t.Errorf("expired: %+v, %v", dec, err)
	}
	evs, _ := s.Events(ctx, "task.a")
	n := 0
	for _, e := range evs {
		if e.Kind == EventRejected {
			n++
		}
	}
	if n != 5 { // u2 names task.b
		t.Errorf("%d rejected events for task.a; want 5: %+v", n, evs)
	}
	rs, _ := s.Results(ctx, "")
	if len(rs) != 6 {
		t.Errorf("%d results recorded; want 6", len(rs))
	}
}

func TestAcceptResultSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps := map[string]TaskPolicy{
		"task.a": {Dependents: []Dependent{{"task.b", []string{"task.a"}}, {"task.c", []string{"task.a", "task.x"}}},
			Downstream: []string{"task.b", "task.c", "task.d"}},
	}
	pol := func(task string) TaskPolicy { return deps[task] }
	type step struct {
		class      FailureClass
		wantStatus TaskStatus
	}
	cases := []struct {
		name                   string
		maxAttempts, maxLost   int
		steps                  []step
		wantFailures, wantLost int
		wantDownstream         TaskStatus // status of task.b afterwards
		wantErr                string     // in last_error
	}{
		{"success", 1, 1, []step{{"", TaskSucceeded}}, 0, 0, TaskQueued, ""},
		{"failure then success", 2, 1, []step{{FailureClassFailure, TaskQueued}, {"", TaskSucceeded}}, 1, 0, TaskQueued, ""},
		{"failure budget spent", 2, 3, []step{{FailureClassFailure, TaskQueued}, {FailureClassFailure, TaskFailed}}, 2, 0, TaskCancelled, "failure budget spent"},
		{"refused at once", 3, 3, []step{{FailureClassRefused, TaskFailed}}, 0, 0, TaskCancelled, "refused"},
		{"lost budget spent", 3, 2, []step{{FailureClassLost, TaskQueued}, {FailureClassFailure, TaskQueued}, {FailureClassLost, TaskFailed}}, 1, 2, TaskCancelled, "lost twice; its lost budget of 2 is spent"},
		{"max_lost 0 fails on first loss", 3, 0, []step{{FailureClassLost, TaskFailed}}, 0, 1, TaskCancelled, "lost once; its lost budget of 0 is spent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s)
			addTask(t, s, "task.x", TaskSucceeded, 1, 1)
			addTask(t, s, "task.a", TaskQueued, c.maxAttempts, c.maxLost)
			addTask(t, s, "task.b", TaskPending, 1, 1)
			addTask(t, s, "task.c", TaskPending, 1, 1)
			addTask(t, s, "task.d", TaskPending, 1, 1)
			now := t0
			for i, st := range c.steps {
				l := claim(t, s, "task.a", "w1", now)
				dec, err := s.AcceptResult(ctx, ResultInput{Key: l.WorkerID + "-" + string(rune('0'+i)), Token: l.Token, Task: l.Task,
					Attempt: l.Attempt, WorkerID: "w1", Class: st.class, Error: "boom"}, pol, now)
				if err != nil || dec.Decision != DecisionAccepted || dec.Outcome.Status != st.wantStatus {
					t.Fatalf("step %d: %+v, %v; want accepted, %s", i, dec, err, st.wantStatus)
				}
				now = now.Add(time.Second)
			}
			a := taskOf(t, s, "task.a")
			if a.FailuresUsed != c.wantFailures || a.LostUsed != c.wantLost || !strings.Contains(a.LastError, c.wantErr) {
				t.Errorf("task.a: %+v", a)
			}
			if b := taskOf(t, s, "task.b"); b.Status != c.wantDownstream {
				t.Errorf("task.b is %s; want %s", b.Status, c.wantDownstream)
			}
			// task.c depends on task.x too (succeeded): same as task.b.
			if cc := taskOf(t, s, "task.c"); cc.Status != c.wantDownstream {
				t.Errorf("task.c is %s; want %s", cc.Status, c.wantDownstream)
			}
			d := taskOf(t, s, "task.d") // transitive only: cancelled on failure, never promoted here
			if c.wantDownstream == TaskCancelled && (d.Status != TaskCancelled || d.LastError != "dependency task.a failed") {
				t.Errorf("task.d: %s %q", d.Status, d.LastError)
			}
			if c.wantDownstream == TaskQueued && d.Status != TaskPending {
				t.Errorf("task.d: %s; want pending", d.Status)
			}
			atts, _ := s.Attempts(ctx, "task.a")
			for _, at := range atts {
				if at.EndedAt.IsZero() {
					t.Errorf("attempt %d not ended", at.Number)
				}
			}
		})
	}
}

func TestAcceptResultDuplicateKeepsState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := claim(t, s, "task.a", "w1", t0)
	in := ResultInput{Key: "key", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1"}
	dec, err := s.AcceptResult(ctx, in, nil, t0)
	if err != nil || dec.Decision != DecisionAccepted || dec.Duplicate {
		t.Fatalf("%+v, %v", dec, err)
	}
	before := serial(t, s)
	in.Class = FailureClassFailure // a replay that says something else still gets the first answer
	dec, err = s.AcceptResult(ctx, in, nil, t0.Add(time.Hour))
	if err != nil || dec.Decision != DecisionAccepted || !dec.Duplicate || dec.Outcome != nil {
		t.Fatalf("replay: %+v, %v", dec, err)
	}
	if serial(t, s) != before || taskOf(t, s, "task.a").Status != TaskSucceeded {
		t.Errorf("replay changed the state")
	}
	// Another key for the completed lease: rejected (lease no longer active).
	in.Key = "other"
	dec, err = s.AcceptResult(ctx, in, nil, t0)
	if err != nil || dec.Reason != ReasonLeaseExpired {
		t.Errorf("second key: %+v, %v", dec, err)
	}
	if _, err := s.AcceptResult(ctx, ResultInput{Token: 1}, nil, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := s.AcceptResult(ctx, ResultInput{Key: "x", Token: 1, Class: "weird"}, nil, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad class: %v", err)
	}
}

// TestIdempotencyKeyScopedToTokenAndWorker: a key replays a decision only
// for the same lease token and worker (docs/design.md §3 rule 4). A poster
// that uses another worker's key first is judged on its own, and the real
// worker's result is judged afresh, not answered as a duplicate of the
// forger's rejection.
func TestIdempotencyKeyScopedToTokenAndWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addWorker(t, s, "w2")
	l := claim(t, s, "task.a", "w1", t0)
	key := "w1-" + strconv.FormatInt(l.Token, 10)
	steps := []struct {
		name      string
		in        ResultInput
		decision  string
		reason    string
		duplicate bool
	}{
		{"forger posts with the real worker's key", ResultInput{Key: key, Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w2"},
			DecisionRejected, ReasonWrongWorker, false},
		{"forger replays", ResultInput{Key: key, Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w2"},
			DecisionRejected, ReasonWrongWorker, true},
		{"the same key for another token", ResultInput{Key: key, Token: l.Token + 100, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1"},
			DecisionRejected, ReasonUnknownLease, false},
		{"the real worker's result is judged afresh", ResultInput{Key: key, Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1"},
			DecisionAccepted, "", false},
		{"the real worker replays", ResultInput{Key: key, Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1"},
			DecisionAccepted, "", true},
	}
	for _, st := range steps {
		dec, err := s.AcceptResult(ctx, st.in, nil, t0.Add(time.Second))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if dec.Decision != st.decision || dec.Reason != st.reason || dec.Duplicate != st.duplicate {
			t.Errorf("%s: got %s/%s duplicate=%v; want %s/%s duplicate=%v", st.name, dec.Decision, dec.Reason, dec.Duplicate,
				st.decision, st.reason, st.duplicate)
		}
	}
	if got := taskOf(t, s, "task.a"); got.Status != TaskSucceeded {
		t.Errorf("task.a is %s; want succeeded by the real worker's result", got.Status)
	}
	rs, err := s.Results(ctx, "task.a")
	if err != nil || len(rs) != 3 {
		t.Fatalf("results: %d rows, %v; want the forger's rejection, the other token's and the accepted result", len(rs), err)
	}
}

// TestRejectedBodyIsCapped: what a rejected post sent is kept only up to
// MaxRejectedBodyBytes, so rejected posts cannot grow the state without
// bound; an accepted result keeps none (its attempt, lease and artifacts
// rows hold what it said).
func TestRejectedBodyIsCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	big := []byte(`{"error":"` + strings.Repeat("x", 3*MaxRejectedBodyBytes) + `"}`)
	if _, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: 99, Task: "task.a", Attempt: 1, WorkerID: "w1", Body: big}, nil, t0); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Results(ctx, "task.a")
	if err != nil || len(rs) != 1 || len(rs[0].Body) > MaxRejectedBodyBytes+len("…") || !strings.HasSuffix(string(rs[0].Body), "…") {
		t.Fatalf("rejected body of %d bytes kept as %d bytes, %v", len(big), len(rs[0].Body), err)
	}
	l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k2", Token: l.Token, Task: "task.a", Attempt: l.Attempt, WorkerID: "w1",
		ExitCode: &zero, Body: []byte(`{"exit_code":0}`)}, nil, t0)
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("accept: %+v, %v", dec, err)
	}
	if rs, err = s.Results(ctx, "task.a"); err != nil || len(rs) != 2 || rs[1].Decision != DecisionAccepted || len(rs[1].Body) != 0 {
		t.Fatalf("results after the accepted one: %+v, %v", rs, err)
	}
}

func TestSweepExpiresAndMarksStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s) // task.a: max_lost 3
	before := serial(t, s)
	if res, err := s.Sweep(ctx, t0.Add(time.Second), nil); err != nil || len(res.Expired)+len(res.Stale) != 0 {
		t.Fatalf("idle sweep: %+v, %v", res, err)
	}
	if serial(t, s) != before {
		t.Errorf("idle sweep bumped the serial")
	}
	pol := func(string) TaskPolicy { return TaskPolicy{Backoff: time.Second, MaxBackoff: time.Minute} }
	now := t0
	for i := 1; i <= 3; i++ {
		if err := s.SetWorkerStatus(ctx, "w1", WorkerActive, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Heartbeat(ctx, "w1", now); err != nil {
			t.Fatal(err)
		}
		l := claim(t, s, "task.a", "w1", now)
		now = l.ExpiresAt
		res, err := s.Sweep(ctx, now, pol)
		if err != nil || len(res.Expired) != 1 || len(res.Stale) != 1 {
			t.Fatalf("sweep %d: %+v, %v", i, res, err)
		}
		out := res.Expired[0]
		if i < 3 {
			if out.Status != TaskQueued || out.Retry == nil || out.Retry.Kind != FailureClassLost ||
				!out.Retry.NotBefore.Equal(now) { // a lost attempt retries at once: backoff is for failures
				t.Fatalf("sweep %d outcome %+v", i, out)
			}
			now = out.Retry.NotBefore
		} else if out.Status != TaskFailed || !strings.Contains(out.Message, "lost 3 times; its lost budget of 3 is spent") {
			t.Fatalf("sweep %d outcome %+v", i, out)
		}
		if w, _ := s.Worker(ctx, "w1"); w.Status != WorkerStale {
			t.Errorf("worker is %s", w.Status)
		}
	}
	atts, _ := s.Attempts(ctx, "task.a")
	for _, a := range atts {
		if a.FailureClass != FailureClassLost {
			t.Errorf("attempt %+v", a)
		}
	}
	ls, _ := s.Leases(ctx, "task.a")
	for _, l := range ls {
		if l.Status != LeaseExpired {
			t.Errorf("lease %+v", l)
		}
	}
	evs, _ := s.Events(ctx, "task.a")
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "leased,expired,retried,leased,expired,retried,leased,expired,failed" {
		t.Errorf("events: %s", got)
	}
}

func TestRevokeAllLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addTask(t, s, "task.z", TaskQueued, 1, 0) // no lost budget: fails
	la := claim(t, s, "task.a", "w1", t0)
	claim(t, s, "task.z", "w1", t0)
	res, err := s.RevokeAllLeases(ctx, "apply lock taken over", t0.Add(time.Second))
	if err != nil || len(res.Revoked) != 2 || res.Gone != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if a := taskOf(t, s, "task.a"); a.Status != TaskQueued || a.LostUsed != 1 {
		t.Errorf("task.a %+v", a)
	}
	if z := taskOf(t, s, "task.z"); z.Status != TaskFailed {
		t.Errorf("task.z %+v", z)
	}
	if l, _ := s.Lease(ctx, la.Token); l.Status != LeaseRevoked {
		t.Errorf("lease %+v", l)
	}
	if w, _ := s.Worker(ctx, "w1"); w.Status != WorkerGone {
		t.Errorf("worker %+v", w)
	}
	// The lost retry is due at once; a new worker can claim it.
	addWorker(t, s, "w2")
	l := claim(t, s, "task.a", "w2", t0.Add(time.Second))
	if l.Attempt != 2 {
		t.Errorf("lease %+v", l)
	}
}

func TestReleaseFinishSetStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addTask(t, s, "task.q", TaskQueued, 1, 1)
	l := claim(t, s, "task.a", "w1", t0)
	if ok, err := s.ReleaseLease(ctx, l.Token, "claim not delivered", t0); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if ok, err := s.ReleaseLease(ctx, l.Token, "again", t0); err != nil || ok {
		t.Errorf("second release: %v %v", ok, err)
	}
	if _, err := s.ReleaseLease(ctx, 99, "x", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	if a := taskOf(t, s, "task.a"); a.Status != TaskQueued || a.LostUsed != 0 || a.FailuresUsed != 0 {
		t.Errorf("after release %+v", a)
	}
	claim(t, s, "task.a", "w1", t0)
	got, err := s.FinishTasks(ctx, []TaskFinish{{"task.a", TaskFailed, "pool gone"}, {"task.q", TaskCancelled, "pool gone"}, {"task.none", TaskFailed, ""}}, t0)
	if err != nil || len(got) != 1 || got[0] != "task.q" {
		t.Errorf("FinishTasks = %v, %v; want only task.q (task.a holds a lease)", got, err)
	}
	if _, err := s.FinishTasks(ctx, []TaskFinish{{"task.a", TaskSucceeded, ""}}, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("succeeded: %v", err)
	}
	if err := s.SetWorkerStatus(ctx, "w1", "sleepy", t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad status: %v", err)
	}
	if err := s.SetWorkerStatus(ctx, "nope", WorkerGone, t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown worker: %v", err)
	}
	if err := s.SetWorkerStatus(ctx, "w1", WorkerDraining, t0); err != nil {
		t.Fatal(err)
	}
	if active, err := s.ActiveLeases(ctx, "w1"); err != nil || len(active) != 1 {
		t.Errorf("ActiveLeases = %v, %v", active, err)
	}
	q, _ := s.PromoteReady(ctx, []Dependent{{"task.q", nil}}, t0)
	if len(q) != 0 {
		t.Errorf("promoted a cancelled task: %v", q)
	}
}

// TestOnlyAnAcceptedResultSucceedsATask checks invariant 5 of
// docs/design.md §3: lease and registry operations — grant, heartbeat,
// expiry by the sweep, release, revoke, worker status changes, finishing
// tasks in bulk — never mark a task succeeded; only an accepted successful
// result does.
func TestOnlyAnAcceptedResultSucceedsATask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s) // task.a queued, worker w1
	pol := func(string) TaskPolicy { return TaskPolicy{Backoff: time.Millisecond, MaxBackoff: time.Millisecond} }
	now := t0
	notSucceeded := func(step string) {
		t.Helper()
		if got := taskOf(t, s, "task.a"); got.Status == TaskSucceeded {
			t.Fatalf("after %s: task.a is succeeded without an accepted result", step)
		}
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"grant", func() error {
			_, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, now)
			return err
		}},
		{"heartbeat", func() error { _, err := s.Heartbeat(ctx, "w1", now.Add(time.Second)); return err }},
		{"sweep expiry", func() error { now = now.Add(time.Minute); _, err := s.Sweep(ctx, now, pol); return err }},
		{"worker back", func() error { return s.SetWorkerStatus(ctx, "w1", WorkerActive, now) }},
		{"grant again", func() error {
			now = now.Add(time.Second)
			_, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, now)
			return err
		}},
		{"release", func() error { _, err := s.ReleaseLease(ctx, 2, "not delivered", now); return err }},
		{"grant a third time", func() error {
			_, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, now)
			return err
		}},
		{"revoke all", func() error { _, err := s.RevokeAllLeases(ctx, "apply gone", now); return err }},
		{"finish as succeeded in bulk", func() error {
			if _, err := s.FinishTasks(ctx, []TaskFinish{{"task.a", TaskSucceeded, ""}}, now); !errors.Is(err, ErrInvalid) {
				return errors.New("FinishTasks accepted succeeded")
			}
			return nil
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		notSucceeded(st.name)
	}
	// Now the one way: an accepted successful result for the current lease.
	if err := s.SetWorkerStatus(ctx, "w1", WorkerActive, now); err != nil {
		t.Fatal(err)
	}
	l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, Task: "task.a", Attempt: l.Attempt, WorkerID: "w1", ExitCode: &zero}, pol, now)
	if err != nil || dec.Decision != "accepted" {
		t.Fatalf("AcceptResult = %+v, %v", dec, err)
	}
	if got := taskOf(t, s, "task.a"); got.Status != TaskSucceeded {
		t.Fatalf("after an accepted result task.a is %s", got.Status)
	}
}

// TestLoseWorker: a worker its provider reports gone loses its leases at
// once: each attempt ends lost, its task is queued again due now (no
// backoff), or fails with its downstream cancelled when max_lost is spent;
// the worker is gone; an unknown worker is ErrNotFound.
func TestLoseWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addTask(t, s, "task.b", TaskQueued, 1, 1)
	addTask(t, s, "task.c", TaskPending, 1, 1)
	pol := func(task string) TaskPolicy {
		p := TaskPolicy{Backoff: time.Minute, MaxBackoff: time.Hour}
		if task == "task.b" {
			p.Downstream = []string{"task.c"}
		}
		return p
	}
	la := claim(t, s, "task.a", "w1", t0)
	lb := claim(t, s, "task.b", "w1", t0)
	now := t0.Add(time.Second)
	outs, err := s.LoseWorker(ctx, "w1", "worker 1 was killed by SIGKILL", pol, now)
	if err != nil || len(outs) != 2 {
		t.Fatalf("LoseWorker = %+v, %v", outs, err)
	}
	a, b := outs[0], outs[1]
	if a.Token != la.Token || a.Class != FailureClassLost || a.Status != TaskQueued || a.Retry == nil || !a.Retry.NotBefore.Equal(now) {
		t.Errorf("task.a outcome %+v; want queued, retry due now", a)
	}
	if b.Token != lb.Token || b.Status != TaskFailed || len(b.Cancelled) != 1 || b.Cancelled[0] != "task.c" {
		t.Errorf("task.b outcome %+v; want failed (max_lost 1) with task.c cancelled", b)
	}
	for _, tok := range []int64{la.Token, lb.Token} {
		if l, err := s.Lease(ctx, tok); err != nil || l.Status != LeaseRevoked {
			t.Errorf("lease %d = %+v, %v; want revoked", tok, l, err)
		}
	}
	if w, err := s.Worker(ctx, "w1"); err != nil || w.Status != WorkerGone {
		t.Errorf("worker = %+v, %v; want gone", w, err)
	}
	if attempts, _ := s.Attempts(ctx, "task.a"); len(attempts) != 1 || !strings.Contains(attempts[0].Error, "killed by SIGKILL") {
		t.Errorf("attempt 1 of task.a = %+v; want its error to name the cause", attempts)
	}
	if outs, err := s.LoseWorker(ctx, "w1", "again", pol, now); err != nil || len(outs) != 0 {
		t.Errorf("LoseWorker again = %+v, %v; want nothing to do", outs, err)
	}
	if _, err := s.LoseWorker(ctx, "w-nope", "x", pol, now); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoseWorker of an unknown worker = %v; want ErrNotFound", err)
	}
}

func TestDescribeSaysTheSignalOnce(t *testing.T) {
	t.Parallel()
	one := 1
	for _, tt := range []struct {
		in   ResultInput
		want string
	}{
		{ResultInput{Class: FailureClassFailure, Error: "killed by SIGKILL", Signal: "SIGKILL"}, "killed by SIGKILL"},
		{ResultInput{Class: FailureClassFailure, Error: "killed by signal SIGKILL", Signal: "SIGKILL"}, "killed by signal SIGKILL"},
		{ResultInput{Class: FailureClassFailure, Signal: "SIGTERM"}, "killed by SIGTERM"},
		{ResultInput{Class: FailureClassFailure, Error: "exit status 1", ExitCode: &one}, "exit status 1"},
		{ResultInput{Class: FailureClassFailure, Error: "timed out after 1s", ExitCode: &one}, "timed out after 1s; exit status 1"},
	} {
		if got := describe(tt.in); got != tt.want {
			t.Errorf("describe(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestAcceptResultChecksAfterFencing: in.Check's answer counts only once
// the fencing checks passed, so a late result is rejected whatever Check
// would say (also one that names its task and attempt, for which Check may
// be asked first); an error of Check is returned with nothing changed.
func TestAcceptResultChecksAfterFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := claim(t, s, "task.a", "w1", t0)
	refuse := errors.New("outputs do not match")
	asked := 0
	check := func(task string) error {
		asked++
		if task != l.Task {
			t.Errorf("Check asked about a lease of %s; want %s", task, l.Task)
		}
		return refuse
	}
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "late", Token: 99, WorkerID: "w1", Check: check}, nil, t0)
	if err != nil || dec.Reason != ReasonUnknownLease || asked != 0 {
		t.Errorf("result of no lease: %+v, %v, Check asked %d times; want rejected unknown_lease without asking", dec, err, asked)
	}
	if dec, err := s.AcceptResult(ctx, ResultInput{Key: "other", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w2", Check: check}, nil, t0); err != nil || dec.Reason != ReasonWrongWorker {
		t.Errorf("result of another worker, naming the task: %+v, %v; want rejected wrong_worker whatever Check says", dec, err)
	}
	asked = 0
	before := serial(t, s)
	if _, err := s.AcceptResult(ctx, ResultInput{Key: "cur", Token: l.Token, WorkerID: "w1", Check: check}, nil, t0); !errors.Is(err, refuse) || asked != 1 {
		t.Errorf("result of the current lease: %v, Check asked %d times; want Check's error", err, asked)
	}
	if serial(t, s) != before || taskOf(t, s, "task.a").Status != TaskRunning {
		t.Errorf("a result Check refused changed the state")
	}
	if dec, err := s.AcceptResult(ctx, ResultInput{Key: "cur", Token: l.Token, WorkerID: "w1"}, nil, t0); err != nil || dec.Decision != DecisionAccepted || dec.Duplicate {
		t.Errorf("the same key without Check: %+v, %v; want accepted afresh", dec, err)
	}
}

// TestAcceptResultKeep: a rejection in.Keep does not keep is answered
// without writing anything, and its key is judged afresh when it comes
// again; one it keeps carries its note in its Detail and event.
func TestAcceptResultKeep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	keep := func(ok bool, note string) func(ResultDecision) (bool, string) {
		return func(rej ResultDecision) (bool, string) {
			if rej.Reason != ReasonUnknownLease {
				t.Errorf("Keep asked about %+v", rej)
			}
			return ok, note
		}
	}
	before := serial(t, s)
	for range 2 {
		dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: 99, WorkerID: "w1", Body: []byte(`{}`), Keep: keep(false, "")}, nil, t0)
		if err != nil || dec.Reason != ReasonUnknownLease || !dec.Unrecorded || dec.Duplicate {
			t.Errorf("a rejection not kept: %+v, %v; want unknown_lease, unrecorded, not a duplicate", dec, err)
		}
	}
	if rs, _ := s.Results(ctx, ""); len(rs) != 0 || serial(t, s) != before {
		t.Errorf("a rejection not kept wrote: %d results, serial %d → %d", len(rs), before, serial(t, s))
	}
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k2", Token: 99, WorkerID: "w1", Keep: keep(true, "3 more")}, nil, t0)
	if err != nil || dec.Unrecorded || !strings.HasSuffix(dec.Detail, "(3 more)") {
		t.Errorf("a rejection kept: %+v, %v", dec, err)
	}
	evs, _ := s.Events(ctx, "")
	if last := evs[len(evs)-1]; last.Kind != EventRejected || !strings.HasSuffix(last.Message, "(3 more)") {
		t.Errorf("its event %+v; want it to carry the note", last)
	}
	if dec, _ := s.AcceptResult(ctx, ResultInput{Key: "k2", Token: 99, WorkerID: "w1", Keep: keep(false, "")}, nil, t0); !dec.Duplicate {
		t.Errorf("replay of the kept rejection: %+v; want a duplicate", dec)
	}
}

// TestArtifactsCompact: an empty artifact's hash is kept as ” and read
// back as EmptySHA256; many artifacts are recorded in several multi-row
// statements and read back whole.
func TestArtifactsCompact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	as := []Artifact{{Kind: "log", Name: "trace", SHA256: EmptySHA256, MediaType: "text/plain; charset=utf-8"}}
	for i := range artifactRowsPerInsert + 5 {
		as = append(as, Artifact{Kind: "output", Name: fmt.Sprintf("o%05d", i), SHA256: strings.Repeat("ab", 32), Size: 3})
	}
	zero := 0
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, Task: "task.a", Attempt: l.Attempt, WorkerID: "w1",
		ExitCode: &zero, Artifacts: as}, nil, t0)
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("accept: %+v, %v", dec, err)
	}
	var stored string
	var storedMT string
	if err := s.db.QueryRow(`SELECT sha256, media_type FROM attempt_artifacts WHERE name = 'trace'`).Scan(&stored, &storedMT); err != nil || stored != "" || storedMT != "" {
		t.Errorf("stored hash and media type of the empty log: %q %q, %v; want '' ''", stored, storedMT, err)
	}
	got, err := s.ArtifactsOf(ctx, "task.a", l.Attempt)
	if err != nil || len(got) != len(as) || got[0].SHA256 != EmptySHA256 || got[0].Name != "trace" || got[0].MediaType != LogMediaType || got[1].SHA256 != as[1].SHA256 {
		t.Fatalf("artifacts read back: %d of %d, %v", len(got), len(as), err)
	}
	if _, err := s.db.Exec(`INSERT INTO attempt_artifacts (fencing_token, task, attempt, kind, name, sha256, size) VALUES (?, 'task.a', 1, 'log', 'x', '', 1)`, l.Token); err == nil {
		t.Errorf("an empty hash of a non-empty artifact was accepted")
	}
}

// TestEmptyLogsAreNotRows: an accepted result's empty stdout and stderr
// are no rows of attempt_artifacts (attempts.empty_logs names them), and
// every reader of an attempt's artifacts gives back what the result named,
// in the same order as the rows would.
func TestEmptyLogsAreNotRows(t *testing.T) {
	t.Parallel()
	empty := func(name string) Artifact {
		return Artifact{Kind: "log", Name: name, SHA256: EmptySHA256, MediaType: LogMediaType}
	}
	written := func(kind, name string) Artifact {
		mt := LogMediaType
		if kind == "output" {
			mt = "application/octet-stream"
		}
		return Artifact{Kind: kind, Name: name, SHA256: strings.Repeat("ab", 32), Size: 3, MediaType: mt}
	}
	for _, tc := range []struct {
		name      string
		artifacts []Artifact
		rows      int // of attempt_artifacts
		bits      int // attempts.empty_logs
	}{
		{"both logs empty", []Artifact{empty("stdout"), empty("stderr")}, 0, 3},
		{"stdout written", []Artifact{written("log", "stdout"), empty("stderr")}, 1, 2},
		{"stderr written", []Artifact{empty("stdout"), written("log", "stderr")}, 1, 1},
		{"another empty log is a row", []Artifact{empty("stdout"), empty("trace")}, 1, 1},
		{"outputs and empty logs", []Artifact{written("output", "a"), empty("stdout"), Artifact{Kind: "output", Name: "b", SHA256: EmptySHA256, MediaType: "text/csv"}, empty("stderr")}, 2, 3},
		{"no artifacts", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := setup(t)
			seed(t, s)
			l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
			if err != nil {
				t.Fatal(err)
			}
			zero := 0
			dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, Task: "task.a", Attempt: l.Attempt, WorkerID: "w1",
				ExitCode: &zero, Artifacts: tc.artifacts}, nil, t0)
			if err != nil || dec.Decision != DecisionAccepted {
				t.Fatalf("accept: %+v, %v", dec, err)
			}
			var rows, bits int
			if err := s.db.QueryRow(`SELECT (SELECT count(*) FROM attempt_artifacts), empty_logs FROM attempts WHERE fencing_token = ?`, l.Token).Scan(&rows, &bits); err != nil {
				t.Fatal(err)
			}
			if rows != tc.rows || bits != tc.bits {
				t.Errorf("%d rows of attempt_artifacts, empty_logs %d; want %d and %d", rows, bits, tc.rows, tc.bits)
			}
			want := append([]Artifact(nil), tc.artifacts...)
			slices.SortFunc(want, func(a, b Artifact) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
			got, err := s.ArtifactsOf(ctx, "task.a", l.Attempt)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("ArtifactsOf = %+v, %v; want %+v", got, err, want)
			}
			attempts, err := s.Attempts(ctx, "task.a")
			if err != nil || len(attempts) != 1 || !reflect.DeepEqual(attempts[0].Artifacts, want) {
				t.Errorf("Attempts = %+v, %v; want its artifacts %+v", attempts, err, want)
			}
			outputs, err := s.AcceptedOutputs(ctx, "task.a")
			var wantOutputs []Artifact
			for _, a := range want {
				if a.Kind == "output" {
					wantOutputs = append(wantOutputs, a)
				}
			}
			if err != nil || !reflect.DeepEqual(outputs, wantOutputs) {
				t.Errorf("AcceptedOutputs = %+v, %v; want %+v", outputs, err, wantOutputs)
			}
		})
	}
}

// TestAcceptResultInOneStatement: a result that names its task and
// attempt and binds no blob completes its lease in the UPDATE that makes
// the fencing checks, without fence's SELECT; every fencing check it makes
// still refuses there, and fence then answers as before: each case leaves
// the lease active and gets its rejection, a replay of the acceptance gets
// it back as a duplicate and writes nothing. A prefetched lease's result
// completes it as started.
func TestAcceptResultInOneStatement(t *testing.T) {
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	addWorker(t, s, "w2")
	l := claim(t, s, "task.a", "w1", t0)
	now := t0.Add(time.Second)
	fenceReads := 0
	stop := TraceStatements(func(q string, _ time.Duration) {
		if strings.Contains(q, "FROM (SELECT 1)") {
			fenceReads++
		}
	})
	defer stop()
	for _, c := range []struct {
		name   string
		in     ResultInput
		now    time.Time
		reason string
	}{
		{"other definition", ResultInput{Key: "d", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1", DefHash: "h-other"}, now, ReasonUnknownLease},
		{"other worker", ResultInput{Key: "w", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w2"}, now, ReasonWrongWorker},
		{"other attempt", ResultInput{Key: "a", Token: l.Token, Task: l.Task, Attempt: l.Attempt + 1, WorkerID: "w1"}, now, ReasonUnknownLease},
		{"past its expiry", ResultInput{Key: "e", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1"}, l.ExpiresAt, ReasonLeaseExpired},
	} {
		fenceReads = 0
		dec, err := s.AcceptResult(ctx, c.in, nil, c.now)
		if err != nil || dec.Decision != DecisionRejected || dec.Reason != c.reason {
			t.Errorf("%s: %+v, %v; want rejected %s", c.name, dec, err, c.reason)
		}
		if fenceReads != 1 {
			t.Errorf("%s: fence read %d times, want once (after the UPDATE refused)", c.name, fenceReads)
		}
		if got, _ := s.Lease(ctx, l.Token); got.Status != LeaseActive {
			t.Errorf("%s: the lease is %s, want still active", c.name, got.Status)
		}
	}

	in := ResultInput{Key: "ok", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1", DefHash: l.DefHash,
		Artifacts: []Artifact{{Kind: ArtifactLog, Name: "stdout", SHA256: EmptySHA256}, {Kind: ArtifactLog, Name: "stderr", SHA256: EmptySHA256}},
		Held:      func([]string) ([]string, error) { t.Error("the store was asked for empty logs"); return nil, nil }}
	fenceReads = 0
	dec, err := s.AcceptResult(ctx, in, nil, now)
	if err != nil || dec.Decision != DecisionAccepted || dec.Outcome == nil || dec.Outcome.Status != TaskSucceeded {
		t.Fatalf("the result: %+v, %v; want accepted, task succeeded", dec, err)
	}
	if fenceReads != 0 {
		t.Errorf("the accepted result read fence's SELECT %d times, want none", fenceReads)
	}
	if got, _ := s.Lease(ctx, l.Token); got.Status != LeaseCompleted || !got.EndedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("the lease after its result: %s ended %v; want completed at %s", got.Status, got.EndedAt, now)
	}
	before := serial(t, s)
	if dec, err := s.AcceptResult(ctx, in, nil, now.Add(time.Second)); err != nil || !dec.Duplicate || dec.Decision != DecisionAccepted {
		t.Errorf("the replay: %+v, %v; want the acceptance as a duplicate", dec, err)
	}
	if after := serial(t, s); after != before {
		t.Errorf("the replay moved the serial %d → %d", before, after)
	}

	addTask(t, s, "task.b", TaskQueued, 1, 1)
	pre, err := s.GrantLease(ctx, GrantRequest{Task: "task.b", WorkerID: "w1", Timeout: time.Hour, Prefetched: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := s.AcceptResult(ctx, ResultInput{Key: "p", Token: pre.Token, Task: pre.Task, Attempt: pre.Attempt, WorkerID: "w1"}, nil, now); err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("the prefetched lease's result: %+v, %v", dec, err)
	}
	if got, _ := s.Lease(ctx, pre.Token); got.Unstarted || !got.HardExpiresAt.Equal(got.ExpiresAt) {
		t.Errorf("the prefetched lease after its result: unstarted %v, hard expiry %s; want started, hard expiry = expiry %s", got.Unstarted, got.HardExpiresAt, got.ExpiresAt)
	}
}

// TestClaimLeaseWithExpectation: a claim whose expectation of the task and
// worker holds checks and counts in one UPDATE and reads nothing; one whose
// expectation is off in any way, or whose task has an open retry
// directive, falls back to the claim's read and decides exactly as a claim
// without one (the state's attempts, definition and ttl, its refusals),
// and a refused claim changes nothing.
func TestClaimLeaseWithExpectation(t *testing.T) {
	ctx := context.Background()
	reads := 0
	stop := TraceStatements(func(q string, _ time.Duration) {
		if strings.Contains(q, "LEFT JOIN workers") {
			reads++
		}
	})
	defer stop()
	directive := func(notBefore time.Time) func(t *testing.T, s *Store) {
		return func(t *testing.T, s *Store) {
			if err := s.write(ctx, func(tx *Tx) error {
				_, err := writeDirectiveTx(ctx, tx, RetryDirective{Task: "task.a", NextAttempt: 1, Kind: FailureClassLost, NotBefore: notBefore}, t0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	exact := ClaimExpectation{Attempts: 0, DefHash: "h1", TTL: 10 * time.Second}
	tests := []struct {
		name      string
		prepare   func(t *testing.T, s *Store)
		expect    ClaimExpectation
		wantErr   error
		wantReads int
	}{
		{name: "as expected", expect: exact},
		{name: "attempts off", expect: ClaimExpectation{Attempts: 3, DefHash: "h1", TTL: 10 * time.Second}, wantReads: 1},
		{name: "definition off", expect: ClaimExpectation{Attempts: 0, DefHash: "h-other", TTL: 10 * time.Second}, wantReads: 1},
		{name: "ttl off", expect: ClaimExpectation{Attempts: 0, DefHash: "h1", TTL: 5 * time.Second}, wantReads: 1},
		{name: "a due retry directive", prepare: directive(t0), expect: exact, wantReads: 1},
		{name: "a retry directive not due", prepare: directive(t0.Add(time.Hour)), expect: exact, wantErr: ErrNotClaimable},
		{name: "worker draining", prepare: func(t *testing.T, s *Store) {
			if err := s.SetWorkerStatus(ctx, "w1", WorkerDraining, t0); err != nil {
				t.Fatal(err)
			}
		}, expect: exact, wantErr: ErrWorkerNotActive},
		{name: "queued with an active lease", prepare: func(t *testing.T, s *Store) {
			claim(t, s, "task.a", "w1", t0)
			if err := s.write(ctx, func(tx *Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'queued' WHERE address = 'task.a'`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}, expect: ClaimExpectation{Attempts: 1, DefHash: "h1", TTL: 10 * time.Second}, wantErr: ErrLeaseHeld},
		{name: "task pending", prepare: func(t *testing.T, s *Store) {
			addTask(t, s, "task.a", TaskPending, 3, 3)
		}, expect: ClaimExpectation{Attempts: 0, DefHash: "h-a", TTL: 10 * time.Second}, wantErr: ErrNotClaimable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			seed(t, s)
			if tt.prepare != nil {
				tt.prepare(t, s)
			}
			before, _ := s.Task(ctx, "task.a")
			e := tt.expect
			reads = 0
			l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour, Expected: &e}, t0)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ClaimLease: %v; want %v", err, tt.wantErr)
			}
			// (A refused claim's read is not traced: its write ends with
			// no statement after it. Its refusal is the read's.)
			if tt.wantErr == nil && reads != tt.wantReads {
				t.Errorf("the claim read its checks %d times, want %d", reads, tt.wantReads)
			}
			after, _ := s.Task(ctx, "task.a")
			if tt.wantErr != nil {
				if !reflect.DeepEqual(before, after) {
					t.Errorf("a refused claim changed the task: %+v → %+v", before, after)
				}
				return
			}
			if l.Attempt != before.Attempts+1 || l.DefHash != before.DefHash || !l.ExpiresAt.Equal(t0.Add(10*time.Second)) {
				t.Errorf("lease: attempt %d, definition %s, expires %s; want attempt %d, %s, the state's ttl (%s)",
					l.Attempt, l.DefHash, l.ExpiresAt, before.Attempts+1, before.DefHash, t0.Add(10*time.Second))
			}
			if after.Status != TaskRunning || after.Attempts != before.Attempts+1 {
				t.Errorf("task after the claim: %s, %d attempts; want running, %d", after.Status, after.Attempts, before.Attempts+1)
			}
			if open, _ := s.OpenRetryDirectives(ctx); len(open) != 0 {
				t.Errorf("open retry directives after the claim: %+v", open)
			}
		})
	}
}
