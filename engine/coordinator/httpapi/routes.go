package httpapi

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
)

// The routes of the worker protocol and the operator routes but those of
// logs (logs.go), artifacts (artifacts.go) and metrics (metrics.go).

func (s *server) serveRegister(w http.ResponseWriter, r *http.Request) {
	cred, req, _, ok := decodeRequest(s, w, r, checkRegister, registers...)
	if !ok {
		return
	}
	resp, err := s.c.Register(r.Context(), cred, req)
	respond(w, resp, err)
}

func (s *server) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	sess, req, _, ok := sessionRequest(s, w, r, checkHeartbeat, func(protocol.HeartbeatRequest) string { return r.PathValue("id") })
	if !ok {
		return
	}
	resp, err := s.c.Heartbeat(r.Context(), sess, req)
	if errors.Is(err, coordinator.ErrHeartbeatDropped) {
		// An injected fault (wdc test's silence_worker): the heartbeat is
		// lost on the way, so the worker gets no answer at all.
		panic(http.ErrAbortHandler)
	}
	respond(w, resp, err)
}

func (s *server) serveLeave(w http.ResponseWriter, r *http.Request) {
	sess, req, _, ok := sessionRequest(s, w, r, checkLeave, func(protocol.LeaveRequest) string { return r.PathValue("id") })
	if !ok {
		return
	}
	resp, err := s.c.Leave(r.Context(), sess, req.Reason)
	respond(w, resp, err)
}

// maxWaitMS is the longest wait_ms a time.Duration holds; the coordinator
// caps a wait far below it (coordinator.Options.MaxClaimWait).
const maxWaitMS = math.MaxInt64 / int64(time.Millisecond)

func (s *server) serveClaim(w http.ResponseWriter, r *http.Request) {
	sess, req, _, ok := sessionRequest(s, w, r, checkClaim, func(protocol.ClaimRequest) string { return r.PathValue("id") })
	if !ok {
		return
	}
	wait := time.Duration(min(req.WaitMS, maxWaitMS)) * time.Millisecond
	resp, err := s.c.Claim(r.Context(), sess, req.Max, wait)
	if err != nil && r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	respond(w, resp, err)
}

func (s *server) serveResult(w http.ResponseWriter, r *http.Request) {
	var token int64
	sess, req, body, ok := sessionRequest(s, w, r, func(req protocol.ResultRequest) error {
		var err error
		if token, err = pathToken(r.PathValue("token")); err != nil {
			return err
		}
		return checkResult(req)
	}, func(req protocol.ResultRequest) string { return req.WorkerID })
	if !ok {
		return
	}
	resp, err := s.c.Result(r.Context(), sess, token, req, body)
	respond(w, resp, err)
}

func (s *server) serveCreateJoinToken(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(s, w, r, checkJoinToken, operators...)
	if !ok {
		return
	}
	resp, err := s.c.CreateJoinToken(r.Context(), req)
	respond(w, resp, err)
}

func (s *server) serveRevokeJoinToken(w http.ResponseWriter, r *http.Request) {
	_, _, _, ok := decodeRequest(s, w, r, noCheck[struct{}], operators...)
	if !ok {
		return
	}
	resp, err := s.c.RevokeJoinToken(r.Context(), r.PathValue("id"))
	respond(w, resp, err)
}

func (s *server) serveProposalDecision(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(s, w, r, checkProposalDecision, operators...)
	if !ok {
		return
	}
	id, idOK := coordinator.ProposalID("proposal." + r.PathValue("id"))
	if !idOK {
		badRequest("%q is not a proposal id (a whole number from 1)", r.PathValue("id")).write(w)
		return
	}
	resp, err := s.c.DecideProposal(r.Context(), id, req)
	respond(w, resp, err)
}

func (s *server) serveLease(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(s, w, r, checkLeaseLookup, operators...)
	if !ok {
		return
	}
	resp, err := s.c.Lease(r.Context(), req.Task)
	respond(w, resp, err)
}

func (s *server) serveSweep(w http.ResponseWriter, r *http.Request) {
	_, _, _, ok := decodeRequest(s, w, r, noCheck[struct{}], operators...)
	if !ok {
		return
	}
	resp, err := s.c.Sweep(r.Context())
	respond(w, resp, err)
}

func (s *server) serveGC(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(s, w, r, noCheck[protocol.GCRequest], operators...)
	if !ok {
		return
	}
	resp, err := s.c.GC(r.Context(), req.DryRun)
	respond(w, resp, err)
}

func (s *server) serveStatus(w http.ResponseWriter, r *http.Request) {
	_, _, _, ok := decodeRequest(s, w, r, noCheck[struct{}], operators...)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.c.Status())
}
