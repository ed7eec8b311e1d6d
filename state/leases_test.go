package state

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// endLease ends the lease with raw SQL (the coordinator's result acceptance
// will do this) and puts the task back in the queue.
func endLease(t *testing.T, s *Store, token int64, status LeaseStatus) {
	t.Helper()
	if _, err := s.db.Exec(`UPDATE leases SET status = ?, ended_at = 1 WHERE token = ?`, string(status), token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`UPDATE tasks SET status = 'queued' WHERE address = (SELECT task FROM leases WHERE token = ?)`, token); err != nil {
		t.Fatal(err)
	}
}

func TestGrantLeaseCountsAttemptsAndTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	if err := s.UpsertTask(ctx, TaskDef{Address: "task.b", Name: "b", Index: -1, DefHash: "hb", Status: TaskQueued, MaxAttempts: 1}, t0); err != nil {
		t.Fatal(err)
	}
	grant := func(task string) Lease {
		t.Helper()
		l, err := s.GrantLease(ctx, GrantRequest{Task: task, WorkerID: "w1", Timeout: time.Hour}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	steps := []struct {
		task        string
		wantAttempt int
		wantToken   int64
	}{
		{"task.a", 1, 1},
		{"task.b", 1, 2},
		{"task.a", 2, 3},
		{"task.a", 3, 4},
		{"task.b", 2, 5},
	}
	for _, st := range steps {
		l := grant(st.task)
		if l.Attempt != st.wantAttempt || l.Token != st.wantToken || l.Status != LeaseActive || l.DefHash == "" {
			t.Errorf("grant %s: attempt %d token %d status %s; want attempt %d token %d active",
				st.task, l.Attempt, l.Token, l.Status, st.wantAttempt, st.wantToken)
		}
		task, err := s.Task(ctx, st.task)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != TaskRunning || task.Attempts != st.wantAttempt {
			t.Errorf("task %s after grant: status %s attempts %d", st.task, task.Status, task.Attempts)
		}
		endLease(t, s, l.Token, LeaseCompleted)
	}
	atts, err := s.Attempts(ctx, "task.a")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 3 || atts[0].Token != 1 || atts[1].Token != 3 || atts[2].Token != 4 {
		t.Errorf("attempts of task.a: %+v", atts)
	}
	if last, err := s.LastToken(ctx); err != nil || last != 5 {
		t.Errorf("LastToken = %d, %v; want 5", last, err)
	}
	all, err := s.Leases(ctx, "")
	if err != nil || len(all) != 5 {
		t.Errorf("Leases(\"\") = %d leases, %v", len(all), err)
	}
}

func TestTokensIncreaseAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	var last int64
	for round := range 4 {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			seed(t, s)
		}
		for range 3 {
			l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token <= last {
				t.Fatalf("round %d: token %d after %d", round, l.Token, last)
			}
			last = l.Token
			endLease(t, s, l.Token, LeaseExpired)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if last != 12 {
		t.Errorf("last token %d, want 12", last)
	}
}

func TestGrantLeaseExpiry(t *testing.T) {
	t.Parallel()
	// The worker's ttl is 10s (seed).
	tests := []struct {
		name           string
		timeout, grace time.Duration
		wantExpires    time.Duration // after t0
		wantHard       time.Duration
	}{
		{"ttl bound", time.Hour, 2 * time.Minute, 10 * time.Second, time.Hour + 2*time.Minute},
		{"hard bound", 3 * time.Second, 2 * time.Second, 5 * time.Second, 5 * time.Second},
		{"equal bounds", 8 * time.Second, 2 * time.Second, 10 * time.Second, 10 * time.Second},
		{"no grace", 4 * time.Second, 0, 4 * time.Second, 4 * time.Second},
		{"sub-millisecond rounds up", time.Microsecond, 0, time.Millisecond, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s)
			l, err := s.GrantLease(context.Background(), GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: tt.timeout, Grace: tt.grace}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.ExpiresAt.Sub(t0); got != tt.wantExpires {
				t.Errorf("expires after %s, want %s", got, tt.wantExpires)
			}
			if got := l.HardExpiresAt.Sub(t0); got != tt.wantHard {
				t.Errorf("hard expiry after %s, want %s", got, tt.wantHard)
			}
			if !l.GrantedAt.Equal(t0) || !l.RenewedAt.Equal(t0) || !l.EndedAt.IsZero() {
				t.Errorf("lease times %+v", l)
			}
		})
	}
}

func TestHeartbeatRenewsWithinHardExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	// ttl 10s, timeout 20s + grace 5s: hard expiry at t0+25s.
	l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: 20 * time.Second, Grace: 5 * time.Second}, t0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at          time.Duration // heartbeat at t0 + at
		wantRenewed int
		wantExpires time.Duration
	}{
		{4 * time.Second, 1, 14 * time.Second},  // now + ttl
		{2 * time.Second, 1, 14 * time.Second},  // a late-arriving earlier beat never moves expiry back
		{12 * time.Second, 1, 22 * time.Second}, // now + ttl
		{20 * time.Second, 1, 25 * time.Second}, // capped at hard expiry
		{24 * time.Second, 1, 25 * time.Second}, // still capped
		{26 * time.Second, 0, 25 * time.Second}, // expired: not revived
	}
	for _, st := range steps {
		n, err := s.Heartbeat(ctx, "w1", t0.Add(st.at))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Lease(ctx, l.Token)
		if err != nil {
			t.Fatal(err)
		}
		if n != st.wantRenewed || got.ExpiresAt.Sub(t0) != st.wantExpires {
			t.Errorf("heartbeat at +%s: renewed %d, expires +%s; want %d, +%s", st.at, n, got.ExpiresAt.Sub(t0), st.wantRenewed, st.wantExpires)
		}
		if got.HardExpiresAt.Sub(t0) != 25*time.Second {
			t.Errorf("hard expiry moved to +%s", got.HardExpiresAt.Sub(t0))
		}
		w, err := s.Worker(ctx, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if !w.LastHeartbeatAt.Equal(t0.Add(st.at)) || w.LeasesHeld != 1 {
			t.Errorf("worker after heartbeat: %+v", w)
		}
	}
}

func TestHeartbeatSkipsEndedLeasesAndOtherWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	if _, err := s.RegisterWorker(ctx, Worker{ID: "w2", Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: 10 * time.Second}, t0); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"task.b", "task.c"} {
		if err := s.UpsertTask(ctx, TaskDef{Address: a, Name: a[5:], Index: -1, DefHash: "h", Status: TaskQueued, MaxAttempts: 1}, t0); err != nil {
			t.Fatal(err)
		}
	}
	la, _ := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
	lb, _ := s.GrantLease(ctx, GrantRequest{Task: "task.b", WorkerID: "w1", Timeout: time.Hour}, t0)
	lc, err := s.GrantLease(ctx, GrantRequest{Task: "task.c", WorkerID: "w2", Timeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	endLease(t, s, lb.Token, LeaseCompleted)
	n, err := s.Heartbeat(ctx, "w1", t0.Add(5*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Heartbeat = %d, %v; want 1", n, err)
	}
	for _, c := range []struct {
		token int64
		want  time.Duration
	}{{la.Token, 15 * time.Second}, {lb.Token, 10 * time.Second}, {lc.Token, 10 * time.Second}} {
		l, err := s.Lease(ctx, c.token)
		if err != nil {
			t.Fatal(err)
		}
		if l.ExpiresAt.Sub(t0) != c.want {
			t.Errorf("lease %d expires +%s, want +%s", c.token, l.ExpiresAt.Sub(t0), c.want)
		}
	}
}

func TestGrantLeaseRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		prepare string // raw SQL run after seed
		req     GrantRequest
		want    error
	}{
		{"lease held", "", GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, ErrLeaseHeld},
		{"succeeded", `UPDATE leases SET status = 'completed', ended_at = 1; UPDATE tasks SET status = 'succeeded'`,
			GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, ErrTaskFinished},
		{"failed", `UPDATE leases SET status = 'completed', ended_at = 1; UPDATE tasks SET status = 'failed'`,
			GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, ErrTaskFinished},
		{"cancelled", `UPDATE leases SET status = 'revoked', ended_at = 1; UPDATE tasks SET status = 'cancelled'`,
			GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, ErrTaskFinished},
		{"unknown worker", `UPDATE leases SET status = 'completed', ended_at = 1`,
			GrantRequest{Task: "task.a", WorkerID: "w-nobody", Timeout: time.Hour}, ErrNotFound},
		{"draining worker", `UPDATE leases SET status = 'completed', ended_at = 1; UPDATE workers SET status = 'draining'`,
			GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, ErrWorkerNotActive},
		{"negative grace", `UPDATE leases SET status = 'completed', ended_at = 1`,
			GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour, Grace: -1}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s)
			first, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.prepare != "" {
				if _, err := s.db.Exec(tt.prepare); err != nil {
					t.Fatal(err)
				}
			}
			before, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.GrantLease(ctx, tt.req, t0.Add(time.Second)); !errors.Is(err, tt.want) {
				t.Fatalf("GrantLease: %v, want %v", err, tt.want)
			}
			after, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Serial != before.Serial || len(after.Tasks) != 1 || after.Tasks[0].Attempts != 1 {
				t.Errorf("a refused grant changed the state: %+v", after)
			}
			if last, _ := s.LastToken(ctx); last != first.Token {
				t.Errorf("a refused grant used a token: last %d", last)
			}
		})
	}
}

