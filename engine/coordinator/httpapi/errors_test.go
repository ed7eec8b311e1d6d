package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TestRefusalAnswers: each code of a refusal is answered with the status
// docs/protocol.md gives it, the code, reason, message and missing blobs
// unchanged, also when the refusal is wrapped; the state's typed errors
// are 404 and 400, anything else a 500.
func TestRefusalAnswers(t *testing.T) {
	t.Parallel()
	refusal := func(code coordinator.ErrorCode, reason string) *coordinator.Error {
		return &coordinator.Error{Code: code, Reason: reason, Message: "why " + string(code)}
	}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{refusal(coordinator.CodeUnauthorized, protocol.ReasonCredentialUsed), 401, "unauthorized"},
		{refusal(coordinator.CodeForbidden, protocol.ReasonSessionMismatch), 403, "forbidden"},
		{refusal(coordinator.CodeBadRequest, ""), 400, "bad_request"},
		{refusal(coordinator.CodeNotFound, ""), 404, "not_found"},
		{refusal(coordinator.CodeConflict, protocol.ReasonPoolFull), 409, "conflict"},
		{&coordinator.Error{Code: coordinator.CodeMissingArtifacts, Message: "upload", Missing: []string{"h1"}}, 409, protocol.CodeMissingArtifacts},
		{refusal(coordinator.CodeNotExpected, ""), 409, protocol.CodeNotExpected},
		{refusal(coordinator.CodeTooLarge, ""), 413, protocol.CodeTooLarge},
		{refusal(coordinator.CodeHashMismatch, ""), 400, protocol.CodeHashMismatch},
		{fmt.Errorf("wrapped: %w", refusal(coordinator.CodeNotFound, "")), 404, "not_found"},
		{fmt.Errorf("task x: %w", state.ErrNotFound), 404, "not_found"},
		{fmt.Errorf("x: %w", state.ErrInvalid), 400, "bad_request"},
		{errors.New("disk on fire"), 500, "internal"},
	} {
		got := answerOf(tc.err)
		if got.status != tc.status || got.body.Code != tc.code || got.body.Message == "" {
			t.Errorf("%v: answered %d %s %q; want %d %s", tc.err, got.status, got.body.Code, got.body.Message, tc.status, tc.code)
		}
		var cerr *coordinator.Error
		if errors.As(tc.err, &cerr) && (got.body.Reason != cerr.Reason || got.body.Message != cerr.Message || len(got.body.Missing) != len(cerr.Missing)) {
			t.Errorf("%v: answered %+v; want the refusal's reason, message and missing blobs", tc.err, got)
		}
	}
	if s := answerOf(&coordinator.Error{Code: "unheard_of", Message: "?"}).status; s != http.StatusInternalServerError {
		t.Errorf("a code without a status answered %d, want 500", s)
	}
}
