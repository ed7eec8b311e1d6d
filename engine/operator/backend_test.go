package operator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// bucket is a Blobs of a backend's bucket in memory, recording what
// happens to it in log, which the copy's Put and Commit share.
type bucket struct {
	blobs map[string]int64
	log   *[]string
	stop  error // Remove's error, when set
}

func (b *bucket) Walk(fn func(string, int64) error) error {
	hashes := make([]string, 0, len(b.blobs))
	for h := range b.blobs {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		if err := fn(h, b.blobs[h]); err != nil {
			return err
		}
	}
	return nil
}

func (b *bucket) Remove(hash string) (int64, error) {
	*b.log = append(*b.log, "remove "+hash[:1])
	if b.stop != nil {
		return 0, b.stop
	}
	size := b.blobs[hash]
	delete(b.blobs, hash)
	return size, nil
}

func (b *bucket) CleanTemp(time.Duration) (int, error) { return 0, nil }

// TestBackend: each operation runs on a checked-out copy, which is
// committed when the operation succeeded and given back unchanged when
// it failed; the lock is given back in both cases. Garbage collection
// puts the state back before it removes a blob of the bucket, removes
// none when that put fails, and stops at once when the lock is lost; a
// dry run puts nothing and removes nothing.
func TestBackend(t *testing.T) {
	ctx := context.Background()
	ref, garbage, more := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	errLost := fmt.Errorf("%w: the backend's lock was lost", coordinator.ErrStopCollecting)
	errPut := errors.New("the state changed since it was read")
	for _, tc := range []struct {
		name       string
		do         func(b *Backend) error
		checkout   error
		put        error
		stop       error
		wantCreate bool
		wantLog    []string // puts, removals and commits, in order
		wantErr    error
		wantBlobs  []string // the first letter of each blob left
	}{
		{name: "a join token made and committed", do: func(b *Backend) error {
			_, err := b.CreateJoinToken(ctx, JoinTokenRequest{Pool: "edge", TTL: time.Hour})
			return err
		}, wantCreate: true, wantLog: []string{"commit true"}},
		{name: "an unknown join token: given back unchanged", do: func(b *Backend) error {
			_, err := b.RevokeJoinToken(ctx, "jt-nope")
			return err
		}, wantLog: []string{"commit false"}, wantErr: ErrNotFound},
		{name: "an unknown proposal: given back unchanged", do: func(b *Backend) error {
			_, err := b.DecideProposal(ctx, 7, protocol.ProposalDecisionRequest{Approve: true, By: "ann"})
			return err
		}, wantLog: []string{"commit false"}, wantErr: ErrNotFound},
		{name: "the lock is held: nothing checked out", do: func(b *Backend) error {
			_, err := b.RevokeJoinToken(ctx, "jt-1")
			return err
		}, checkout: errHeld, wantErr: errHeld},
		{name: "gc: the state put back, then the garbage removed", do: func(b *Backend) error {
			resp, err := b.CollectGarbage(ctx, false)
			if err == nil && (len(resp.Removed) != 2 || resp.Removed[0].SHA256 != garbage || resp.Kept != 1 || resp.RemovedBytes != 50) {
				t.Errorf("gc answered %+v", resp)
			}
			return err
		}, wantLog: []string{"put", "remove b", "remove c", "commit true"}, wantBlobs: []string{"a"}},
		{name: "gc dry run: nothing put, nothing removed", do: func(b *Backend) error {
			resp, err := b.CollectGarbage(ctx, true)
			if err == nil && (!resp.DryRun || len(resp.Removed) != 2 || resp.Removed[0].SHA256 != garbage) {
				t.Errorf("gc answered %+v", resp)
			}
			return err
		}, wantLog: []string{"commit true"}, wantBlobs: []string{"a", "b", "c"}},
		{name: "gc whose put is refused removes nothing", do: func(b *Backend) error {
			_, err := b.CollectGarbage(ctx, false)
			return err
		}, put: errPut, wantLog: []string{"put", "commit false"}, wantErr: errPut, wantBlobs: []string{"a", "b", "c"}},
		{name: "gc whose lock is lost stops at once", do: func(b *Backend) error {
			_, err := b.CollectGarbage(ctx, false)
			return err
		}, stop: errLost, wantLog: []string{"put", "remove b", "commit false"}, wantErr: coordinator.ErrStopCollecting, wantBlobs: []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openState(t)
			spec := `{"command":["cat","x"],"inputs":[{"path":"x","sha256":"` + ref + `","size":10}]}`
			if err := st.UpsertTask(ctx, state.TaskDef{Address: "task.c", Name: "c", Index: -1, DefHash: "hc", Spec: []byte(spec),
				Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 1}, t0); err != nil {
				t.Fatal(err)
			}
			var log []string
			blobs := &bucket{blobs: map[string]int64{ref: 10, garbage: 20, more: 30}, log: &log, stop: tc.stop}
			var created []bool
			b := &Backend{Pin: func() (string, error) { return "pin", nil }, Now: func() time.Time { return t0 },
				Checkout: func(ctx context.Context, create bool) (*Copy, error) {
					created = append(created, create)
					if tc.checkout != nil {
						return nil, tc.checkout
					}
					return &Copy{Store: st, ArtifactDir: filepath.Join(t.TempDir(), "artifacts"), Blobs: blobs,
						Put: func(context.Context) error {
							log = append(log, "put")
							return tc.put
						},
						Commit: func(_ context.Context, ok bool) error {
							log = append(log, map[bool]string{true: "commit true", false: "commit false"}[ok])
							return nil
						}}, nil
				}}
			if err := tc.do(b); !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(log, tc.wantLog) {
				t.Errorf("log %q, want %q", log, tc.wantLog)
			}
			if len(created) != 1 || created[0] != tc.wantCreate {
				t.Errorf("checkouts (create) %v, want [%v]", created, tc.wantCreate)
			}
			if tc.wantBlobs != nil {
				var left []string
				blobs.Walk(func(h string, _ int64) error { left = append(left, h[:1]); return nil })
				if !slices.Equal(left, tc.wantBlobs) {
					t.Errorf("blobs left %q, want %q", left, tc.wantBlobs)
				}
			}
		})
	}
}

var errHeld = errors.New("the backend is locked")
