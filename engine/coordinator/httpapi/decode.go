package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// MaxRequestBytes caps the body of every protocol request (1 MiB); a
// larger body is answered 400 bad_request.
const MaxRequestBytes = 1 << 20

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
	case req.TTLMS < 1000 || req.TTLMS > coordinator.MaxJoinTTL.Milliseconds():
		return fmt.Errorf("ttl_ms must be from 1000 (1s) to %d (%s), have %d", coordinator.MaxJoinTTL.Milliseconds(), coordinator.MaxJoinTTL, req.TTLMS)
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

// DecodeLeaveRequest decodes and checks the body of
// POST /v1/workers/{id}/leave: a reason of at most
// protocol.MaxLeaveReasonBytes of printable text.
func DecodeLeaveRequest(body []byte) (protocol.LeaveRequest, error) {
	var req protocol.LeaveRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkLeave(req)
}

func checkLeave(req protocol.LeaveRequest) error {
	switch {
	case len(req.Reason) > protocol.MaxLeaveReasonBytes:
		return fmt.Errorf("reason is longer than %d bytes (%d)", protocol.MaxLeaveReasonBytes, len(req.Reason))
	case !printable(req.Reason):
		return errors.New("reason must be printable text without control characters (events show it)")
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
// and prefetch between 0 and MaxNext, at most protocol.MaxStarted started
// tokens (each at least 1), artifacts whose names cannot leave the attempt's
// directory (coordinator.CheckArtifactNames).
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
	case req.Prefetch < 0 || req.Prefetch > MaxNext:
		return fmt.Errorf("prefetch must be between 0 and %d, have %d", MaxNext, req.Prefetch)
	case len(req.Started) > protocol.MaxStarted:
		return fmt.Errorf("started lists at most %d tokens, have %d", protocol.MaxStarted, len(req.Started))
	}
	for _, tok := range req.Started {
		if tok < 1 {
			return fmt.Errorf("started lists fencing tokens (at least 1), have %d", tok)
		}
	}
	return coordinator.CheckArtifactNames(req.Artifacts)
}

func checkStream(s string) error {
	if s != protocol.StreamStdout && s != protocol.StreamStderr {
		return fmt.Errorf("stream must be %q or %q, have %q", protocol.StreamStdout, protocol.StreamStderr, s)
	}
	return nil
}

// DecodeLogChunkRequest decodes and checks the body of
// POST /v1/leases/{token}/log: a worker id, stream "stdout" or "stderr",
// offset >= 0, at most protocol.MaxLogChunkBytes of data. It is what the
// handler runs on the body (and what the fuzz target exercises).
func DecodeLogChunkRequest(body []byte) (protocol.LogChunkRequest, error) {
	var req protocol.LogChunkRequest
	if err := decodeObject(body, &req); err != nil {
		return req, err
	}
	return req, checkLogChunk(req)
}

func checkLogChunk(req protocol.LogChunkRequest) error {
	switch {
	case req.WorkerID == "":
		return errors.New("worker_id is required")
	case req.Offset < 0:
		return fmt.Errorf("offset must be >= 0, have %d", req.Offset)
	case len(req.Data) > protocol.MaxLogChunkBytes:
		return fmt.Errorf("a chunk carries at most %d bytes, have %d", protocol.MaxLogChunkBytes, len(req.Data))
	}
	return checkStream(req.Stream)
}

func checkFollow(req protocol.LogFollowRequest) error {
	switch {
	case req.Task == "":
		return errors.New("task is required")
	case req.Attempt < 0:
		return fmt.Errorf("attempt must be >= 0 (0: the running one), have %d", req.Attempt)
	case req.Offset < 0:
		return fmt.Errorf("offset must be >= 0, have %d", req.Offset)
	case req.WaitMS < 0:
		return fmt.Errorf("wait_ms must be >= 0, have %d", req.WaitMS)
	}
	return checkStream(req.Stream)
}

// checkProposalDecision checks the body of POST
// /v1/operator/proposals/{id}/decision: who decides, and a reason for a
// rejection (coordinator.CheckDecisionText).
func checkProposalDecision(req protocol.ProposalDecisionRequest) error {
	if err := coordinator.CheckDecisionText("by", req.By); err != nil {
		return err
	}
	switch {
	case !req.Approve && strings.TrimSpace(req.Reason) == "":
		return errors.New("a rejection needs a reason")
	case req.Reason != "":
		return coordinator.CheckDecisionText("reason", req.Reason)
	}
	return nil
}

func checkLeaseLookup(req protocol.LeaseLookupRequest) error {
	if req.Task == "" {
		return errors.New("task is required")
	}
	return nil
}

// noCheck is the check of a body whose fields are all optional.
func noCheck[T any](T) error { return nil }

// pathToken parses the lease token of a route's path: a positive integer,
// in canonical form.
func pathToken(s string) (int64, error) {
	token, err := strconv.ParseInt(s, 10, 64)
	if err != nil || token < 1 || strconv.FormatInt(token, 10) != s {
		return 0, fmt.Errorf("the lease token in the path must be a positive integer, have %q", s)
	}
	return token, nil
}
