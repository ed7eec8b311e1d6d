package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// MaxResponseBytes caps how much of a response body the Client reads
// (1 MiB). A larger body is an error, never a partial decode.
const MaxResponseBytes = 1 << 20

// Client calls worker protocol v1 on one coordinator with one bearer
// credential (a launch or join credential to register, then the session
// token; the operator credential for the operator routes).
// It is safe for concurrent use. It does not retry: network errors are
// returned as they are, and non-2xx answers as *APIError, so the caller
// (the agent) decides what to retry and what is fatal.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for the coordinator at baseURL (for example
// "http://127.0.0.1:7420"; a trailing slash is ignored) that sends token as
// "Authorization: Bearer <token>" on every call. For an https URL give an
// httpClient whose transport verifies the coordinator (tlsca.ClientConfig
// pins its CA). httpClient nil means
// http.DefaultClient. Give the client no overall Timeout shorter than a
// claim's long poll: deadlines come from each call's context.
func NewClient(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
}

// APIError is a non-2xx answer from the coordinator. Code and Message come
// from the protocol.Error body when it has one; otherwise Code is derived
// from Status ("unauthorized", "not_found", "internal", …) and Message holds
// the start of the body.
type APIError struct {
	Status  int    // HTTP status code, e.g. 401
	Code    string // stable machine-readable name, e.g. "unauthorized"
	Message string // human-readable detail
	Reason  string // a Reason* constant refining Code, or ""
	// Missing lists the hashes of a missing_artifacts answer.
	Missing []string
}

