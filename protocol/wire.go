package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Wire types of worker protocol v1 (docs/design.md §7, docs/protocol.md): HTTP and
// JSON, every call with "Authorization: Bearer <credential>" (see
// Credentials below) and the VersionHeader. Durations on
// the wire are integer milliseconds (fields ending in _ms); times are
// RFC 3339 strings in UTC.

// APIVersion is the path prefix of worker protocol v1.
const APIVersion = "v1"

// Protocol versions (docs/protocol.md, "Versions"). Every request carries
// the version its sender speaks in the VersionHeader; every answer carries
// the version the coordinator speaks in VersionHeader and the range it
// accepts, "MIN-MAX", in AcceptedVersionsHeader. A request without the
// header, or with a version outside that range, is answered 400 with code
// CodeUnsupportedVersion and a message naming both.
//
// Within one version, readers ignore fields they do not know, and writers
// add only fields whose absence an older reader can safely ignore; a
// change that an older peer must understand gets a new version.
const (
	// ProtocolVersion is the version this wdc speaks.
	ProtocolVersion = 1
	// MinProtocolVersion and MaxProtocolVersion bound what a coordinator
	// of this wdc accepts.
	MinProtocolVersion = 1
	MaxProtocolVersion = 1

	VersionHeader          = "Wdc-Protocol-Version"
	AcceptedVersionsHeader = "Wdc-Protocol-Versions"
)

// Credentials (docs/protocol.md, "Credentials"). Every call carries one as
// "Authorization: Bearer <credential>"; its prefix says which kind it is.
// None of them is ever put on a command line or into a task's environment.
const (
	// LaunchCredentialEnv carries a launch credential to `wdc agent`: a
	// one-time secret apply makes for one launch of one pool, which
	// registration exchanges for a session.
	LaunchCredentialEnv = "WDC_LAUNCH_CREDENTIAL"
	// SessionTokenEnv carries a worker's session token to the `wdc
	// workers` and `wdc leases` verbs.
	SessionTokenEnv = "WDC_SESSION_TOKEN"

	LaunchCredentialPrefix   = "wdcl_" // one launch of one pool of one apply; registers once
	JoinCredentialPrefix     = "wdcj_" // a join token: registers workers of its pool until it expires or is revoked
	SessionTokenPrefix       = "wdcs_" // one registered worker, until it is gone or the apply ends
	OperatorCredentialPrefix = "wdco_" // the operator routes of one apply's coordinator
)

// SecretEnvs are the environment variables that hold credentials: the
// agent never passes them on to a task, and providers never pass the
// caller's values on to a worker.
var SecretEnvs = []string{LaunchCredentialEnv, SessionTokenEnv}

// legacyWorkerTokenEnv carried a worker's token in earlier versions: it
// may still be set where an older wdc ran, and is a credential.
const legacyWorkerTokenEnv = "WDC_WORKER_TOKEN"

// IsSecretEnv reports whether the environment entry kv ("NAME=value", or a
// bare NAME) holds a credential that must never reach a task or be passed
// on to a worker: SecretEnvs, and WDC_WORKER_TOKEN of earlier versions. It
// lives here, beside the names it checks, so that the agent (which strips
// them from an attempt's environment) and the providers (which strip them
// from a worker's) share one list without importing each other.
func IsSecretEnv(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	return name == legacyWorkerTokenEnv || slices.Contains(SecretEnvs, name)
}

// RegisterRequest is the body of POST /v1/workers, sent with a launch or
// join credential. Host and PID are informational: the coordinator records
// them but never acts on them (a takeover stops only what a provider
// recorded at launch).
type RegisterRequest struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// RequestID, when set, makes a retry safe: a registration retried with
	// the same launch credential and the same request id (its answer was
	// lost) gets the same worker and session back. At most 128 bytes.
	RequestID string `json:"request_id,omitempty"`
}

// RegisterResponse answers a registration. Pool, labels and capacity come
// from the credential, never from the worker. SessionToken is the bearer
// credential of every later call of this worker; only this worker id can
// use it.
type RegisterResponse struct {
	WorkerID            string            `json:"worker_id"`
	SessionToken        string            `json:"session_token"`
	Pool                string            `json:"pool"`
	Labels              map[string]string `json:"labels"`
	Capacity            int               `json:"capacity"`
	HeartbeatIntervalMS int64             `json:"heartbeat_interval_ms"`
	TTLMS               int64             `json:"ttl_ms"`
	// MaxArtifactSize is the largest blob the coordinator accepts, in
	// bytes (its max_artifact_size); 0 when it keeps no artifacts. A
	// worker keeps each log and output of a result within it: a log's
	// tail, an output over it fails the attempt.
	MaxArtifactSize int64 `json:"max_artifact_size,omitempty"`
	// HideFolders are absolute paths, on the coordinator's machine, of
	// folders no attempt may reach: the apply's work folder (its state,
	// operator credential, CA key, artifacts). An agent that confines its
	// attempts hides, besides its own work folder, each of them that is a
	// folder on its own machine: a worker joined from the apply's machine
	// must not hand the apply's credentials to its tasks. Absent when none.
	HideFolders []string `json:"hide_folders,omitempty"`
}

