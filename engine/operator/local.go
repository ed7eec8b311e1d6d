package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// NextApplyNote is the note of a proposal approved with no apply running.
const NextApplyNote = "it runs in the next wdc apply"

// Local carries out operations on the state file itself, each in one write
// transaction of Store that refuses with a *state.LockedError when an apply
// holds the lock (so it never writes beside a running coordinator).
type Local struct {
	// Store is the open state; a read-only one serves CollectGarbage with
	// dryRun only.
	Store *state.Store
	// ArtifactDir is the artifact store's folder (apply.ArtifactFolder of
	// the work folder).
	ArtifactDir string
	// Pin returns the SHA-256 fingerprint of the CA a joining worker
	// verifies the coordinator by ("" when it serves plain HTTP on
	// loopback); only CreateJoinToken calls it.
	Pin func() (string, error)
	// Now is the clock of expiries and decisions.
	Now func() time.Time
}

var _ Operator = (*Local)(nil)

// CollectGarbage implements Operator: a store that was never written is
// nothing to collect.
func (l *Local) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	var blobs *artifact.Store
	var err error
	if dryRun {
		blobs, err = artifact.OpenForReading(l.ArtifactDir)
	} else {
		blobs, err = artifact.Open(l.ArtifactDir, 1) // never Puts: the size cap is unused
	}
	if errors.Is(err, artifact.ErrNotFound) {
		return protocol.GCResponse{DryRun: dryRun, Removed: []protocol.GCBlob{}}, nil
	}
	if err != nil {
		return protocol.GCResponse{}, err
	}
	return coordinator.CollectGarbage(ctx, l.Store, blobs, coordinator.GCOptions{DryRun: dryRun})
}

// CreateJoinToken implements Operator: the state keeps the secret's hash
// only.
func (l *Local) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	now := l.Now()
	secret := coordinator.NewJoinCredential()
	j, err := l.Store.CreateJoinToken(ctx, state.JoinToken{Pool: req.Pool, Labels: req.Labels, ExpiresAt: now.Add(req.TTL)},
		coordinator.HashSecret(secret), now)
	if err != nil {
		return protocol.JoinFile{}, err
	}
	pin, err := l.Pin()
	if err != nil {
		return protocol.JoinFile{}, err
	}
	return protocol.JoinFile{FormatVersion: protocol.JoinFileFormatVersion, Pool: req.Pool, Labels: req.Labels,
		ID: j.ID, Credential: secret, ExpiresAt: j.ExpiresAt, CASHA256: pin}, nil
}

// RevokeJoinToken implements Operator. With no apply running no worker of
// the token is connected, so none is asked to drain.
func (l *Local) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	j, err := l.Store.RevokeJoinToken(ctx, id, l.Now())
	if errors.Is(err, state.ErrNotFound) {
		return protocol.RevokeJoinTokenResponse{}, fmt.Errorf("join token %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return protocol.RevokeJoinTokenResponse{}, err
	}
	return protocol.RevokeJoinTokenResponse{ID: j.ID, Pool: j.Pool, RevokedAt: j.RevokedAt}, nil
}

// DecideProposal implements Operator: an approved proposal runs in the
// next apply (NextApplyNote).
func (l *Local) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	p, err := l.Store.DecideProposal(ctx, id, req.Approve, req.By, req.Reason, l.Now())
	switch {
	case errors.Is(err, state.ErrNotFound):
		return protocol.ProposalDecisionResponse{}, fmt.Errorf("proposal.%d: %w", id, ErrNotFound)
	case errors.Is(err, state.ErrConflict):
		return protocol.ProposalDecisionResponse{}, &DecidedError{Why: err.Error()}
	case err != nil:
		return protocol.ProposalDecisionResponse{}, err
	}
	resp := protocol.ProposalDecisionResponse{ID: p.ID, Status: string(p.Status), DecidedBy: p.DecidedBy, Reason: p.Reason}
	if p.Status.Approved() {
		resp.Note = NextApplyNote
	}
	return resp, nil
}
