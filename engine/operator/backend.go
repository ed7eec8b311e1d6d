package operator

import (
	"context"
	"errors"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Backend carries out operations on a state kept in a backend (an object
// store, package backend), as Local does on a state file: each one takes
// the backend's lock, pulls the state into a local copy, writes it there
// (Local, one write transaction), puts the copy back with a conditional
// write, and releases the lock. While an apply holds the backend's lock
// the operation is refused (its coordinator runs on another machine's
// copy); Checkout says so.
type Backend struct {
	// Checkout takes the backend's lock and pulls the state into a local
	// copy, open as store, with its artifact folder. commit, called once,
	// puts the copy back when ok and it changed, and releases the lock in
	// every case.
	Checkout func(ctx context.Context) (store *state.Store, artifactDir string, commit func(ctx context.Context, ok bool) error, err error)
	// Pin and Now are Local's.
	Pin func() (string, error)
	Now func() time.Time
}

var _ Operator = (*Backend)(nil)

// ErrBackendGC: the blobs of a backend's bucket are not collected yet.
var ErrBackendGC = errors.New("wdc gc does not collect the blobs of a backend's bucket yet: nothing was removed")

// run does op on a checked-out copy and commits it when op succeeded.
func run[T any](ctx context.Context, b *Backend, op func(*Local) (T, error)) (T, error) {
	var zero T
	store, dir, commit, err := b.Checkout(ctx)
	if err != nil {
		return zero, err
	}
	out, err := op(&Local{Store: store, ArtifactDir: dir, Pin: b.Pin, Now: b.Now})
	if cerr := commit(ctx, err == nil); err == nil && cerr != nil {
		return zero, cerr
	}
	return out, err
}

// CollectGarbage implements Operator: ErrBackendGC.
func (b *Backend) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	return protocol.GCResponse{}, ErrBackendGC
}

// CreateJoinToken implements Operator.
func (b *Backend) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	return run(ctx, b, func(l *Local) (protocol.JoinFile, error) { return l.CreateJoinToken(ctx, req) })
}

// RevokeJoinToken implements Operator.
func (b *Backend) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	return run(ctx, b, func(l *Local) (protocol.RevokeJoinTokenResponse, error) { return l.RevokeJoinToken(ctx, id) })
}

// DecideProposal implements Operator.
func (b *Backend) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	return run(ctx, b, func(l *Local) (protocol.ProposalDecisionResponse, error) { return l.DecideProposal(ctx, id, req) })
}