// HeartbeatRequest is the body of POST /v1/workers/{id}/heartbeat.
type HeartbeatRequest struct {
	// Leases lists the fencing tokens of the leases the worker holds.
	Leases []int64 `json:"leases"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	// Drain asks the worker to stop claiming, finish its running attempts
	// within its drain timeout, and exit.
	Drain bool `json:"drain"`
	// CancelLeases lists tokens the worker holds that are no longer active
	// (expired, revoked): it should stop those attempts. It still posts
	// their results; the coordinator decides whether they count.
	CancelLeases []int64 `json:"cancel_leases"`
	// Renewed is the number of active leases the heartbeat renewed.
	Renewed int `json:"renewed"`
	// FollowLogs lists tokens of leases the worker holds whose output
	// someone follows (wdc logs --follow): the worker should send their
	// stdout and stderr as they grow, with POST /v1/leases/{token}/log,
	// until an answer says follow is false or the attempt ends. Omitted
	// when none; a worker that ignores it only makes followers wait for
	// the finished logs.
	FollowLogs []int64 `json:"follow_logs,omitempty"`
}

// LeaveRequest is the body of POST /v1/workers/{id}/leave: the worker
// deregisters. Reason, optional, says why (at most MaxLeaveReasonBytes of
// printable text); the events of the leases it hands back carry it.
type LeaveRequest struct {
	Reason string `json:"reason,omitempty"`
}

// MaxLeaveReasonBytes caps LeaveRequest.Reason.
const MaxLeaveReasonBytes = 512

// LeaveResponse answers a leave: the worker is gone and its session
// revoked. Released lists the fencing tokens of the active leases it held,
// handed back without spending the tasks' retries (their tasks are queued
// again); results posted for them afterwards are rejected.
type LeaveResponse struct {
	Released []int64 `json:"released"`
}

// Log streams of an attempt, as LogChunkRequest and LogFollowRequest name
// them.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxLogChunkBytes is the most data one LogChunkRequest carries (256 KiB,
// which base64 keeps well under the coordinator's request limit).
const MaxLogChunkBytes = 256 << 10

// LogChunkRequest is the body of POST /v1/leases/{token}/log: the next
// bytes of a running attempt's stdout or stderr, while someone follows it.
type LogChunkRequest struct {
	WorkerID string `json:"worker_id"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// Offset is where Data starts in the stream, in bytes from its start.
	Offset int64 `json:"offset"`
	// Data is the bytes (base64 in JSON), at most MaxLogChunkBytes.
	Data []byte `json:"data"`
}

// LogChunkResponse answers a LogChunkRequest. The coordinator appends only
// what continues what it has: a chunk that starts past its end is dropped,
// one that overlaps it adds its new part.
type LogChunkResponse struct {
	// Offset is how many bytes of the stream the coordinator now holds:
	// where the next chunk starts.
	Offset int64 `json:"offset"`
	// Follow is false when nobody follows the stream any more, the lease
	// is no longer active, or the coordinator keeps no more of it: stop
	// sending (the finished log still arrives with the result).
	Follow bool `json:"follow"`
}

// ClaimRequest is the body of POST /v1/workers/{id}/claim, a long poll.
type ClaimRequest struct {
	// Max is the number of assignments the worker can start now (≥ 1).
	Max int `json:"max"`
	// WaitMS is how long the server may hold the request open when nothing
	// is claimable, in milliseconds; the server caps it.
	WaitMS int64 `json:"wait_ms"`
}

// ClaimResponse answers a claim: zero or more assignments.
type ClaimResponse struct {
	Assignments []Assignment `json:"assignments"`
	// Drain is true when the worker should stop claiming and exit.
	Drain bool `json:"drain"`
}

