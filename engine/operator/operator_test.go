package operator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openState(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newLocal(t *testing.T, st *state.Store) *Local {
	return &Local{Store: st, ArtifactDir: filepath.Join(t.TempDir(), "artifacts"),
		Pin: func() (string, error) { return "pin", nil }, Now: func() time.Time { return t0 }}
}

// recorder is an Operator that records which calls reach it and answers
// with err.
type recorder struct {
	calls []string
	err   error
}

func (r *recorder) CollectGarbage(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	r.calls = append(r.calls, "gc")
	return protocol.GCResponse{DryRun: dryRun}, r.err
}

func (r *recorder) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (protocol.JoinFile, error) {
	r.calls = append(r.calls, "create")
	return protocol.JoinFile{Pool: req.Pool}, r.err
}

func (r *recorder) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	r.calls = append(r.calls, "revoke")
	return protocol.RevokeJoinTokenResponse{ID: id}, r.err
}

func (r *recorder) DecideProposal(ctx context.Context, id int64, req protocol.ProposalDecisionRequest) (protocol.ProposalDecisionResponse, error) {
	r.calls = append(r.calls, "decide")
	return protocol.ProposalDecisionResponse{ID: id}, r.err
}

func TestFallbackTurnsToTheRunningApplyOnlyWhenLocked(t *testing.T) {
	locked := &state.LockedError{Path: "state.db", Lock: state.Lock{ID: "l1"}}
	other := errors.New("disk on fire")
	tests := []struct {
		name        string
		localErr    error
		remoteErr   error
		openErr     error
		wantRemote  bool
		wantErr     error
		wantOpening int
	}{
		{name: "local writes", wantRemote: false},
		{name: "local fails otherwise", localErr: other, wantErr: other},
		{name: "locked: the apply writes", localErr: locked, wantRemote: true, wantOpening: 1},
		{name: "locked: the apply refuses", localErr: locked, remoteErr: other, wantRemote: true, wantErr: other, wantOpening: 1},
		// with no apply to ask, each call looks again
		{name: "locked: no apply to ask", localErr: locked, openErr: other, wantErr: other, wantOpening: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, remote := &recorder{err: tt.localErr}, &recorder{err: tt.remoteErr}
			opened := 0
			f := &Fallback{Local: local, Remote: func() (Operator, error) {
				opened++
				if tt.openErr != nil {
					return nil, tt.openErr
				}
				return remote, nil
			}}
			ctx := context.Background()
			_, err := f.CreateJoinToken(ctx, JoinTokenRequest{Pool: "edge"})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("create: err %v, want %v", err, tt.wantErr)
			}
			// The second call of the same fallback (a revoke after a
			// failed write) goes the same way, and opens no second client.
			_, err = f.RevokeJoinToken(ctx, "jt-1")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("revoke: err %v, want %v", err, tt.wantErr)
			}
			if len(local.calls) != 2 {
				t.Errorf("local calls %v, want create and revoke", local.calls)
			}
			if got := len(remote.calls) == 2; got != tt.wantRemote {
				t.Errorf("remote calls %v, want remote: %v", remote.calls, tt.wantRemote)
			}
			if opened != tt.wantOpening {
				t.Errorf("remote opened %d times, want %d", opened, tt.wantOpening)
			}
		})
	}
}

