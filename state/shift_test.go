package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestShiftLiveness: a test clock's jump moves the last heartbeat of live
// workers only (a stale or gone one stays as it was), so a sweep at the
// jumped time finds none stale; it is refused while a lease is active or
// for a negative duration, and then changes nothing.
func TestShiftLiveness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		d         time.Duration
		lease     bool // an active lease of w1
		wantMoved int
		wantErr   error
	}{
		{name: "live workers move", d: time.Hour, wantMoved: 2},
		{name: "zero moves nothing", d: 0, wantMoved: 2},
		{name: "negative is refused", d: -time.Second, wantErr: ErrInvalid},
		{name: "an active lease refuses it", d: time.Hour, lease: true, wantErr: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			seed(t, s) // w1: ttl 10 s, registered at t0
			for _, id := range []string{"w2", "w3"} {
				if _, err := s.RegisterWorker(ctx, Worker{ID: id, Pool: "p", Capacity: 1, HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, t0); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SetWorkerStatus(ctx, "w3", WorkerStale, t0); err != nil {
				t.Fatal(err)
			}
			if tc.lease {
				if _, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour, Grace: time.Minute}, t0); err != nil {
					t.Fatal(err)
				}
			}
			var moved int
			err := s.write(ctx, func(tx *Tx) error {
				var err error
				moved, err = tx.ShiftLiveness(tc.d)
				return err
			})
			if !errors.Is(err, tc.wantErr) || moved != tc.wantMoved {
				t.Fatalf("ShiftLiveness(%s) = %d, %v; want %d, %v", tc.d, moved, err, tc.wantMoved, tc.wantErr)
			}
			want := map[string]time.Time{"w1": t0, "w2": t0, "w3": t0}
			if err == nil {
				want["w1"], want["w2"] = t0.Add(tc.d), t0.Add(tc.d)
			}
			for id, at := range want {
				w, err := s.Worker(ctx, id)
				if err != nil || !w.LastHeartbeatAt.Equal(at) {
					t.Errorf("%s: last heartbeat %s (%v), want %s", id, w.LastHeartbeatAt, err, at)
				}
			}
			if err != nil || tc.d == 0 {
				return
			}
			// At t0 + d + 5 s the moved workers are 5 s into their 10 s ttl.
			var res SweepResult
			if err := s.write(ctx, func(tx *Tx) error {
				var err error
				res, err = tx.Sweep(t0.Add(tc.d+5*time.Second), nil)
				return err
			}); err != nil || len(res.Stale) != 0 {
				t.Fatalf("sweep after the jump: %+v, %v; want no worker stale", res.Stale, err)
			}
		})
	}
}

// TestFailWritesAfter: after n writes every write fails as on a full
// disk, before it changes anything, and onFull is called once; the lock's
// writes still pass.
func TestFailWritesAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	full := 0
	s.FailWritesAfter(1, func() { full++ })
	hb := func(at time.Duration) error {
		_, err := s.Heartbeat(ctx, "w1", t0.Add(at))
		return err
	}
	for i, tc := range []struct {
		at   time.Duration
		full bool
	}{{time.Second, false}, {2 * time.Second, true}, {3 * time.Second, true}} {
		err := hb(tc.at)
		if errors.Is(err, ErrDiskFull) != tc.full {
			t.Fatalf("write %d: %v, want full %v", i+1, err, tc.full)
		}
	}
	if full != 1 {
		t.Fatalf("onFull called %d times, want 1", full)
	}
	if w, err := s.Worker(ctx, "w1"); err != nil || !w.LastHeartbeatAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("last heartbeat %s (%v), want the first write's t0+1s only", w.LastHeartbeatAt, err)
	}
	if _, _, err := s.AcquireLock(ctx, LockRequest{Holder: "test", Host: "h", PID: 1, TTL: time.Minute}, t0); err != nil {
		t.Fatalf("the lock's write: %v", err)
	}
}