// Assignment is a granted lease: the right to run one attempt of one task.
type Assignment struct {
	Task         string     `json:"task"`
	Attempt      int        `json:"attempt"`
	FencingToken int64      `json:"fencing_token"`
	DefHash      string     `json:"def_hash"`
	Definition   Definition `json:"definition"`
	// WorkDir is the absolute directory to run the command in; "" means
	// the attempt's own directory (WDC_ATTEMPT_DIR), for a task whose
	// definition RunsInAttemptDir.
	WorkDir string `json:"work_dir"`
	// DepHashes are the definition hashes of the task's dependencies, by
	// address: with Definition they are everything DefHash covers, so the
	// agent recomputes DefHash and refuses a mismatch
	// (definition_mismatch).
	DepHashes map[string]string `json:"dep_hashes,omitempty"`
	// Inputs are the files to put into the attempt's directory before the
	// command starts: the definition's inputs and its mounts resolved to
	// the upstream outputs. The agent fetches each with GET
	// /v1/artifacts/{sha256} and checks its hash.
	Inputs    []InputFile `json:"inputs,omitempty"`
	TimeoutMS int64       `json:"timeout_ms"`
	ExpiresAt time.Time   `json:"expires_at"`
	// Prefetched: the lease is granted beyond the worker's capacity and
	// unstarted (ResultRequest.Prefetch). The worker starts its attempt
	// when one of its slots frees, and reports the start in
	// ResultRequest.Started of the result it posts next (the attempt's own
	// result reports it too). Until then heartbeats renew it, its timeout
	// does not run, and it goes back at no cost if the worker drains,
	// leaves or is lost.
	Prefetched bool `json:"prefetched,omitempty"`
}

