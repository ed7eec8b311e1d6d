package engine

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// TestRefusalAnswers: each code of a refusal is answered with the status
// docs/protocol.md gives it, the code, reason, message and missing blobs
// unchanged, also when the refusal is wrapped; the state's typed errors
// are 404 and 400, anything else a 500.
func TestRefusalAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{unauthorized(protocol.ReasonCredentialUsed, "used"), 401, "unauthorized"},
		{refuse(CodeForbidden, protocol.ReasonSessionMismatch, "mismatch"), 403, "forbidden"},
		{invalid("bad"), 400, "bad_request"},
		{refuse(CodeNotFound, "", "none"), 404, "not_found"},
		{refuse(CodeConflict, protocol.ReasonPoolFull, "full"), 409, "conflict"},
		{missingArtifacts([]string{"h1"}), 409, protocol.CodeMissingArtifacts},
		{errNoArtifacts(), 409, protocol.CodeNotExpected},
		{refuse(CodeTooLarge, "", "big"), 413, protocol.CodeTooLarge},
		{refuse(CodeHashMismatch, "", "other"), 400, protocol.CodeHashMismatch},
		{fmt.Errorf("wrapped: %w", refuse(CodeNotFound, "", "none")), 404, "not_found"},
		{fmt.Errorf("task x: %w", state.ErrNotFound), 404, "not_found"},
		{fmt.Errorf("x: %w", state.ErrInvalid), 400, "bad_request"},
		{errors.New("disk on fire"), 500, "internal"},
	} {
		got := internal(tc.err)
		if got.status != tc.status || got.code != tc.code || got.message == "" {
			t.Errorf("%v: answered %d %s %q; want %d %s", tc.err, got.status, got.code, got.message, tc.status, tc.code)
		}
		var cerr *CoordinatorError
		if errors.As(tc.err, &cerr) && (got.reason != cerr.Reason || got.message != cerr.Message || len(got.missing) != len(cerr.Missing)) {
			t.Errorf("%v: answered %+v; want the refusal's reason, message and missing blobs", tc.err, got)
		}
	}
	if s := internal(&CoordinatorError{Code: "unheard_of", Message: "?"}).status; s != http.StatusInternalServerError {
		t.Errorf("a code without a status answered %d, want 500", s)
	}
}
