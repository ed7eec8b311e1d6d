package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Remote asks the coordinator of the running apply, through its operator
// routes with the apply's operator credential: the coordinator writes, and
// also acts on what it holds in memory (it keeps the blobs of uploads in
// flight, drains the workers of a revoked token, runs an approved proposal
// in the same apply).
type Remote struct {
	// Client calls the coordinator with the operator credential.
	Client *protocol.Client
	// Lock is the lock row of the apply that serves it: its CA
	// fingerprint goes into join files, and its holder into errors.
	Lock state.Lock
}

var _ Operator = (*Remote)(nil)

// fail maps a coordinator's answer to the errors of Operator: a refusal
// stays a *protocol.APIError, and a call that got no answer is an
// *UnreachableError.
func (r *Remote) fail(err error) error {
	var ae *protocol.APIError
	if !errors.As(err, &ae) {
		return &UnreachableError{Lock: r.Lock, Err: err}
	}
	return err
}

// failByID is fail for a call about one join token or proposal (what): a
// 404 is ErrNotFound and a 409 a *DecidedError.
func (r *Remote) failByID(what string, err error) error {
	var ae *protocol.APIError
	switch {
	case !errors.As(err, &ae):
	case ae.Status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case ae.Status == http.StatusConflict:
		return &DecidedError{Why: ae.Message}
	}
	return r.fail(err)
}

// CollectGarbage implements Operator.
func (r *Remote) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	resp, err := r.Client.GC(ctx, protocol.GCRequest{DryRun: dryRun})
	if err != nil {
		return resp, r.fail(err)
	}
	return resp, nil
}

// CreateJoinToken implements Operator.
func (r *Remote) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	resp, err := r.Client.CreateJoinToken(ctx, protocol.JoinTokenRequest{Pool: req.Pool, Labels: req.Labels, TTLMS: req.TTL.Milliseconds()})
	if err != nil {
		return protocol.JoinFile{}, r.fail(err)
	}
	return protocol.JoinFile{FormatVersion: protocol.JoinFileFormatVersion, Pool: req.Pool, Labels: req.Labels,
		ID: resp.ID, Credential: resp.Credential, ExpiresAt: resp.ExpiresAt, CASHA256: r.Lock.CASHA256}, nil
}

// RevokeJoinToken implements Operator.
func (r *Remote) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	resp, err := r.Client.RevokeJoinToken(ctx, id)
	if err != nil {
		return resp, r.failByID(fmt.Sprintf("join token %q", id), err)
	}
	return resp, nil
}

// DecideProposal implements Operator.
func (r *Remote) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	resp, err := r.Client.DecideProposal(ctx, id, req)
	if err != nil {
		return resp, r.failByID(fmt.Sprintf("proposal.%d", id), err)
	}
	return resp, nil
}
