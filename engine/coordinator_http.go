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

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Handler returns the HTTP handler of worker protocol v1 (docs/design.md §7,
// protocol/wire.go):
//
//	POST /v1/workers                   register → RegisterResponse
//	POST /v1/workers/{id}/heartbeat    HeartbeatRequest → HeartbeatResponse
//	POST /v1/workers/{id}/claim        ClaimRequest → ClaimResponse (long poll)
//	POST /v1/leases/{token}/result     ResultRequest → ResultResponse
//
// Every call needs "Authorization: Bearer <pool token>"; the pool, labels
// and capacity come from the token. Errors are protocol.Error bodies:
// 401 unauthorized (no or unknown token); 400 bad_request (bad JSON,
// a body that is not one JSON object (empty, null), trailing data, a
// body over MaxRequestBytes, a path with "." or ".." segments, a missing or
// unsupported Wdc-Protocol-Version header (code
// unsupported_protocol_version), invalid
// values, a non-numeric token in the path); 404 not_found (unknown route,
// or a worker id not registered with this token's pool); 405 bad_request
// (a method other than POST, with an Allow header); 500 internal (the state
// failed). A rejected result is a 200 with decision "rejected". The handler
// recovers from panics (answering 500) as a last line of defence.
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/workers", c.serveRegister)
	mux.HandleFunc("/v1/workers/{id}/heartbeat", c.serveHeartbeat)
	mux.HandleFunc("/v1/workers/{id}/claim", c.serveClaim)
	mux.HandleFunc("/v1/leases/{token}/result", c.serveResult)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no protocol route %s", r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel value, not an error chain
					panic(v)
				}
				c.log.Error("protocol handler panicked", "path", r.URL.Path, "panic", v)
				writeError(w, http.StatusInternalServerError, "internal", "internal error")
			}
		}()
		w.Header().Set(protocol.VersionHeader, strconv.Itoa(protocol.ProtocolVersion))
		w.Header().Set(protocol.AcceptedVersionsHeader, acceptedVersions)
		if herr := checkPath(r.URL.Path); herr != nil {
			herr.write(w)
			return
		}
		if herr := checkVersion(r.Header.Get(protocol.VersionHeader)); herr != nil {
			herr.write(w)
			return
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
		return &httpError{http.StatusBadRequest, protocol.CodeUnsupportedVersion,
			fmt.Sprintf("the request has no %s header; %s (send \"%s: %d\")", protocol.VersionHeader, accepts, protocol.VersionHeader, protocol.ProtocolVersion)}
	}
	v, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || v < protocol.MinProtocolVersion || v > protocol.MaxProtocolVersion {
		return &httpError{http.StatusBadRequest, protocol.CodeUnsupportedVersion,
			fmt.Sprintf("the client speaks protocol version %q; %s: upgrade the older of the two", h, accepts)}
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

// httpError is an answer other than 200.
type httpError struct {
	status  int
	code    string
	message string
}

func badRequest(format string, args ...any) *httpError {
	return &httpError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wdc"`)
	}
	writeJSON(w, status, protocol.Error{Code: code, Message: msg})
}

func (e *httpError) write(w http.ResponseWriter) { writeError(w, e.status, e.code, e.message) }

// internal turns a state error into an answer: 404 for an unknown worker,
// 500 otherwise.
func internal(err error) *httpError {
	switch {
	case errors.Is(err, errUnknownWorker), errors.Is(err, state.ErrNotFound):
		return &httpError{http.StatusNotFound, "not_found", err.Error()}
	case errors.Is(err, state.ErrInvalid):
		return &httpError{http.StatusBadRequest, "bad_request", err.Error()}
	}
	return &httpError{http.StatusInternalServerError, "internal", err.Error()}
}

