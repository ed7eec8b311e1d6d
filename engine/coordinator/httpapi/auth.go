package httpapi

import (
	"net/http"
	"strings"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
)

// The kinds of credential each route takes.
var (
	registers = []coordinator.CredentialKind{coordinator.KindLaunch, coordinator.KindJoin}
	sessions  = []coordinator.CredentialKind{coordinator.KindSession}
	operators = []coordinator.CredentialKind{coordinator.KindOperator}
)

// authenticate reads r's bearer credential and has the coordinator find
// it among the credentials of kinds (coordinator.Authenticate); a request
// without one is a 401 missing_credential.
func (s *server) authenticate(r *http.Request, kinds ...coordinator.CredentialKind) (*coordinator.Credential, *httpError) {
	auth := r.Header.Get("Authorization")
	scheme, secret, _ := strings.Cut(auth, " ")
	secret = strings.TrimSpace(secret)
	if auth == "" || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		herr := newError(http.StatusUnauthorized, "unauthorized", "missing bearer credential: send \"Authorization: Bearer <credential>\"")
		herr.body.Reason = protocol.ReasonMissingCredential
		return nil, herr
	}
	cred, err := s.c.Authenticate(secret, kinds...)
	if err != nil {
		return nil, answerOf(err)
	}
	return cred, nil
}

// begin checks the method and the credential and reads the body into v.
func (s *server) begin(w http.ResponseWriter, r *http.Request, v any, kinds []coordinator.CredentialKind) (*coordinator.Credential, []byte, *httpError) {
	if r.Method != http.MethodPost {
		return nil, nil, notAllowed(w, http.MethodPost, "method %s is not allowed; use POST", r.Method)
	}
	cred, herr := s.authenticate(r, kinds...)
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

// decodeRequest authenticates r with a credential of one of kinds and
// decodes and checks its body; when anything is wrong it has written the
// typed 4xx answer and ok is false.
func decodeRequest[T any](s *server, w http.ResponseWriter, r *http.Request, check func(T) error, kinds ...coordinator.CredentialKind) (cred *coordinator.Credential, req T, body []byte, ok bool) {
	cred, body, herr := s.begin(w, r, &req, kinds)
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

// sessionRequest is decodeRequest for the worker routes: a session token
// whose worker is id.
func sessionRequest[T any](s *server, w http.ResponseWriter, r *http.Request, check func(T) error, id func(T) string) (coordinator.Session, T, []byte, bool) {
	cred, req, body, ok := decodeRequest(s, w, r, check, sessions...)
	if !ok {
		return coordinator.Session{}, req, nil, false
	}
	sess, err := s.c.Session(cred, id(req))
	if err != nil {
		answerOf(err).write(w)
		return coordinator.Session{}, req, nil, false
	}
	return sess, req, body, true
}
