package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Handler returns the HTTP handler of worker protocol v1 (docs/protocol.md,
// protocol/wire.go, protocol/operator.go):
//
//	POST /v1/workers                          RegisterRequest → RegisterResponse      (launch or join credential)
//	POST /v1/workers/{id}/heartbeat           HeartbeatRequest → HeartbeatResponse    (session token)
//	POST /v1/workers/{id}/claim               ClaimRequest → ClaimResponse, long poll (session token)
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
// loopback listener (CoordinatorOptions.MetricsOpen) no credential. Errors are
// protocol.Error bodies: 401 unauthorized with a reason (no, unknown,
// used, expired or revoked credential, one of another kind, a revoked
// session); 403 forbidden (a session naming another worker); 400
// bad_request (bad JSON, a body that is not one JSON object (empty, null),
// trailing data, a body over MaxRequestBytes, a path with "." or ".."
// segments, invalid values, a non-numeric token in the path), or code
// unsupported_protocol_version for a missing or unsupported version
// header; 404 not_found (unknown route, an unknown join token or task);
// 405 bad_request (a method other than POST, with an Allow header); 409
// conflict (a join that would take a pool past max); 500 internal (the
// state failed). A rejected result is a 200 with decision "rejected". The
// handler recovers from panics (answering 500) as a last line of defence.
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/workers", c.serveRegister)
	mux.HandleFunc("/v1/workers/{id}/heartbeat", c.serveHeartbeat)
	mux.HandleFunc("/v1/workers/{id}/claim", c.serveClaim)
	mux.HandleFunc("/v1/leases/{token}/result", c.serveResult)
	mux.HandleFunc("/v1/leases/{token}/log", c.serveLogChunk)
	mux.HandleFunc("/v1/artifacts/{sha256}", c.serveArtifact)
	mux.HandleFunc("/v1/operator/join-tokens", c.serveCreateJoinToken)
	mux.HandleFunc("/v1/operator/join-tokens/{id}/revoke", c.serveRevokeJoinToken)
	mux.HandleFunc("/v1/operator/lease", c.serveLease)
	mux.HandleFunc("/v1/operator/sweep", c.serveSweep)
	mux.HandleFunc("/v1/operator/gc", c.serveGC)
	mux.HandleFunc("/v1/operator/logs", c.serveFollowLog)
	mux.HandleFunc("/v1/operator/status", c.serveStatus)
	mux.HandleFunc("/v1/operator/proposals/{id}/decision", c.serveProposalDecision)
	mux.HandleFunc(MetricsPath, c.serveMetrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: "not_found", message: fmt.Sprintf("no protocol route %s", r.URL.Path)})
	})
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &failureWatch{ResponseWriter: rw}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel value, not an error chain
					panic(v)
				}
				c.log.Error("protocol handler panicked", "path", r.URL.Path, "panic", v)
				writeError(w, &httpError{status: http.StatusInternalServerError, code: "internal", message: "internal error"})
			}
			if w.status == http.StatusInternalServerError && r.Context().Err() == nil {
				// The state (or the coordinator) failed: the apply must
				// not go on as if its writes had happened.
				c.fail(fmt.Errorf("answering %s %s: %s", r.Method, r.URL.Path, w.failure()))
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
		return &httpError{status: http.StatusBadRequest, code: protocol.CodeUnsupportedVersion,
			message: fmt.Sprintf("the request has no %s header; %s (send \"%s: %d\")", protocol.VersionHeader, accepts, protocol.VersionHeader, protocol.ProtocolVersion)}
	}
	v, err := strconv.Atoi(h)
	if err != nil || strconv.Itoa(v) != h || v < protocol.MinProtocolVersion || v > protocol.MaxProtocolVersion {
		return &httpError{status: http.StatusBadRequest, code: protocol.CodeUnsupportedVersion,
			message: fmt.Sprintf("the client speaks protocol version %q; %s: upgrade the older of the two", h, accepts)}
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

// httpError is an answer other than 200. It is an error, so the
// operations can return typed answers.
type httpError struct {
	status  int
	code    string
	reason  string // a protocol.Reason* constant, or ""
	message string
	missing []string // of a missing_artifacts answer
}

func (e *httpError) Error() string { return e.message }

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: "bad_request", message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *httpError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wdc"`)
	}
	writeJSON(w, e.status, protocol.Error{Code: e.code, Message: e.message, Reason: e.reason, Missing: e.missing})
}

func (e *httpError) write(w http.ResponseWriter) { writeError(w, e) }

// statusOf is the HTTP status of each code of a *CoordinatorError.
var statusOf = map[ErrorCode]int{
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeBadRequest:       http.StatusBadRequest,
	CodeNotFound:         http.StatusNotFound,
	CodeConflict:         http.StatusConflict,
	CodeMissingArtifacts: http.StatusConflict,
	CodeNotExpected:      http.StatusConflict,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeHashMismatch:     http.StatusBadRequest,
}