// begin checks the method and the bearer token and reads the body into v.
// It returns the caller's pool and the raw body.
func (c *Coordinator) begin(w http.ResponseWriter, r *http.Request, v any) (*poolState, []byte, *httpError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, nil, &httpError{http.StatusMethodNotAllowed, "bad_request", fmt.Sprintf("method %s is not allowed; use POST", r.Method)}
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(auth, " ")
	if auth == "" || !strings.EqualFold(scheme, "Bearer") {
		return nil, nil, &httpError{http.StatusUnauthorized, "unauthorized", "missing bearer token: send \"Authorization: Bearer <pool token>\""}
	}
	ps := c.poolForToken(strings.TrimSpace(tok))
	if ps == nil {
		return nil, nil, &httpError{http.StatusUnauthorized, "unauthorized", "the bearer token is not the token of any pool of this apply"}
	}
	body, herr := readBody(w, r)
	if herr != nil {
		return nil, nil, herr
	}
	if err := decodeObject(body, v); err != nil {
		return nil, nil, badRequest("%v", err)
	}
	return ps, body, nil
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
	if req.PID < 0 {
		return fmt.Errorf("pid must not be negative, have %d", req.PID)
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

// DecodeResultRequest decodes and checks the body of
// POST /v1/leases/{token}/result: idempotency_key (at most 256 bytes),
// worker_id and task set, attempt >= 1, failure_class "" or one of
// failure, lost, refused.
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
	case req.Task == "":
		return errors.New("task is required")
	case req.Attempt < 1:
		return fmt.Errorf("attempt must be at least 1, have %d", req.Attempt)
	case req.FailureClass != "" && !state.FailureClass(req.FailureClass).Valid():
		return fmt.Errorf("failure_class must be empty (success), failure, lost or refused, have %q", req.FailureClass)
	}
	return nil
}

// decodeRequest authenticates r and decodes and checks its body; when
// anything is wrong it has written the typed 4xx answer and ok is false.
func decodeRequest[T any](c *Coordinator, w http.ResponseWriter, r *http.Request, check func(T) error) (ps *poolState, req T, body []byte, ok bool) {
	ps, body, herr := c.begin(w, r, &req)
	if herr == nil {
		if err := check(req); err != nil {
			herr = badRequest("%v", err)
		}
	}
	if herr != nil {
		herr.write(w)
		return nil, req, nil, false
	}
	return ps, req, body, true
}

// respond writes resp as the 200 answer, or err as a typed error answer.
func respond[T any](w http.ResponseWriter, resp T, err error) {
	if err != nil {
		internal(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (c *Coordinator) serveRegister(w http.ResponseWriter, r *http.Request) {
	ps, req, _, ok := decodeRequest(c, w, r, checkRegister)
	if !ok {
		return
	}
	resp, err := c.register(r.Context(), ps, req)
	respond(w, resp, err)
}

func (c *Coordinator) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	ps, req, _, ok := decodeRequest(c, w, r, checkHeartbeat)
	if !ok {
		return
	}
	wk, err := c.worker(ps, r.PathValue("id"))
	if err != nil {
		internal(err).write(w)
		return
	}
	resp, err := c.heartbeat(r.Context(), wk, req)
	respond(w, resp, err)
}

func (c *Coordinator) serveClaim(w http.ResponseWriter, r *http.Request) {
	ps, req, _, ok := decodeRequest(c, w, r, checkClaim)
	if !ok {
		return
	}
	wk, err := c.worker(ps, r.PathValue("id"))
	if err != nil {
		internal(err).write(w)
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
	ps, req, body, ok := decodeRequest(c, w, r, func(req protocol.ResultRequest) error {
		var err error
		token, err = strconv.ParseInt(r.PathValue("token"), 10, 64)
		if err != nil || token < 1 {
			return fmt.Errorf("the lease token in the path must be a positive integer, have %q", r.PathValue("token"))
		}
		return checkResult(req)
	})
	if !ok {
		return
	}
	poster, err := c.worker(ps, req.WorkerID)
	if err != nil {
		internal(err).write(w)
		return
	}
	resp, err := c.result(r.Context(), poster, token, req, body)
	respond(w, resp, err)
}
