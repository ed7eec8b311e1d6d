package state

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPrefetchedLeaseGrantAndStart: a prefetched lease is granted
// unstarted, within the worker's ttl and with no hard expiry; heartbeats
// renew it past what its timeout would bound; its start bounds it by
// start + timeout + grace; a start of a lease not the worker's live one is
// refused (docs/design.md §3, prefetched leases).
func TestPrefetchedLeaseGrantAndStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s) // worker w1: ttl 10 s
	l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: 5 * time.Second, Grace: time.Second, Prefetched: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Unstarted || !l.HardExpiresAt.Equal(UnstartedHardExpiry) || !l.ExpiresAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("prefetched grant: unstarted %v, hard %s, expires %s; want unstarted, no hard expiry, t0+10s", l.Unstarted, l.HardExpiresAt, l.ExpiresAt)
	}
	// A renewal at t0+9s: 19 s, past t0 + timeout + grace (6 s), which
	// would bound a started lease.
	if _, err := s.Heartbeat(ctx, "w1", t0.Add(9*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Lease(ctx, l.Token); !got.ExpiresAt.Equal(t0.Add(19 * time.Second)) {
		t.Fatalf("renewed unstarted lease expires %s, want t0+19s", got.ExpiresAt)
	}
	start := func(worker string, token int64, at time.Duration) []int64 {
		t.Helper()
		var refused []int64
		err := s.write(ctx, func(tx *Tx) error {
			var err error
			refused, err = tx.StartLeases(worker, []LeaseStart{{Token: token, Timeout: 5 * time.Second, Grace: time.Second}}, t0.Add(at))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return refused
	}
	if r := start("w2", l.Token, 10*time.Second); !slices.Equal(r, []int64{l.Token}) {
		t.Errorf("start by another worker: refused %v, want [%d]", r, l.Token)
	}
	if r := start("w1", 99, 10*time.Second); !slices.Equal(r, []int64{99}) {
		t.Errorf("start of an unknown lease: refused %v, want [99]", r)
	}
	if r := start("w1", l.Token, 10*time.Second); len(r) != 0 {
		t.Fatalf("start: refused %v", r)
	}
	got, _ := s.Lease(ctx, l.Token)
	// hard = t0+10s + 6 s; expires = min(max(19 s, 10 s + 10 s), 16 s).
	if got.Unstarted || !got.HardExpiresAt.Equal(t0.Add(16*time.Second)) || !got.ExpiresAt.Equal(t0.Add(16*time.Second)) {
		t.Errorf("started lease: unstarted %v, hard %s, expires %s; want started, both t0+16s", got.Unstarted, got.HardExpiresAt, got.ExpiresAt)
	}
	atts, err := s.Attempts(ctx, "task.a")
	if err != nil || len(atts) != 1 || !atts[0].StartedAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("attempts after the start: %+v, %v; want one, started at t0+10s", atts, err)
	}
	// A second report of the start changes nothing.
	if r := start("w1", l.Token, 12*time.Second); len(r) != 0 {
		t.Errorf("second start: refused %v", r)
	}
	if again, _ := s.Lease(ctx, l.Token); again != got {
		t.Errorf("a second start changed the lease:\n%+v\n%+v", again, got)
	}
	// Past its expiry, a start is refused.
	if r := start("w1", l.Token, 16*time.Second); !slices.Equal(r, []int64{l.Token}) {
		t.Errorf("start past the expiry: refused %v, want [%d]", r, l.Token)
	}
}

// TestUnstartedLeaseEndsAtNoCost: every way a lease ends other than by a
// result (expiry, revoke, a lost worker, a release) spends no budget for an
// unstarted lease, leaves no attempt and queues its task at once, its
// attempt number spent; a started prefetched lease ends as any lease.
func TestUnstartedLeaseEndsAtNoCost(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name   string
		status LeaseStatus
		end    func(t *testing.T, s *Store, token int64) []AttemptOutcome
	}{
		{"sweep", LeaseExpired, func(t *testing.T, s *Store, _ int64) []AttemptOutcome {
			res, err := s.Sweep(context.Background(), t0.Add(11*time.Second), nil)
			if err != nil {
				t.Fatal(err)
			}
			return res.Expired
		}},
		{"revoke", LeaseRevoked, func(t *testing.T, s *Store, _ int64) []AttemptOutcome {
			res, err := s.RevokeAllLeases(context.Background(), "test", t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return res.Revoked
		}},
		{"lost worker", LeaseRevoked, func(t *testing.T, s *Store, _ int64) []AttemptOutcome {
			out, err := s.LoseWorker(context.Background(), "w1", "test", nil, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
		{"release", LeaseReleased, func(t *testing.T, s *Store, token int64) []AttemptOutcome {
			ok, err := s.ReleaseLease(context.Background(), token, "test", t0.Add(time.Second))
			if err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			return nil
		}},
	}
	for _, e := range ends {
		for _, started := range []bool{false, true} {
			name := e.name + "/unstarted"
			if started {
				name = e.name + "/started"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s := setup(t)
				seed(t, s)
				l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour, Prefetched: true}, t0)
				if err != nil {
					t.Fatal(err)
				}
				if started {
					if err := s.write(ctx, func(tx *Tx) error {
						_, err := tx.StartLeases("w1", []LeaseStart{{Token: l.Token, Timeout: time.Hour}}, t0)
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
				outs := e.end(t, s, l.Token)
				got, _ := s.Lease(ctx, l.Token)
				if got.Status != e.status {
					t.Errorf("lease status %s, want %s", got.Status, e.status)
				}
				task, err := s.Task(ctx, "task.a")
				if err != nil {
					t.Fatal(err)
				}
				atts, _ := s.Attempts(ctx, "task.a")
				dirs, _ := s.RetryDirectives(ctx, "task.a")
				lostSpent := e.name != "release" // a release never spends budget
				switch {
				case !started:
					if task.Status != TaskQueued || task.LostUsed != 0 || len(atts) != 0 || len(dirs) != 0 || task.Attempts != 1 {
						t.Errorf("after an unstarted lease's end: status %s, lost %d, attempts rows %d, directives %d, attempts %d; want queued, 0, 0, 0, 1",
							task.Status, task.LostUsed, len(atts), len(dirs), task.Attempts)
					}
					for _, o := range outs {
						if !o.Unstarted || o.Status != TaskQueued || o.Class != "" || o.Retry != nil {
							t.Errorf("outcome %+v: want unstarted, queued, no class, no retry", o)
						}
					}
					evs, _ := s.Events(ctx, "task.a")
					if last := evs[len(evs)-1]; last.Kind != EventReleased {
						t.Errorf("last event %s %q, want released", last.Kind, last.Message)
					}
					// The number is spent: the next grant is attempt 2.
					if _, err := s.RegisterWorker(ctx, Worker{ID: "w2", Pool: "p", Capacity: 1, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, t0.Add(12*time.Second)); err != nil {
						t.Fatal(err)
					}
					l2, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w2", Timeout: time.Hour}, t0.Add(12*time.Second))
					if err != nil || l2.Attempt != 2 {
						t.Errorf("next grant: attempt %d, %v; want 2", l2.Attempt, err)
					}
				case lostSpent:
					if task.LostUsed != 1 || len(atts) != 1 {
						t.Errorf("after a started lease's end: lost %d, attempts rows %d; want 1, 1", task.LostUsed, len(atts))
					}
				default:
					if task.LostUsed != 0 || len(atts) != 1 {
						t.Errorf("after a started lease's release: lost %d, attempts rows %d; want 0, 1", task.LostUsed, len(atts))
					}
				}
			})
		}
	}
}

// TestResultCompletesUnstartedLeaseAsStarted: a result is its lease's
// start too: it is accepted, and the lease it completes is no longer
// unstarted, its hard expiry no longer unbounded.
func TestResultCompletesUnstartedLeaseAsStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour, Prefetched: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, WorkerID: "w1", ExitCode: &zero}, nil, t0.Add(time.Second))
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("result of an unstarted lease: %+v, %v; want accepted", dec, err)
	}
	if task, _ := s.Task(ctx, "task.a"); task.Status != TaskSucceeded {
		t.Errorf("task %s, want succeeded", task.Status)
	}
	got, _ := s.Lease(ctx, l.Token)
	if got.Status != LeaseCompleted || got.Unstarted || !got.HardExpiresAt.Equal(got.ExpiresAt) {
		t.Errorf("completed lease: %s, unstarted %v, hard %s, expires %s; want completed, started, hard = expires", got.Status, got.Unstarted, got.HardExpiresAt, got.ExpiresAt)
	}
}