// internal turns an operation's error into an answer: a refusal
// (*CoordinatorError) with the status of its code, an answer of the HTTP
// layer as it is, 404 for an object the state does not have, 400 for an
// invalid argument, 500 otherwise.
func internal(err error) *httpError {
	var herr *httpError
	var cerr *CoordinatorError
	switch {
	case errors.As(err, &cerr):
		status, ok := statusOf[cerr.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		return &httpError{status: status, code: string(cerr.Code), reason: cerr.Reason, message: cerr.Message, missing: cerr.Missing}
	case errors.As(err, &herr):
		return herr
	case errors.Is(err, state.ErrNotFound):
		return &httpError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, state.ErrInvalid):
		return &httpError{status: http.StatusBadRequest, code: "bad_request", message: err.Error()}
	}
	return &httpError{status: http.StatusInternalServerError, code: "internal", message: err.Error()}
}

// authenticate reads r's bearer credential and finds it among the
// credentials of kinds (credentialFor); a request without one is a 401
// missing_credential.
func (c *Coordinator) authenticate(r *http.Request, kinds ...credKind) (*credential, *httpError) {
	auth := r.Header.Get("Authorization")
	scheme, secret, _ := strings.Cut(auth, " ")
	secret = strings.TrimSpace(secret)
	if auth == "" || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, &httpError{status: http.StatusUnauthorized, code: "unauthorized", reason: protocol.ReasonMissingCredential,
			message: "missing bearer credential: send \"Authorization: Bearer <credential>\""}
	}
	cred, err := c.credentialFor(secret, kinds...)
	if err != nil {
		return nil, internal(err)
	}
	return cred, nil
}

// begin checks the method and the credential and reads the body into v.
func (c *Coordinator) begin(w http.ResponseWriter, r *http.Request, v any, kinds []credKind) (*credential, []byte, *httpError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, nil, &httpError{status: http.StatusMethodNotAllowed, code: "bad_request", message: fmt.Sprintf("method %s is not allowed; use POST", r.Method)}
	}
	cred, herr := c.authenticate(r, kinds...)
	if herr != nil {
		return nil, nil, herr
	}
	body, herr := readBody(w, r)
	if herr != nil {
		return nil, nil, herr
	}
	if err := decodeObject(body, v); err != nil {
		return nil, nil, badRequest("%v", err)
	}
	return cred, body, nil
}

// readBody reads at most MaxRequestBytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpError) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, badRequest("request body is larger than %d bytes", MaxRequestBytes)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return body, nil
}

// decodeObject decodes exactly one JSON object, refusing an empty body,
// null or any other value that is not an object, and trailing data. Fields
// it does not know are ignored, so a newer client can send fields an older
// coordinator does not read (docs/protocol.md, "Versions").
func decodeObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return errors.New("empty request body: expected a JSON object")
	}
	if trimmed[0] != '{' {
		return errors.New("invalid JSON request: expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON request: data after the JSON object")
	}
	return nil
}

// DecodeRegisterRequest decodes and checks the body of POST /v1/workers:
// one JSON object (unknown fields are ignored), pid >= 0.
func DecodeRegisterRequest(body []byte) (protocol.RegisterRequest, error) {
	var req protocol.RegisterRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkRegister(req)
}

