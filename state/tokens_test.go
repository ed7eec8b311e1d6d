package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTokenReservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s) // task.a queued, worker w1 active
	grant := func() (Lease, error) {
		l, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
		if err == nil {
			endLease(t, s, l.Token, LeaseCompleted)
		}
		return l, err
	}
	// No reservation (a local state): tokens are not limited.
	for range 3 {
		if _, err := grant(); err != nil {
			t.Fatal(err)
		}
	}
	before := serial(t, s)
	if err := s.ReserveTokens(ctx, 5); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		op        func() error
		wantToken int64 // the counter after the step
		wantErr   error
	}{
		{"grant 4", func() error { _, err := grant(); return err }, 4, nil},
		{"grant 5", func() error { _, err := grant(); return err }, 5, nil},
		{"grant past the block", func() error { _, err := grant(); return err }, 5, ErrTokensNotReserved},
		{"refused grant is claimable later", func() error { _, err := grant(); return err }, 5, ErrNotClaimable},
		{"reserve back", func() error { return s.ReserveTokens(ctx, 4) }, 5, ErrInvalid},
		{"reserve more", func() error { return s.ReserveTokens(ctx, 10) }, 5, nil},
		{"skip to the end of the block", func() error {
			from, to, err := s.SkipReservedTokens(ctx)
			if err == nil && (from != 5 || to != 10) {
				t.Errorf("skip = %d → %d, want 5 → 10", from, to)
			}
			return err
		}, 10, nil},
		{"past the block after the skip", func() error { _, err := grant(); return err }, 10, ErrTokensNotReserved},
		{"reserve and grant", func() error {
			if err := s.ReserveTokens(ctx, 20); err != nil {
				return err
			}
			l, err := grant()
			if err == nil && l.Token != 11 {
				t.Errorf("token after the skip = %d, want 11", l.Token)
			}
			return err
		}, 11, nil},
	}
	for _, st := range steps {
		if err := st.op(); !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.wantErr)
		}
		r, err := s.Tokens(ctx)
		if err != nil || r.LastToken != st.wantToken || !r.Reserved {
			t.Fatalf("%s: tokens %+v, %v; want last %d", st.name, r, err, st.wantToken)
		}
	}
	// Reserving and skipping is coordination: only the grants moved the
	// serial.
	if got := serial(t, s); got != before+3 {
		t.Errorf("serial moved by %d, want 3 (one per grant)", got-before)
	}
}
