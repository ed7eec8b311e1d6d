package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// httpError is an answer other than 200: a status and the protocol.Error
// body.
type httpError struct {
	status int
	body   protocol.Error
	// cause is the error of a 500 answer, kept for the handler, which
	// fails the coordinator with it (errors.Is still finds what it wraps,
	// state.ErrLockLost for one).
	cause error
}

func (e *httpError) write(w http.ResponseWriter) {
	if fw, ok := w.(*failureWatch); ok && e.cause != nil {
		fw.cause = e.cause
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wdc"`)
	}
	writeJSON(w, e.status, e.body)
}

// newError is an answer of status with code and a formatted message.
func newError(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, body: protocol.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func badRequest(format string, args ...any) *httpError {
	return newError(http.StatusBadRequest, "bad_request", format, args...)
}

// notAllowed is the 405 of a method a route does not take; allow names
// those it takes (the Allow header).
func notAllowed(w http.ResponseWriter, allow, format string, args ...any) *httpError {
	w.Header().Set("Allow", allow)
	return newError(http.StatusMethodNotAllowed, "bad_request", format, args...)
}

// statusOf is the HTTP status of each code of a refusal of the
// coordinator (docs/protocol.md, "Errors").
var statusOf = map[coordinator.ErrorCode]int{
	coordinator.CodeUnauthorized:     http.StatusUnauthorized,
	coordinator.CodeForbidden:        http.StatusForbidden,
	coordinator.CodeBadRequest:       http.StatusBadRequest,
	coordinator.CodeNotFound:         http.StatusNotFound,
	coordinator.CodeConflict:         http.StatusConflict,
	coordinator.CodeMissingArtifacts: http.StatusConflict,
	coordinator.CodeNotExpected:      http.StatusConflict,
	coordinator.CodeTooLarge:         http.StatusRequestEntityTooLarge,
	coordinator.CodeHashMismatch:     http.StatusBadRequest,
}

// answerOf turns an operation's error into an answer: a refusal
// (*coordinator.Error) with the status of its code and its code, reason,
// message and missing blobs; 404 for an object the state does not have;
// 400 for an argument the state refuses; 500 otherwise.
func answerOf(err error) *httpError {
	var cerr *coordinator.Error
	switch {
	case errors.As(err, &cerr):
		status, ok := statusOf[cerr.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		return &httpError{status: status, body: protocol.Error{Code: string(cerr.Code), Message: cerr.Message, Reason: cerr.Reason, Missing: cerr.Missing}}
	case errors.Is(err, state.ErrNotFound):
		return newError(http.StatusNotFound, "not_found", "%s", err.Error())
	case errors.Is(err, state.ErrInvalid):
		return newError(http.StatusBadRequest, "bad_request", "%s", err.Error())
	}
	e := newError(http.StatusInternalServerError, "internal", "%s", err.Error())
	e.cause = err
	return e
}
