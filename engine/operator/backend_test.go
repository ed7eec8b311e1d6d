package operator

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TestBackend: each operation runs on a checked-out copy, which is
// committed when the operation succeeded and given back unchanged when
// it failed; the lock is given back in both cases.
func TestBackend(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		do         func(b *Backend) error
		checkout   error
		wantCommit []bool // the ok of each commit
		wantErr    error
	}{
		{"a join token made and committed", func(b *Backend) error {
			_, err := b.CreateJoinToken(ctx, JoinTokenRequest{Pool: "edge", TTL: time.Hour})
			return err
		}, nil, []bool{true}, nil},
		{"an unknown join token: given back unchanged", func(b *Backend) error {
			_, err := b.RevokeJoinToken(ctx, "jt-nope")
			return err
		}, nil, []bool{false}, ErrNotFound},
		{"an unknown proposal: given back unchanged", func(b *Backend) error {
			_, err := b.DecideProposal(ctx, 7, protocol.ProposalDecisionRequest{Approve: true, By: "ann"})
			return err
		}, nil, []bool{false}, ErrNotFound},
		{"the lock is held: nothing checked out", func(b *Backend) error {
			_, err := b.RevokeJoinToken(ctx, "jt-1")
			return err
		}, errHeld, nil, errHeld},
		{"gc is not there yet", func(b *Backend) error {
			_, err := b.CollectGarbage(ctx, false)
			return err
		}, nil, nil, ErrBackendGC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openState(t)
			var commits []bool
			b := &Backend{Pin: func() (string, error) { return "pin", nil }, Now: func() time.Time { return t0 },
				Checkout: func(ctx context.Context) (storeOut *state.Store, dir string, commit func(context.Context, bool) error, err error) {
					if tc.checkout != nil {
						return nil, "", nil, tc.checkout
					}
					return st, filepath.Join(t.TempDir(), "artifacts"), func(_ context.Context, ok bool) error {
						commits = append(commits, ok)
						return nil
					}, nil
				}}
			if err := tc.do(b); !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(commits) != len(tc.wantCommit) {
				t.Fatalf("commits %v, want %v", commits, tc.wantCommit)
			}
			for i := range commits {
				if commits[i] != tc.wantCommit[i] {
					t.Fatalf("commits %v, want %v", commits, tc.wantCommit)
				}
			}
		})
	}
}

var errHeld = errors.New("the backend is locked")