func TestLocalJoinTokens(t *testing.T) {
	ctx := context.Background()
	st := openState(t)
	l := newLocal(t, st)
	jf, err := l.CreateJoinToken(ctx, JoinTokenRequest{Pool: "edge", Labels: map[string]string{"site": "a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if jf.Pool != "edge" || jf.CASHA256 != "pin" || jf.Labels["site"] != "a" || !jf.ExpiresAt.Equal(t0.Add(time.Hour)) ||
		len(jf.Credential) < len(protocol.JoinCredentialPrefix)+32 || jf.FormatVersion != protocol.JoinFileFormatVersion {
		t.Fatalf("join file %+v", jf)
	}
	list, err := st.JoinTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID != jf.ID {
		t.Fatalf("join tokens %+v %v", list, err)
	}
	resp, err := l.RevokeJoinToken(ctx, jf.ID)
	if err != nil || resp.ID != jf.ID || resp.Pool != "edge" || !resp.RevokedAt.Equal(t0) || len(resp.Draining) != 0 {
		t.Fatalf("revoke: %+v %v", resp, err)
	}
	if _, err := l.RevokeJoinToken(ctx, "jt-none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke of an unknown token: %v, want ErrNotFound", err)
	}
}

func TestLocalRefusesWhileAnApplyHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	st := openState(t)
	if _, _, err := st.AcquireLock(ctx, state.LockRequest{Holder: "ci@host", Host: "host", PID: 1, TTL: time.Minute}, t0); err != nil {
		t.Fatal(err)
	}
	l := newLocal(t, st)
	var locked *state.LockedError
	if _, err := l.CreateJoinToken(ctx, JoinTokenRequest{Pool: "edge", TTL: time.Hour}); !errors.As(err, &locked) {
		t.Fatalf("create under an apply's lock: %v, want a *state.LockedError", err)
	}
	if _, err := l.RevokeJoinToken(ctx, "jt-1"); !errors.As(err, &locked) {
		t.Fatalf("revoke under an apply's lock: %v, want a *state.LockedError", err)
	}
	if _, err := l.DecideProposal(ctx, 1, protocol.ProposalDecisionRequest{Approve: true, By: "ann"}); !errors.As(err, &locked) {
		t.Fatalf("decide under an apply's lock: %v, want a *state.LockedError", err)
	}
}

func TestLocalDecideUnknownProposal(t *testing.T) {
	l := newLocal(t, openState(t))
	if _, err := l.DecideProposal(context.Background(), 7, protocol.ProposalDecisionRequest{Approve: true, By: "ann"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decide proposal.7 of an empty state: %v, want ErrNotFound", err)
	}
}

func TestLocalGCOfAStoreNeverWritten(t *testing.T) {
	l := newLocal(t, openState(t))
	for _, dry := range []bool{true, false} {
		resp, err := l.CollectGarbage(context.Background(), dry)
		if err != nil || resp.DryRun != dry || resp.Removed == nil || len(resp.Removed) != 0 {
			t.Fatalf("gc (dry run %v) of no artifact store: %+v %v", dry, resp, err)
		}
	}
}

func TestRemoteMapsTheCoordinatorsAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    protocol.Error
		check   func(error) bool
		wantMsg string
	}{
		{name: "404", status: 404, body: protocol.Error{Code: "not_found", Message: "no proposal.3 in the state"},
			check: func(err error) bool { return errors.Is(err, ErrNotFound) }},
		{name: "409", status: 409, body: protocol.Error{Code: "conflict", Message: "proposal.3 is already approved"},
			check: func(err error) bool {
				var d *DecidedError
				return errors.As(err, &d) && d.Why == "proposal.3 is already approved"
			}},
		{name: "400", status: 400, body: protocol.Error{Code: "bad_request", Message: "give a reason"},
			check: func(err error) bool {
				var ae *protocol.APIError
				return errors.As(err, &ae) && ae.Status == 400 && ae.Message == "give a reason"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_ = json.NewEncoder(w).Encode(tt.body)
			}))
			defer srv.Close()
			r := &Remote{Client: protocol.NewClient(srv.URL, "wdco_x", srv.Client()), Lock: state.Lock{Holder: "ci@host", CoordinatorURL: srv.URL}}
			_, err := r.DecideProposal(context.Background(), 3, protocol.ProposalDecisionRequest{Approve: true, By: "ann"})
			if !tt.check(err) {
				t.Fatalf("decide answered %d: error %v (%T)", tt.status, err, err)
			}
		})
	}

	// no answer at all: the apply may be gone
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := &Remote{Client: protocol.NewClient(url, "wdco_x", http.DefaultClient), Lock: state.Lock{Holder: "ci@host", PID: 9, CoordinatorURL: url}}
	_, err := r.RevokeJoinToken(context.Background(), "jt-1")
	var gone *UnreachableError
	if !errors.As(err, &gone) || gone.Lock.PID != 9 {
		t.Fatalf("revoke with no coordinator: %v, want an *UnreachableError naming the lock", err)
	}
}

func TestRemoteJoinFileCarriesTheApplysCA(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req protocol.JoinTokenRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.TTLMS != 90_000 || req.Pool != "edge" {
			http.Error(w, "bad", 400)
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.JoinTokenResponse{ID: "jt-9", Pool: "edge", Credential: "wdcj_s", ExpiresAt: t0})
	}))
	defer srv.Close()
	r := &Remote{Client: protocol.NewClient(srv.URL, "wdco_x", srv.Client()), Lock: state.Lock{CASHA256: "abc"}}
	jf, err := r.CreateJoinToken(context.Background(), JoinTokenRequest{Pool: "edge", TTL: 90 * time.Second})
	if err != nil || jf.ID != "jt-9" || jf.Credential != "wdcj_s" || jf.CASHA256 != "abc" || jf.FormatVersion != protocol.JoinFileFormatVersion {
		t.Fatalf("join file %+v %v", jf, err)
	}
}
