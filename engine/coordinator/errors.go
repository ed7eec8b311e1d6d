package coordinator

import "fmt"

// ErrorCode says what kind of refusal an Error is: one of the error codes
// of worker protocol v1 (docs/protocol.md, "Errors"). Package httpapi
// answers each with its status; the operations know nothing of HTTP.
type ErrorCode string

// The codes of the coordinator's refusals.
const (
	// CodeUnauthorized: the credential does not open the operation (no,
	// unknown, used, expired or revoked credential, one of another kind,
	// a revoked session); Reason says which.
	CodeUnauthorized ErrorCode = "unauthorized"
	// CodeForbidden: the credential opens the operation, but not for what
	// the request names (a session naming another worker, a lease of
	// another worker, a join token for a pool its provider launches).
	CodeForbidden ErrorCode = "forbidden"
	// CodeBadRequest: the request breaks a rule.
	CodeBadRequest ErrorCode = "bad_request"
	// CodeNotFound: the request names something the coordinator or the
	// state does not have.
	CodeNotFound ErrorCode = "not_found"
	// CodeConflict: the request contradicts the state (a join past a
	// pool's max, a proposal decided already).
	CodeConflict ErrorCode = "conflict"
	// CodeMissingArtifacts: a result names blobs the coordinator lacks
	// (Missing lists them); nothing was decided.
	CodeMissingArtifacts ErrorCode = "missing_artifacts"
	// CodeNotExpected: an upload no result waits for, or a coordinator
	// that keeps no artifacts.
	CodeNotExpected ErrorCode = "not_expected"
	// CodeTooLarge: a blob over the artifact store's size cap.
	CodeTooLarge ErrorCode = "too_large"
	// CodeHashMismatch: an uploaded blob whose content does not have the
	// hash it was uploaded as.
	CodeHashMismatch ErrorCode = "hash_mismatch"
)

// Error is why an operation of the coordinator refused a request: a code,
// the typed reason of the protocol where the caller acts on one (a
// protocol.Reason* constant, or ""), and a sentence for people. The
// refused operation changed nothing (a refused registration is recorded
// as an event, nothing more).
type Error struct {
	Code    ErrorCode
	Reason  string
	Message string
	// Missing lists the SHA-256 hashes of the blobs a result waits for
	// (CodeMissingArtifacts only).
	Missing []string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// refuse returns an *Error of code with a formatted message.
func refuse(code ErrorCode, reason, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// unauthorized is a CodeUnauthorized refusal with a typed reason.
func unauthorized(reason, format string, args ...any) *Error {
	return refuse(CodeUnauthorized, reason, format, args...)
}

// invalid is a CodeBadRequest refusal.
func invalid(format string, args ...any) *Error {
	return refuse(CodeBadRequest, "", format, args...)
}
