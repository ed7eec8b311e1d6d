package state

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestApplyLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	req := LockRequest{Holder: "alice@h1", Host: "h1", PID: 100, TTL: 30 * time.Second}

	a, prev, err := s.AcquireLock(ctx, req, t0)
	if err != nil || prev != nil {
		t.Fatalf("AcquireLock = %v, %v", prev, err)
	}
	if len(a.ID) != 32 || !a.StartedAt.Equal(t0) || !a.ExpiresAt.Equal(t0.Add(30*time.Second)) {
		t.Errorf("lock %+v", a)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || snap.Lock == nil || *snap.Lock != a {
		t.Fatalf("snapshot lock %+v, %v; want %+v", snap.Lock, err, a)
	}

	// Held: a second apply is refused and learns who holds it.
	bob := LockRequest{Holder: "bob@h2", Host: "h2", PID: 200, TTL: 30 * time.Second}
	_, _, err = s.AcquireLock(ctx, bob, t0.Add(10*time.Second))
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Lock != a || !strings.Contains(err.Error(), "alice@h1") {
		t.Fatalf("second AcquireLock: %v", err)
	}
	// A take-over naming another ID does not take it either.
	bob.TakeOver = "not-the-id"
	if _, _, err := s.AcquireLock(ctx, bob, t0.Add(10*time.Second)); !errors.Is(err, ErrLocked) {
		t.Fatalf("take-over with a wrong ID: %v", err)
	}

	// The holder renews.
	a2, err := s.RenewLock(ctx, a.ID, 30*time.Second, t0.Add(20*time.Second))
	if err != nil || !a2.ExpiresAt.Equal(t0.Add(50*time.Second)) || a2.ID != a.ID {
		t.Fatalf("RenewLock = %+v, %v", a2, err)
	}
	// Not yet expired at +49s; expired at +50s: bob takes over.
	bob.TakeOver = ""
	if _, _, err := s.AcquireLock(ctx, bob, t0.Add(49*time.Second)); !errors.Is(err, ErrLocked) {
		t.Fatalf("AcquireLock before expiry: %v", err)
	}
	b, prev, err := s.AcquireLock(ctx, bob, t0.Add(50*time.Second))
	if err != nil || prev == nil || prev.ID != a.ID || b.ID == a.ID || b.Holder != "bob@h2" {
		t.Fatalf("take-over of an expired lock = %+v, %+v, %v", b, prev, err)
	}
	// Alice's renew and release now fail: she lost the lock.
	if _, err := s.RenewLock(ctx, a.ID, time.Minute, t0.Add(51*time.Second)); !errors.Is(err, ErrLockLost) {
		t.Errorf("RenewLock after take-over: %v", err)
	}
	if err := s.ReleaseLock(ctx, a.ID, t0.Add(51*time.Second)); !errors.Is(err, ErrLockLost) {
		t.Errorf("ReleaseLock after take-over: %v", err)
	}

	// Carol finds bob's pid dead and takes over by ID before expiry.
	carol := LockRequest{Holder: "carol@h2", Host: "h2", PID: 300, TTL: time.Minute, TakeOver: b.ID}
	c, prev, err := s.AcquireLock(ctx, carol, t0.Add(52*time.Second))
	if err != nil || prev == nil || prev.ID != b.ID {
		t.Fatalf("take-over by ID = %+v, %v", prev, err)
	}
	// An operator forces it open; then a release by carol finds it lost.
	if _, err := s.ForceUnlock(ctx, "wrong", t0.Add(53*time.Second)); !errors.Is(err, ErrNotFound) {
		t.Errorf("ForceUnlock(wrong id): %v", err)
	}
	if got, err := s.ForceUnlock(ctx, c.ID, t0.Add(53*time.Second)); err != nil || got != c {
		t.Fatalf("ForceUnlock = %+v, %v", got, err)
	}
	if err := s.ReleaseLock(ctx, c.ID, t0.Add(54*time.Second)); !errors.Is(err, ErrLockLost) {
		t.Errorf("ReleaseLock after force-unlock: %v", err)
	}
	// Free again: acquire and release cleanly.
	d, _, err := s.AcquireLock(ctx, req, t0.Add(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLock(ctx, d.ID, t0.Add(61*time.Second)); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.Snapshot(ctx); snap.Lock != nil {
		t.Errorf("lock after release: %+v", snap.Lock)
	}

	evs, err := s.Events(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	want := []string{EventLockAcquired, EventLockTakenOver, EventLockTakenOver, EventLockForced, EventLockAcquired, EventLockReleased}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

func TestApplyLockValidation(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if _, _, err := s.AcquireLock(context.Background(), LockRequest{Holder: "x"}, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("AcquireLock with ttl 0: %v", err)
	}
	if _, err := s.RenewLock(context.Background(), "id", 0, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("RenewLock with ttl 0: %v", err)
	}
}

// TestRenewLockNoticesTheStateFileGone: a lock whose state file was
// removed or replaced under the apply cannot be renewed (ErrLockLost): the
// apply's writes would go to a file nobody reads.
func TestRenewLockNoticesTheStateFileGone(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := setup(t)
			l, _, err := s.AcquireLock(ctx, LockRequest{Holder: "a@h", Host: "h", PID: 1, TTL: 30 * time.Second}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.RenewLock(ctx, l.ID, 30*time.Second, t0.Add(time.Second)); err != nil {
				t.Fatalf("renewal with the file in place: %v", err)
			}
			if err := os.Remove(s.abs); err != nil {
				t.Fatal(err)
			}
			if how == "replaced" {
				if err := os.WriteFile(s.abs, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.RenewLock(ctx, l.ID, 30*time.Second, t0.Add(2*time.Second)); !errors.Is(err, ErrLockLost) {
				t.Errorf("renewal after the state file was %s: %v, want ErrLockLost", how, err)
			}
		})
	}
}
