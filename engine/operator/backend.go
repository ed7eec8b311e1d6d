package operator

import (
	"context"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
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
	// copy. With create, a backend that holds no state yet gives a new
	// one (put back with a conditional create); without, that is an
	// error.
	Checkout func(ctx context.Context, create bool) (*Copy, error)
	// Pin and Now are Local's.
	Pin func() (string, error)
	Now func() time.Time
}

// Copy is a state checked out of a backend: the backend's lock is held
// until Commit.
type Copy struct {
	// Store is the local copy, open.
	Store *state.Store
	// ArtifactDir is the copy's artifact folder (Local's).
	ArtifactDir string
	// Blobs are the blobs of the backend's bucket.
	Blobs coordinator.Blobs
	// Put puts the copy back now, changed or not, with a conditional
	// write on the ETag pulled (or last put).
	Put func(ctx context.Context) error
	// Commit, called once, puts the copy back when ok and its content
	// changed since it was pulled or last put, and releases the lock in
	// every case.
	Commit func(ctx context.Context, ok bool) error
}

var _ Operator = (*Backend)(nil)

// run does op on a copy checked out (create: made when the backend holds
// no state) and commits it when op succeeded.
func run[T any](ctx context.Context, b *Backend, create bool, op func(*Copy) (T, error)) (T, error) {
	var zero T
	c, err := b.Checkout(ctx, create)
	if err != nil {
		return zero, err
	}
	out, err := op(c)
	if cerr := c.Commit(ctx, err == nil); err == nil && cerr != nil {
		return zero, cerr
	}
	return out, err
}

func (b *Backend) local(c *Copy) *Local {
	return &Local{Store: c.Store, ArtifactDir: c.ArtifactDir, Pin: b.Pin, Now: b.Now}
}

// CollectGarbage implements Operator: it removes (with dryRun, only
// lists) the blobs of the backend's bucket that the state does not refer
// to, under the backend's lock (so no apply uploads meanwhile). Before it
// removes any, it puts the state back with a new put id
// (state.Store.NewPutID): a writer that read the state before, and whose
// lock has expired without its knowing (an apply paused in the middle of
// a checkpoint), cannot put a state that names a blob removed here, since
// its conditional write names an ETag the object no longer has. The
// state's content, and so its serial, stay.
func (b *Backend) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	return run(ctx, b, false, func(c *Copy) (protocol.GCResponse, error) {
		if !dryRun {
			if _, err := c.Store.NewPutID(ctx); err != nil {
				return protocol.GCResponse{}, err
			}
			if err := c.Put(ctx); err != nil {
				return protocol.GCResponse{}, err
			}
		}
		return coordinator.CollectGarbage(ctx, c.Store, c.Blobs, coordinator.GCOptions{DryRun: dryRun})
	})
}

// CreateJoinToken implements Operator. A backend that holds no state yet
// gets one, holding the token.
func (b *Backend) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	return run(ctx, b, true, func(c *Copy) (protocol.JoinFile, error) { return b.local(c).CreateJoinToken(ctx, req) })
}

// RevokeJoinToken implements Operator.
func (b *Backend) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	return run(ctx, b, false, func(c *Copy) (protocol.RevokeJoinTokenResponse, error) { return b.local(c).RevokeJoinToken(ctx, id) })
}

// DecideProposal implements Operator.
func (b *Backend) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	return run(ctx, b, false, func(c *Copy) (protocol.ProposalDecisionResponse, error) {
		return b.local(c).DecideProposal(ctx, id, req)
	})
}
