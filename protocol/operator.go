package protocol

import "time"

// Operator routes (docs/protocol.md, "Operator routes"): what the `wdc
// join-token`, `wdc workers lease` and `wdc workers sweep` commands ask of
// the coordinator of a running apply, so that nothing writes the state
// beside it. They take the apply's operator credential (prefix
// OperatorCredentialPrefix), which apply writes to a file only its user can
// read (mode 0600) in the work folder.

// JoinTokenRequest is the body of POST /v1/operator/join-tokens.
type JoinTokenRequest struct {
	Pool string `json:"pool"`
	// Labels, when not null, restricts the pool's labels to these for the
	// workers that join with the token; null means the pool's labels.
	Labels map[string]string `json:"labels"`
	// TTLMS is how long the token lives, in milliseconds (> 0).
	TTLMS int64 `json:"ttl_ms"`
}

// JoinTokenResponse answers POST /v1/operator/join-tokens. Credential is
// the secret itself; the state keeps only its hash, so this is the only
// time it is seen.
type JoinTokenResponse struct {
	ID         string            `json:"id"`
	Pool       string            `json:"pool"`
	Labels     map[string]string `json:"labels"`
	Credential string            `json:"credential"`
	ExpiresAt  time.Time         `json:"expires_at"`
}

// RevokeJoinTokenResponse answers POST /v1/operator/join-tokens/{id}/revoke.
type RevokeJoinTokenResponse struct {
	ID        string    `json:"id"`
	Pool      string    `json:"pool"`
	RevokedAt time.Time `json:"revoked_at"`
	// Draining lists the workers that had joined with the token: they
	// were asked to drain.
	Draining []string `json:"draining"`
}

// LeaseInfo describes one lease.
type LeaseInfo struct {
	FencingToken int64     `json:"fencing_token"`
	Task         string    `json:"task"`
	Attempt      int       `json:"attempt"`
	WorkerID     string    `json:"worker_id"`
	DefHash      string    `json:"def_hash"`
	Status       string    `json:"status"`
	GrantedAt    time.Time `json:"granted_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Unstarted: a prefetched lease whose attempt has not started.
	Unstarted bool `json:"unstarted,omitempty"`
}

// LeaseLookupRequest is the body of POST /v1/operator/lease: the task whose
// current lease to return.
type LeaseLookupRequest struct {
	Task string `json:"task"`
}

// LeaseLookupResponse answers POST /v1/operator/lease: the task's latest
// lease (active or ended), or null when it never had one.
type LeaseLookupResponse struct {
	Task  string     `json:"task"`
	Lease *LeaseInfo `json:"lease"`
}

// SweepResponse answers POST /v1/operator/sweep: what one sweep pass
// expired and marked stale.
type SweepResponse struct {
	Expired []LeaseInfo `json:"expired"`
	Stale   []string    `json:"stale"`
}

// GCRequest is the body of POST /v1/operator/gc: collect the artifact
// store's garbage now, or with DryRun only say what would go.
type GCRequest struct {
	DryRun bool `json:"dry_run"`
}

// GCResponse answers POST /v1/operator/gc (and is what `wdc gc` reports
// without an apply): the blobs removed, or with dry_run those that would
// be, and what is kept. Sizes are in bytes.
type GCResponse struct {
	DryRun       bool     `json:"dry_run"`
	Removed      []GCBlob `json:"removed"`
	RemovedBytes int64    `json:"removed_bytes"`
	Kept         int      `json:"kept"`
	KeptBytes    int64    `json:"kept_bytes"`
	// TempFiles is how many leftover temporary files of interrupted
	// uploads were removed (0 with dry_run).
	TempFiles int `json:"temp_files"`
}

// GCBlob is one blob garbage collection removed: its hash and size in
// bytes.
type GCBlob struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Statuses of a followed attempt (LogFollowResponse.Status).
const (
	// FollowWaiting: the attempt has not started yet.
	FollowWaiting = "waiting"
	// FollowRunning: the attempt's lease is active; more may come.
	FollowRunning = "running"
	// FollowEnded: the attempt's lease ended; its finished log is the
	// blob its result bound, if it delivered one.
	FollowEnded = "ended"
)

// LogFollowRequest is the body of POST /v1/operator/logs, a long poll:
// the bytes of a task's attempt's stdout or stderr from Offset on, as the
// worker sends them while the attempt runs.
type LogFollowRequest struct {
	// Task is the task address.
	Task string `json:"task"`
	// Attempt is the attempt number, or 0 for the task's running attempt
	// (or the next one, when none runs and the task is not finished).
	Attempt int `json:"attempt"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// Offset is the first byte wanted, from the stream's start.
	Offset int64 `json:"offset"`
	// WaitMS is how long the coordinator may hold the request open when
	// there is nothing new, in milliseconds; it caps it.
	WaitMS int64 `json:"wait_ms"`
}

// LogFollowResponse answers POST /v1/operator/logs.
type LogFollowResponse struct {
	Task string `json:"task"`
	// Attempt and FencingToken are the followed attempt's (0 while
	// waiting, or when it ended and the request named no attempt).
	Attempt      int   `json:"attempt"`
	FencingToken int64 `json:"fencing_token"`
	// Status is "waiting", "running" or "ended".
	Status string `json:"status"`
	// Data are the bytes from the request's offset (base64 in JSON),
	// possibly none; Offset is where the next request starts.
	Data   []byte `json:"data"`
	Offset int64  `json:"offset"`
}

// StatusResponse answers POST /v1/operator/status (body {}): what the
// running apply knows beyond its state file, per pool in declaration
// order.
type StatusResponse struct {
	Pools []PoolSupervision `json:"pools"`
}

// PoolSupervision is one pool as the running apply's supervisor sees it.
type PoolSupervision struct {
	Pool string `json:"pool"`
	// Queued counts the tasks the pool's workers could claim now.
	Queued int `json:"queued"`
	// Pending counts the workers launched that have not registered yet.
	Pending int `json:"pending"`
	// Decision is the supervisor's last step for the pool; nil before its
	// first (and for a pool whose workers join by themselves).
	Decision *SupervisorDecision `json:"decision"`
}

// SupervisorDecision is one step of the pool supervisor.
type SupervisorDecision struct {
	// Action is "launch", "drain" or "hold".
	Action string `json:"action"`
	// Count is the number of workers launched (0 unless a launch).
	Count int `json:"count"`
	// Reason explains the step with the counts that justified it.
	Reason string `json:"reason"`
	// At is when the supervisor took it.
	At time.Time `json:"at"`
}

// ProposalDecisionRequest is the body of POST
// /v1/operator/proposals/{id}/decision: `wdc approve` and `wdc reject`
// while an apply runs.
type ProposalDecisionRequest struct {
	// Approve is true to approve, false to reject.
	Approve bool `json:"approve"`
	// By names who decided (the operator's user name), non-empty.
	By string `json:"by"`
	// Reason is required to reject.
	Reason string `json:"reason,omitempty"`
}

// ProposalDecisionResponse answers a proposal decision. A 404 means no
// proposal has the id; a 409 that it was decided before.
type ProposalDecisionResponse struct {
	ID        int64  `json:"id"`
	Status    string `json:"status"`
	DecidedBy string `json:"decided_by"`
	Reason    string `json:"reason,omitempty"`
	// Queued is true when the approved proposal joined the running apply;
	// otherwise Note says why not (it then runs in the next apply).
	Queued bool   `json:"queued"`
	Note   string `json:"note,omitempty"`
}