func checkRegister(req protocol.RegisterRequest) error {
	switch {
	case req.PID < 0:
		return fmt.Errorf("pid must not be negative, have %d", req.PID)
	case len(req.RequestID) > 128:
		return fmt.Errorf("request_id is longer than 128 bytes (%d)", len(req.RequestID))
	case len(req.Host) > 255:
		return fmt.Errorf("host is longer than 255 bytes (%d)", len(req.Host))
	case len(req.Version) > 128:
		return fmt.Errorf("version is longer than 128 bytes (%d)", len(req.Version))
	case !printable(req.Host) || !printable(req.Version) || !printable(req.RequestID):
		return errors.New("host, version and request_id must be printable text without control characters (listings show them)")
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// MaxJoinTTL is the longest a join token may live (366 days).
const MaxJoinTTL = 366 * 24 * time.Hour

// MaxErrorBytes caps the error text of a posted result (16 KiB); a longer
// one is a 400. (The state keeps at most state.MaxRejectedBodyBytes of a
// rejected result's body.)
const MaxErrorBytes = 16 << 10

// DecodeJoinTokenRequest decodes and checks the body of POST
// /v1/operator/join-tokens: a pool name, ttl_ms > 0, labels (when given)
// with non-empty keys.
func DecodeJoinTokenRequest(body []byte) (protocol.JoinTokenRequest, error) {
	var req protocol.JoinTokenRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkJoinToken(req)
}

func checkJoinToken(req protocol.JoinTokenRequest) error {
	switch {
	case req.Pool == "":
		return errors.New("pool is required")
	case req.TTLMS < 1000 || req.TTLMS > MaxJoinTTL.Milliseconds():
		return fmt.Errorf("ttl_ms must be from 1000 (1s) to %d (%s), have %d", MaxJoinTTL.Milliseconds(), MaxJoinTTL, req.TTLMS)
	}
	for k := range req.Labels {
		if k == "" {
			return errors.New("a label name is empty")
		}
	}
	return nil
}

// DecodeHeartbeatRequest decodes and checks the body of
// POST /v1/workers/{id}/heartbeat: tokens >= 1.
func DecodeHeartbeatRequest(body []byte) (protocol.HeartbeatRequest, error) {
	var req protocol.HeartbeatRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkHeartbeat(req)
}

func checkHeartbeat(req protocol.HeartbeatRequest) error {
	for _, t := range req.Leases {
		if t < 1 {
			return fmt.Errorf("lease tokens are >= 1, have %d", t)
		}
	}
	return nil
}

// DecodeClaimRequest decodes and checks the body of
// POST /v1/workers/{id}/claim: max >= 1, wait_ms >= 0.
func DecodeClaimRequest(body []byte) (protocol.ClaimRequest, error) {
	var req protocol.ClaimRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkClaim(req)
}

func checkClaim(req protocol.ClaimRequest) error {
	switch {
	case req.Max < 1:
		return fmt.Errorf("max must be at least 1, have %d", req.Max)
	case req.WaitMS < 0:
		return fmt.Errorf("wait_ms must not be negative, have %d", req.WaitMS)
	}
	return nil
}

// MaxNext bounds ResultRequest.Next (assignments asked for with a result);
// the worker's free capacity bounds what it gets.
const MaxNext = 1024

// DecodeResultRequest decodes and checks the body of
// POST /v1/leases/{token}/result: idempotency_key (at most 256 bytes),
// worker_id set, attempt >= 1 or omitted (0, like an omitted task: the
// lease decides), failure_class "" or one of failure, lost, refused, next
// between 0 and MaxNext.
func DecodeResultRequest(body []byte) (protocol.ResultRequest, error) {
	var req protocol.ResultRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkResult(req)
}

func checkResult(req protocol.ResultRequest) error {
	switch {
	case req.IdempotencyKey == "":
		return errors.New("idempotency_key is required")
	case len(req.IdempotencyKey) > 256:
		return fmt.Errorf("idempotency_key is longer than 256 bytes (%d)", len(req.IdempotencyKey))
	case req.WorkerID == "":
		return errors.New("worker_id is required")
	case req.Attempt < 0:
		return fmt.Errorf("attempt must be at least 1 (or omitted), have %d", req.Attempt)
	case len(req.Error) > MaxErrorBytes:
		return fmt.Errorf("error is longer than %d bytes (%d): put long output in the task's logs", MaxErrorBytes, len(req.Error))
	case len(req.Signal) > 32:
		return fmt.Errorf("signal is longer than 32 bytes (%d)", len(req.Signal))
	case req.FailureClass != "" && !state.FailureClass(req.FailureClass).Valid():
		return fmt.Errorf("failure_class must be empty (success), failure, lost or refused, have %q", req.FailureClass)
	case req.Next < 0 || req.Next > MaxNext:
		return fmt.Errorf("next must be between 0 and %d, have %d", MaxNext, req.Next)
	}
	return nil
}

// decodeRequest authenticates r with a credential of one of kinds and
// decodes and checks its body; when anything is wrong it has written the
// typed 4xx answer and ok is false.
func decodeRequest[T any](c *Coordinator, w http.ResponseWriter, r *http.Request, check func(T) error, kinds ...credKind) (cred *credential, req T, body []byte, ok bool) {
	cred, body, herr := c.begin(w, r, &req, kinds)
	if herr == nil {
		if err := check(req); err != nil {
			herr = badRequest("%v", err)
		}
	}
	if herr != nil {
		herr.write(w)
		return nil, req, nil, false
	}
	return cred, req, body, true
}

// respond writes resp as the 200 answer, or err as a typed error answer.
func respond[T any](w http.ResponseWriter, resp T, err error) {
	if err != nil {
		internal(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// sessionRequest is decodeRequest for the worker routes: a session token
// whose worker is id.
func sessionRequest[T any](c *Coordinator, w http.ResponseWriter, r *http.Request, check func(T) error, id func(T) string) (*workerState, T, []byte, bool) {
	cred, req, body, ok := decodeRequest(c, w, r, check, credSession)
	if !ok {
		return nil, req, nil, false
	}
	wk, err := c.sessionWorker(cred, id(req))
	if err != nil {
		internal(err).write(w)
		return nil, req, nil, false
	}
	return wk, req, body, true
}

func (c *Coordinator) serveRegister(w http.ResponseWriter, r *http.Request) {
	cred, req, _, ok := decodeRequest(c, w, r, checkRegister, credLaunch, credJoin)
	if !ok {
		return
	}
	resp, err := c.register(r.Context(), cred, req)
	respond(w, resp, err)
}

func (c *Coordinator) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	wk, req, _, ok := sessionRequest(c, w, r, checkHeartbeat, func(protocol.HeartbeatRequest) string { return r.PathValue("id") })
	if !ok {
		return
	}
	resp, err := c.heartbeat(r.Context(), wk, req)
	respond(w, resp, err)
}

func (c *Coordinator) serveClaim(w http.ResponseWriter, r *http.Request) {
	wk, req, _, ok := sessionRequest(c, w, r, checkClaim, func(protocol.ClaimRequest) string { return r.PathValue("id") })
	if !ok {
		return
	}
	wait := time.Duration(min(req.WaitMS, int64(c.maxClaimWait/time.Millisecond))) * time.Millisecond
	resp, err := c.claim(r.Context(), wk, req.Max, wait)
	if err != nil && r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	respond(w, resp, err)
}

func (c *Coordinator) serveResult(w http.ResponseWriter, r *http.Request) {
	var token int64
	poster, req, body, ok := sessionRequest(c, w, r, func(req protocol.ResultRequest) error {
		var err error
		token, err = strconv.ParseInt(r.PathValue("token"), 10, 64)
		if err != nil || token < 1 || strconv.FormatInt(token, 10) != r.PathValue("token") {
			return fmt.Errorf("the lease token in the path must be a positive integer, have %q", r.PathValue("token"))
		}
		return checkResult(req)
	}, func(req protocol.ResultRequest) string { return req.WorkerID })
	if !ok {
		return
	}
	resp, err := c.result(r.Context(), poster, token, req, body)
	respond(w, resp, err)
}

func (c *Coordinator) serveCreateJoinToken(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(c, w, r, checkJoinToken, credOperator)
	if !ok {
		return
	}
	resp, err := c.createJoinToken(r.Context(), req)
	respond(w, resp, err)
}

func (c *Coordinator) serveRevokeJoinToken(w http.ResponseWriter, r *http.Request) {
	_, _, _, ok := decodeRequest(c, w, r, func(struct{}) error { return nil }, credOperator)
	if !ok {
		return
	}
	resp, err := c.revokeJoinToken(r.Context(), r.PathValue("id"))
	respond(w, resp, err)
}

func (c *Coordinator) serveProposalDecision(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(c, w, r, func(req protocol.ProposalDecisionRequest) error {
		if err := CheckDecisionText("by", req.By); err != nil {
			return err
		}
		switch {
		case !req.Approve && strings.TrimSpace(req.Reason) == "":
			return errors.New("a rejection needs a reason")
		case req.Reason != "":
			return CheckDecisionText("reason", req.Reason)
		}
		return nil
	}, credOperator)
	if !ok {
		return
	}
	id, idOK := ProposalID("proposal." + r.PathValue("id"))
	if !idOK {
		badRequest("%q is not a proposal id (a whole number from 1)", r.PathValue("id")).write(w)
		return
	}
	resp, err := c.decideProposal(r.Context(), id, req)
	respond(w, resp, err)
}

func (c *Coordinator) serveLease(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(c, w, r, func(req protocol.LeaseLookupRequest) error {
		if req.Task == "" {
			return errors.New("task is required")
		}
		return nil
	}, credOperator)
	if !ok {
		return
	}
	resp, err := c.lease(r.Context(), req.Task)
	respond(w, resp, err)
}

func (c *Coordinator) serveSweep(w http.ResponseWriter, r *http.Request) {
	_, _, _, ok := decodeRequest(c, w, r, func(struct{}) error { return nil }, credOperator)
	if !ok {
		return
	}
	resp, err := c.sweepNow(r.Context())
	respond(w, resp, err)
}

func (c *Coordinator) serveGC(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(c, w, r, func(protocol.GCRequest) error { return nil }, credOperator)
	if !ok {
		return
	}
	resp, err := c.collectGarbage(r.Context(), req.DryRun)
	respond(w, resp, err)
}

// failureWatch remembers the status of an answer and the start of a 500's
// body, so the handler can stop the apply on an internal error.
type failureWatch struct {
	http.ResponseWriter
	status int
	body   []byte
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

// failure is the message of the 500 answer.
func (f *failureWatch) failure() string {
	var e protocol.Error
	if err := json.Unmarshal(f.body, &e); err == nil && e.Message != "" {
		return e.Message
	}
	return "internal error"
}