// Error implements error, e.g. "coordinator answered 409 conflict: lease is not active".
func (e *APIError) Error() string {
	msg := fmt.Sprintf("coordinator answered %d %s", e.Status, e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Temporary reports whether the call may succeed if repeated unchanged:
// 5xx answers, 408 Request Timeout and 429 Too Many Requests.
func (e *APIError) Temporary() bool {
	return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests
}

// StatusOf returns the HTTP status of err when it is (or wraps) an
// *APIError, and 0 otherwise (a network error, a cancelled context, …).
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Register calls POST /v1/workers and returns the worker's identity and
// settings.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (RegisterResponse, error) {
	var resp RegisterResponse
	err := c.call(ctx, "/"+APIVersion+"/workers", req, &resp)
	return resp, err
}

// Heartbeat calls POST /v1/workers/{id}/heartbeat, reporting the fencing
// tokens the worker holds; the answer may ask it to drain or to cancel
// leases. A 404 means the coordinator does not know the worker.
func (c *Client) Heartbeat(ctx context.Context, workerID string, req HeartbeatRequest) (HeartbeatResponse, error) {
	var resp HeartbeatResponse
	err := c.call(ctx, "/"+APIVersion+"/workers/"+url.PathEscape(workerID)+"/heartbeat", req, &resp)
	return resp, err
}

// Leave calls POST /v1/workers/{id}/leave: the worker deregisters, its
// session ends and the leases it still holds are handed back without cost
// to their tasks' retries. Later calls with the session are refused (401
// session_revoked).
func (c *Client) Leave(ctx context.Context, workerID string, req LeaveRequest) (LeaveResponse, error) {
	var resp LeaveResponse
	err := c.call(ctx, "/"+APIVersion+"/workers/"+url.PathEscape(workerID)+"/leave", req, &resp)
	return resp, err
}

// Claim calls POST /v1/workers/{id}/claim, a long poll that the server may
// hold open for up to req.WaitMS milliseconds: give ctx a deadline longer
// than that. A 404 means the coordinator does not know the worker.
func (c *Client) Claim(ctx context.Context, workerID string, req ClaimRequest) (ClaimResponse, error) {
	var resp ClaimResponse
	err := c.call(ctx, "/"+APIVersion+"/workers/"+url.PathEscape(workerID)+"/claim", req, &resp)
	return resp, err
}

// PostResult calls POST /v1/leases/{token}/result. A rejected result is not
// an error: it is a ResultResponse with Decision "rejected" and a Reason.
// Posting is idempotent by req.IdempotencyKey, so it is safe to repeat after
// a network error.
func (c *Client) PostResult(ctx context.Context, token int64, req ResultRequest) (ResultResponse, error) {
	var resp ResultResponse
	err := c.call(ctx, "/"+APIVersion+"/leases/"+strconv.FormatInt(token, 10)+"/result", req, &resp)
	return resp, err
}

// PostLogChunk calls POST /v1/leases/{token}/log (session token): the
// next bytes of a followed attempt's stdout or stderr. A 403 means the
// lease is another worker's; the answer's Follow false means stop sending.
func (c *Client) PostLogChunk(ctx context.Context, token int64, req LogChunkRequest) (LogChunkResponse, error) {
	var resp LogChunkResponse
	err := c.call(ctx, "/"+APIVersion+"/leases/"+strconv.FormatInt(token, 10)+"/log", req, &resp)
	return resp, err
}

// FollowLog calls POST /v1/operator/logs (operator credential), a long
// poll the server may hold open for up to req.WaitMS milliseconds: give
// ctx a deadline longer than that. A 404 means the apply has no such task.
func (c *Client) FollowLog(ctx context.Context, req LogFollowRequest) (LogFollowResponse, error) {
	var resp LogFollowResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/logs", req, &resp)
	return resp, err
}

// WithToken returns a client for the same coordinator and HTTP client that
// sends token instead (after registration: the session token).
func (c *Client) WithToken(token string) *Client {
	return &Client{base: c.base, token: token, http: c.http}
}

// BaseURL returns the coordinator's base URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// CreateJoinToken calls POST /v1/operator/join-tokens (operator credential).
func (c *Client) CreateJoinToken(ctx context.Context, req JoinTokenRequest) (JoinTokenResponse, error) {
	var resp JoinTokenResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/join-tokens", req, &resp)
	return resp, err
}

// RevokeJoinToken calls POST /v1/operator/join-tokens/{id}/revoke
// (operator credential). A 404 means no join token has the id.
func (c *Client) RevokeJoinToken(ctx context.Context, id string) (RevokeJoinTokenResponse, error) {
	var resp RevokeJoinTokenResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/join-tokens/"+url.PathEscape(id)+"/revoke", struct{}{}, &resp)
	return resp, err
}

// DecideProposal calls POST /v1/operator/proposals/{id}/decision
// (operator credential). A 404 means no proposal has the id, a 409 that it
// was decided before.
func (c *Client) DecideProposal(ctx context.Context, id int64, req ProposalDecisionRequest) (ProposalDecisionResponse, error) {
	var resp ProposalDecisionResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/proposals/"+strconv.FormatInt(id, 10)+"/decision", req, &resp)
	return resp, err
}

// Lease calls POST /v1/operator/lease (operator credential): the task's
// latest lease. A 404 means the apply has no such task.
func (c *Client) Lease(ctx context.Context, task string) (LeaseLookupResponse, error) {
	var resp LeaseLookupResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/lease", LeaseLookupRequest{Task: task}, &resp)
	return resp, err
}

// Sweep calls POST /v1/operator/sweep (operator credential): one sweep
// pass now.
func (c *Client) Sweep(ctx context.Context) (SweepResponse, error) {
	var resp SweepResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/sweep", struct{}{}, &resp)
	return resp, err
}

// GC calls POST /v1/operator/gc (operator credential): the running
// apply's coordinator collects the artifact store's garbage, or with
// req.DryRun says what it would remove.
func (c *Client) GC(ctx context.Context, req GCRequest) (GCResponse, error) {
	var resp GCResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/gc", req, &resp)
	return resp, err
}

// Status calls POST /v1/operator/status (operator credential): the
// running apply's per-pool supervision.
func (c *Client) Status(ctx context.Context) (StatusResponse, error) {
	var resp StatusResponse
	err := c.call(ctx, "/"+APIVersion+"/operator/status", struct{}{}, &resp)
	return resp, err
}

// PutArtifact calls PUT /v1/artifacts/{sha256}, streaming size bytes of
// body (Content-Type application/octet-stream). The coordinator recomputes
// the hash: a mismatch is a 400 hash_mismatch, a blob over its cap a 413
// too_large, a blob no result of this worker is waiting for a 409
// not_expected.
func (c *Client) PutArtifact(ctx context.Context, sha256 string, body io.Reader, size int64) (PutArtifactResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+"/"+APIVersion+"/artifacts/"+url.PathEscape(sha256), body)
	if err != nil {
		return PutArtifactResponse{}, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	var resp PutArtifactResponse
	err = c.do(req, &resp)
	return resp, err
}

// GetArtifact calls GET /v1/artifacts/{sha256} and copies the blob, at
// most max bytes, into dst; it returns the bytes copied. The coordinator
// serves only inputs of assignments granted to this worker (else 404).
// The caller checks the hash of what it received.
func (c *Client) GetArtifact(ctx context.Context, sha256 string, dst io.Writer, max int64) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/"+APIVersion+"/artifacts/"+url.PathEscape(sha256), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(VersionHeader, strconv.Itoa(ProtocolVersion))
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		return 0, decodeAPIError(resp.StatusCode, data)
	}
	n, err := io.Copy(dst, io.LimitReader(resp.Body, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("blob %s is larger than %d bytes", sha256, max)
	}
	return n, err
}

// call POSTs body as JSON to path and decodes a 2xx answer into out.
func (c *Client) call(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding request to %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, out)
}

// do sends req with the credential and version headers and decodes a 2xx
// JSON answer into out.
func (c *Client) do(req *http.Request, out any) error {
	path := req.URL.Path
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(VersionHeader, strconv.Itoa(ProtocolVersion))
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("reading answer from %s: %w", path, err)
	}
	if len(data) > MaxResponseBytes {
		return fmt.Errorf("answer from %s is larger than %d bytes", path, MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeAPIError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding answer from %s: %w", path, err)
	}
	return nil
}

// decodeAPIError builds the *APIError for a non-2xx answer.
func decodeAPIError(status int, data []byte) *APIError {
	var e Error
	if err := json.Unmarshal(data, &e); err == nil && e.Code != "" {
		return &APIError{Status: status, Code: e.Code, Message: e.Message, Reason: e.Reason, Missing: e.Missing}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return &APIError{Status: status, Code: codeForStatus(status), Message: msg}
}

// codeForStatus names a status the way protocol.Error codes do.
func codeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "unauthorized"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusConflict:
		return "conflict"
	case status >= 500:
		return "internal"
	default:
		return "bad_request"
	}
}