// TestConcurrentGrantOneWinner races many goroutines, over two Stores (two
// connection pools on one file, so the Go-side writer lock does not
// serialize them), to lease one task: exactly one wins, the others get
// ErrLeaseHeld from the database's unique index.
func TestConcurrentGrantOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s1, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	seed(t, s1)
	for i := range 5 {
		if i > 0 {
			endLease(t, s1, int64(i), LeaseExpired)
		}
		const n = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []Lease
		var held int
		start := make(chan struct{})
		for g := range n {
			wg.Go(func() {
				s := s1
				if g%2 == 1 {
					s = s2
				}
				<-start
				l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, l)
				case errors.Is(err, ErrLeaseHeld):
					held++
				default:
					t.Errorf("GrantLease: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 || held != n-1 {
			t.Fatalf("round %d: %d winners, %d ErrLeaseHeld; want 1 and %d", i, len(won), held, n-1)
		}
		if won[0].Token != int64(i+1) || won[0].Attempt != i+1 {
			t.Errorf("round %d: winner %+v", i, won[0])
		}
	}
}

func TestUpsertTaskKeepsAttemptsResetsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// While the lease is active the definition cannot be replaced.
	def := TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h2", Spec: []byte(`{"v":2}`), Status: TaskQueued, MaxAttempts: 5, MaxLost: 1}
	if err := s.UpsertTask(ctx, def, t0); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("UpsertTask with an active lease: %v, want ErrLeaseHeld", err)
	}
	// The coordinator fails the task (simulated with raw SQL).
	if _, err := s.db.Exec(`UPDATE leases SET status = 'completed', ended_at = 1 WHERE token = ?;
		UPDATE tasks SET status = 'failed', failures_used = 1, last_error = 'exit 1', finished_at = 5`, l.Token); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	if err := s.UpsertTask(ctx, def, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.Task(ctx, "task.a")
	if err != nil {
		t.Fatal(err)
	}
	want := Task{Address: "task.a", Name: "a", Index: -1, DefHash: "h2", Spec: def.Spec, Status: TaskQueued,
		Attempts: 1, MaxAttempts: 5, MaxLost: 1, CreatedAt: t0, UpdatedAt: later}
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("task after upsert (-want +got):\n%s", d)
	}
	l2, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, later)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Attempt != 2 || l2.DefHash != "h2" {
		t.Errorf("lease after redefinition: %+v", l2)
	}
	// A final status records finished_at.
	endLease(t, s, l2.Token, LeaseRevoked)
	def.Status = TaskCancelled
	if err := s.UpsertTask(ctx, def, later); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Task(ctx, "task.a"); got.Status != TaskCancelled || !got.FinishedAt.Equal(later) {
		t.Errorf("cancelled task: %+v", got)
	}
}
