package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
)

// MetricsPath is the route of the coordinator's Prometheus metrics, served
// with GET. It takes no Wdc-Protocol-Version header (a scraper sends
// none), and needs the operator credential unless the coordinator listens
// on loopback (coordinator.Options.MetricsOpen).
const MetricsPath = "/metrics"

// server serves one coordinator.
type server struct {
	c       *coordinator.Coordinator
	log     *slog.Logger
	metrics http.Handler // the coordinator's registry in the Prometheus text format
}

// New returns the HTTP handler of worker protocol v1, served by c (docs/protocol.md,
// protocol/wire.go, protocol/operator.go):
//
//	POST /v1/workers                          RegisterRequest → RegisterResponse      (launch or join credential)
//	POST /v1/workers/{id}/heartbeat           HeartbeatRequest → HeartbeatResponse    (session token)
//	POST /v1/workers/{id}/claim               ClaimRequest → ClaimResponse, long poll (session token)
//	POST /v1/workers/{id}/leave               LeaveRequest → LeaveResponse            (session token)
//	POST /v1/leases/{token}/result            ResultRequest → ResultResponse          (session token)
//	POST /v1/leases/{token}/log               LogChunkRequest → LogChunkResponse      (session token)
//	PUT  /v1/artifacts/{sha256}               blob → PutArtifactResponse               (session token)
//	GET  /v1/artifacts/{sha256}               → blob, an input of the worker's assignments (session token)
//	POST /v1/operator/join-tokens             JoinTokenRequest → JoinTokenResponse    (operator credential)
//	POST /v1/operator/join-tokens/{id}/revoke → RevokeJoinTokenResponse               (operator credential)
//	POST /v1/operator/lease                   LeaseLookupRequest → LeaseLookupResponse (operator credential)
//	POST /v1/operator/sweep                   → SweepResponse                         (operator credential)
//	POST /v1/operator/gc                      GCRequest → GCResponse                  (operator credential)
//	POST /v1/operator/logs                    LogFollowRequest → LogFollowResponse, long poll (operator credential)
//	POST /v1/operator/status                  → StatusResponse                        (operator credential)
//	POST /v1/operator/proposals/{id}/decision ProposalDecisionRequest → ProposalDecisionResponse (operator credential)
//	GET  /metrics                             → Prometheus text format (operator credential, none with MetricsOpen)
//
// Every call needs "Authorization: Bearer <credential>" of the kind its
// route takes and the Wdc-Protocol-Version header, except GET /metrics,
// which a Prometheus scraper calls: it takes no version header, and on a
// loopback listener (coordinator.Options.MetricsOpen) no credential.
// Errors are protocol.Error bodies: 401 unauthorized with a reason (no,
// unknown, used, expired or revoked credential, one of another kind, a
// revoked session); 403 forbidden (a session naming another worker); 400
// bad_request (bad JSON, a body that is not one JSON object (empty,
// null), trailing data, a body over MaxRequestBytes, a path with "." or
// ".." segments, invalid values, a non-numeric token in the path), or
// code unsupported_protocol_version for a missing or unsupported version
// header; 404 not_found (unknown route, an unknown join token or task);
// 405 bad_request (a method other than POST, with an Allow header); 409
// conflict (a join that would take a pool past max), missing_artifacts
// and not_expected; 413 too_large; 500 internal (the state failed: the
// coordinator fails too, coordinator.Fail, so that apply stops). A
// rejected result is a 200 with decision "rejected". The handler recovers
// from panics (answering 500) as a last line of defence.
func New(c *coordinator.Coordinator) http.Handler {
	s := &server{c: c, log: c.Logger()}
	s.metrics = promhttp.HandlerFor(c.Gatherer(), promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/workers", s.serveRegister)
	mux.HandleFunc("/v1/workers/{id}/heartbeat", s.serveHeartbeat)
	mux.HandleFunc("/v1/workers/{id}/claim", s.serveClaim)
	mux.HandleFunc("/v1/workers/{id}/leave", s.serveLeave)
	mux.HandleFunc("/v1/leases/{token}/result", s.serveResult)
	mux.HandleFunc("/v1/leases/{token}/log", s.serveLogChunk)
	mux.HandleFunc("/v1/artifacts/{sha256}", s.serveArtifact)
	mux.HandleFunc("/v1/operator/join-tokens", s.serveCreateJoinToken)
	mux.HandleFunc("/v1/operator/join-tokens/{id}/revoke", s.serveRevokeJoinToken)
	mux.HandleFunc("/v1/operator/lease", s.serveLease)
	mux.HandleFunc("/v1/operator/sweep", s.serveSweep)
	mux.HandleFunc("/v1/operator/gc", s.serveGC)
	mux.HandleFunc("/v1/operator/logs", s.serveFollowLog)
	mux.HandleFunc("/v1/operator/status", s.serveStatus)
	mux.HandleFunc("/v1/operator/proposals/{id}/decision", s.serveProposalDecision)
	mux.HandleFunc(MetricsPath, s.serveMetrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		newError(http.StatusNotFound, "not_found", "no protocol route %s", r.URL.Path).write(w)
	})
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &failureWatch{ResponseWriter: rw}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel value, not an error chain
					panic(v)
				}
				s.log.Error("protocol handler panicked", "path", r.URL.Path, "panic", v)
				newError(http.StatusInternalServerError, "internal", "internal error").write(w)
			}
			if w.status == http.StatusInternalServerError && r.Context().Err() == nil {
				// The state (or the coordinator) failed: the apply must
				// not go on as if its writes had happened.
				c.Fail(fmt.Errorf("answering %s %s: %w", r.Method, r.URL.Path, w.failure()))
			}
		}()
		w.Header().Set(protocol.VersionHeader, strconv.Itoa(protocol.ProtocolVersion))
		w.Header().Set(protocol.AcceptedVersionsHeader, acceptedVersions)
		if herr := checkPath(r.URL.Path); herr != nil {
			herr.write(w)
			return
		}
		if r.URL.Path != MetricsPath { // scrapers speak Prometheus, not the worker protocol
			if herr := checkVersion(r.Header.Get(protocol.VersionHeader)); herr != nil {
				herr.write(w)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// acceptedVersions is the AcceptedVersionsHeader value, "MIN-MAX".
var acceptedVersions = fmt.Sprintf("%d-%d", protocol.MinProtocolVersion, protocol.MaxProtocolVersion)

// checkVersion refuses a request whose protocol version header is missing
// or outside the accepted range, naming both.
func checkVersion(h string) *httpError {
	accepts := fmt.Sprintf("this coordinator accepts protocol versions %d to %d", protocol.MinProtocolVersion, protocol.MaxProtocolVersion)
	if h == "" {
		return newError(http.StatusBadRequest, protocol.CodeUnsupportedVersion,
			"the request has no %s header; %s (send \"%s: %d\")", protocol.VersionHeader, accepts, protocol.VersionHeader, protocol.ProtocolVersion)
	}
	v, err := strconv.Atoi(h)
	if err != nil || strconv.Itoa(v) != h || v < protocol.MinProtocolVersion || v > protocol.MaxProtocolVersion {
		return newError(http.StatusBadRequest, protocol.CodeUnsupportedVersion,
			"the client speaks protocol version %q; %s: upgrade the older of the two", h, accepts)
	}
	return nil
}

// checkPath refuses a path that is not in canonical form ("." or ".."
// segments, doubled or trailing slashes) with a 400, instead of the
// redirect http.ServeMux would answer.
func checkPath(p string) *httpError {
	if p == "/" || (p != "" && path.Clean(p) == p) {
		return nil
	}
	return badRequest("the path %q is not in canonical form (no \".\" or \"..\" segments, no doubled or trailing slashes)", p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// respond writes resp as the 200 answer, or err as a typed error answer.
func respond[T any](w http.ResponseWriter, resp T, err error) {
	if err != nil {
		answerOf(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// failureWatch remembers the status of an answer and the start of a 500's
// body, so the handler can stop the apply on an internal error.
type failureWatch struct {
	http.ResponseWriter
	status int
	body   []byte
	cause  error // the error behind a 500 answer, when it came from one
}

func (f *failureWatch) WriteHeader(code int) {
	if f.status == 0 {
		f.status = code
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *failureWatch) Write(b []byte) (int, error) {
	if f.status == 0 {
		f.status = http.StatusOK
	}
	if f.status == http.StatusInternalServerError && len(f.body) < 4<<10 {
		f.body = append(f.body, b[:min(len(b), 4<<10-len(f.body))]...)
	}
	return f.ResponseWriter.Write(b)
}

// Flush lets streamed answers through.
func (f *failureWatch) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// failure is the error behind the 500 answer: the operation's own, else
// the answer's message.
func (f *failureWatch) failure() error {
	if f.cause != nil {
		return f.cause
	}
	var e protocol.Error
	if err := json.Unmarshal(f.body, &e); err == nil && e.Message != "" {
		return errors.New(e.Message)
	}
	return errors.New("internal error")
}
