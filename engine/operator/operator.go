// Package operator carries out what an operator asks of a state outside a
// task's run: collect the artifact store's garbage, make and revoke join
// tokens, approve and reject proposals.
//
// # What it owns, and what it does not
//
// It owns the one interface those commands use (Operator) and its
// implementations: Local writes the state file itself, each operation one
// write transaction that no apply may hold the lock during; Remote asks the
// coordinator of the running apply through its operator routes
// (docs/protocol.md, "Operator routes"), so that nothing writes the state
// beside that coordinator; Fallback writes locally and turns to a running
// apply when the state answers that one holds the lock; Backend writes a
// state kept in a backend under the backend's lock, on a copy it puts
// back. A command picks
// one, calls it, and renders the answer: the words for people are the
// CLI's (cmd/wdc), the rules of each write are the state's (package state)
// and the coordinator's.
package operator

import (
	"context"
	"errors"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Operator is what `wdc gc`, `wdc join-token create|revoke`, `wdc approve`
// and `wdc reject` ask of a state. Every implementation answers with the
// operator routes' response types, whichever way it writes.
//
// Errors: ErrNotFound (wrapped: no such join token or proposal), a
// *DecidedError (a proposal decided before), a *state.LockedError (Local,
// when an apply holds the lock), a *protocol.APIError for any other refusal
// of a running apply, an *UnreachableError when that apply does not
// answer, and the state's own errors.
type Operator interface {
	// CollectGarbage removes (with dryRun, only lists) the blobs of the
	// artifact store (with a backend, of its bucket) that no attempt of
	// the tasks' current definitions refers to.
	CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error)
	// CreateJoinToken makes a join token and returns its join file: the
	// only place the secret is ever seen.
	CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error)
	// RevokeJoinToken revokes a join token: no new registrations, and the
	// workers that joined with it drain (when an apply runs). Revoking a
	// revoked token answers it again.
	RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error)
	// DecideProposal approves or rejects a proposal, once.
	DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error)
}

// JoinTokenRequest asks for a join token of Pool (an external pool of the
// configuration; the caller checks that).
type JoinTokenRequest struct {
	Pool string
	// Labels, when not nil, narrows the pool's labels for the workers
	// that join with the token; nil means the pool's labels.
	Labels map[string]string
	// TTL is how long the token registers workers (the caller bounds it:
	// coordinator.MaxJoinTTL).
	TTL time.Duration
}

// ErrNotFound (wrapped): the state has no join token or proposal of that
// id.
var ErrNotFound = errors.New("not found")

// DecidedError says a proposal was approved or rejected before: a decision
// is made once.
type DecidedError struct {
	// Why is the state's or the coordinator's sentence: which proposal,
	// and how it was decided.
	Why string
}

func (e *DecidedError) Error() string { return e.Why }

// UnreachableError says the apply holding the state's lock did not answer
// an operator call: it may be gone (its lock then expires or is taken over
// by the next apply).
type UnreachableError struct {
	// Lock is the lock row of that apply (holder, host, pid, URL).
	Lock state.Lock
	Err  error
}

func (e *UnreachableError) Error() string {
	return "the apply holding the state's lock (" + e.Lock.Holder + ") does not answer at " + e.Lock.CoordinatorURL + ": " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Fallback writes through Local and, when the state answers that an apply
// holds its lock (a *state.LockedError: the apply started, or was already
// running), through the Operator that Remote returns for that apply.
// Remote is called at most once, and only then.
type Fallback struct {
	Local  Operator
	Remote func() (Operator, error)

	remote Operator
}

var _ Operator = (*Fallback)(nil)

// via runs op on Local, and again on the running apply's operator when
// Local is refused by the lock.
func via[T any](f *Fallback, op func(Operator) (T, error)) (T, error) {
	out, err := op(f.Local)
	var locked *state.LockedError
	if !errors.As(err, &locked) {
		return out, err
	}
	if f.remote == nil {
		r, rerr := f.Remote()
		if rerr != nil {
			var zero T
			return zero, rerr
		}
		f.remote = r
	}
	return op(f.remote)
}

// CollectGarbage implements Operator.
func (f *Fallback) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	return via(f, func(o Operator) (protocol.GCResponse, error) { return o.CollectGarbage(ctx, dryRun) })
}

// CreateJoinToken implements Operator.
func (f *Fallback) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	return via(f, func(o Operator) (protocol.JoinFile, error) { return o.CreateJoinToken(ctx, req) })
}

// RevokeJoinToken implements Operator.
func (f *Fallback) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	return via(f, func(o Operator) (protocol.RevokeJoinTokenResponse, error) { return o.RevokeJoinToken(ctx, id) })
}

// DecideProposal implements Operator.
func (f *Fallback) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	return via(f, func(o Operator) (protocol.ProposalDecisionResponse, error) { return o.DecideProposal(ctx, id, req) })
}