// ResultRequest is the body of POST /v1/leases/{token}/result.
type ResultRequest struct {
	// WorkerID must be the worker of the session that posts it.
	WorkerID string `json:"worker_id"`
	// Task and Attempt, when given, must match the lease named by the
	// token (else unknown_lease); when omitted ("" and 0), the lease
	// decides.
	Task    string `json:"task,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// IdempotencyKey makes posting safe to retry: a replay gets the first
	// decision back and changes nothing.
	IdempotencyKey string `json:"idempotency_key"`
	// ExitCode is nil when the command was killed by a signal or never ran.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that ended the command ("SIGKILL"), or "".
	Signal string `json:"signal,omitempty"`
	// FailureClass is "" on success, else "failure", "lost" or "refused".
	FailureClass string    `json:"failure_class,omitempty"`
	Error        string    `json:"error,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at"`
	// StdoutPath and StderrPath are read from agents of earlier versions
	// and ignored: logs travel as artifacts, and no path of the worker's
	// machine enters the state.
	StdoutPath string `json:"stdout_path,omitempty"`
	StderrPath string `json:"stderr_path,omitempty"`
	// DefHash, when set, must be the lease's definition hash (else the
	// result is rejected as unknown_lease).
	DefHash string `json:"def_hash,omitempty"`
	// Artifacts are the attempt's logs and outputs, by content hash. A
	// result that would be accepted but names blobs the coordinator does
	// not hold is answered 409 missing_artifacts listing them (and is not
	// a decision yet): upload them with PUT /v1/artifacts/{sha256} and post
	// again.
	Artifacts []ArtifactRef `json:"artifacts,omitempty"`
	// Next asks for up to Next assignments with the answer (eager
	// dispatch): a worker whose slot this attempt frees gets its next
	// lease in the same request and the same state write as the result,
	// so a busy worker makes one request per task instead of two. They
	// are granted only when the result is accepted, capped by the
	// worker's free capacity once this lease has ended, and never while
	// the coordinator drains or stops granting. 0 asks for none.
	Next int `json:"next,omitempty"`
	// Prefetch asks, besides Next, for up to Prefetch leases granted
	// beyond the worker's capacity, unstarted (Assignment.Prefetched);
	// the coordinator lets a worker hold at most one unstarted lease, and
	// grants them on the terms of Next. 0 asks for none.
	Prefetch int `json:"prefetch,omitempty"`
	// Started lists the tokens of the worker's prefetched leases whose
	// attempts it started since it last posted a result: each start is
	// taken, whatever the decision on this result, when its lease is the
	// worker's, active and unexpired (its timeout counts from then on);
	// else the answer lists it in CancelLeases. At most MaxStarted.
	Started []int64 `json:"started,omitempty"`
	// Recommendations is the content of the attempt's RecommendationsFile
	// when its command succeeded and wrote one: a JSON list of
	// {"type": string, "input": object} (see DecodeRecommendations), at
	// most MaxRecommendationsBytes. The coordinator judges them only when
	// it accepts the result; they never make a result rejected.
	Recommendations json.RawMessage `json:"recommendations,omitempty"`
	// RecommendationsError says why the worker could not send the file it
	// found (larger than MaxRecommendationsBytes, not JSON, unreadable);
	// the coordinator records it as one rejected recommendation.
	RecommendationsError string `json:"recommendations_error,omitempty"`
}

// Artifact kinds.
const (
	ArtifactLog    = "log"    // Name "stdout" or "stderr"
	ArtifactOutput = "output" // Name the output's path relative to the attempt's directory
)

// ArtifactRef names one blob a result binds to its attempt.
type ArtifactRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// SHA256 is the blob's hash, 64 lowercase hex digits.
	SHA256 string `json:"sha256"`
	// Size is the blob's length in bytes.
	Size      int64  `json:"size"`
	MediaType string `json:"media_type,omitempty"`
}

// PutArtifactResponse answers PUT /v1/artifacts/{sha256}.
type PutArtifactResponse struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Created is false when the coordinator held the blob already.
	Created bool `json:"created"`
}

// Result decisions.
const (
	DecisionAccepted = "accepted"
	DecisionRejected = "rejected"
)

// Rejection reasons (docs/design.md §3 rule 3).
const (
	ReasonStaleToken   = "stale_token"   // a newer lease exists for the task
	ReasonLeaseExpired = "lease_expired" // the task's latest lease, past its expiry
	ReasonWrongWorker  = "wrong_worker"  // the lease belongs to another worker
	ReasonUnknownLease = "unknown_lease" // no such lease (token, task or attempt mismatch)
)

// ResultResponse answers a result post.
type ResultResponse struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Duplicate is true when this is a replay of an earlier post with the
	// same idempotency key; Decision and Reason are the first answer.
	Duplicate bool `json:"duplicate,omitempty"`
	// Assignments are the leases granted with this answer (at most the
	// request's Next; see ResultRequest.Next). A worker that did not ask
	// gets none.
	Assignments []Assignment `json:"assignments,omitempty"`
	// CancelLeases lists the tokens of the request's Started whose start
	// was refused (the lease is gone): the worker stops those attempts.
	CancelLeases []int64 `json:"cancel_leases,omitempty"`
}

// MaxStarted bounds ResultRequest.Started.
const MaxStarted = 64

// Error codes of protocol.Error beyond the generic ones.
const (
	// CodeUnsupportedVersion: the request's VersionHeader is missing or
	// outside the range the coordinator accepts (400).
	CodeUnsupportedVersion = "unsupported_protocol_version"
	// CodeMissingArtifacts: a result names blobs the coordinator does not
	// hold (409); Error.Missing lists them.
	CodeMissingArtifacts = "missing_artifacts"
	// CodeHashMismatch: an uploaded blob's content does not have the hash
	// it was put under (400).
	CodeHashMismatch = "hash_mismatch"
	// CodeTooLarge: an uploaded blob is larger than max_artifact_size (413).
	CodeTooLarge = "too_large"
	// CodeNotExpected: an upload of a blob no result of this worker is
	// waiting for (409).
	CodeNotExpected = "not_expected"
)

// Reasons of 401, 403 and 409 answers (protocol.Error.Reason).
const (
	ReasonMissingCredential = "missing_credential" // no bearer credential
	ReasonUnknownCredential = "unknown_credential" // not a credential of this apply
	ReasonCredentialUsed    = "credential_used"    // a launch credential used again (not a retry of its registration)
	ReasonCredentialExpired = "credential_expired" // a launch credential past launch_timeout, or an expired join token
	ReasonCredentialRevoked = "credential_revoked" // a revoked join token
	ReasonSessionRevoked    = "session_revoked"    // the worker is gone, or its apply is ending
	ReasonWrongCredential   = "wrong_credential"   // a credential of another kind than the route takes
	ReasonSessionMismatch   = "session_mismatch"   // the session belongs to another worker than the request names (403)
	ReasonPoolFull          = "pool_full"          // a join would take the pool past max (409)
	ReasonNotJoinable       = "not_joinable"       // a join token for a pool its provider launches (403, or 400 when making one)
)

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	// Code is a stable machine-readable name: "unauthorized",
	// "bad_request", "not_found", "conflict", "internal", or one of the
	// Code* constants.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reason refines Code where the caller acts on it: one of the
	// Reason* constants above, or "".
	Reason string `json:"reason,omitempty"`
	// Missing lists the hashes of a missing_artifacts answer.
	Missing []string `json:"missing,omitempty"`
}
