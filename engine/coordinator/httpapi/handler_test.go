package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("a", 1), rtPool("b", 1)}, []coordinator.TaskRuntime{rtTask("x")}, harnessOpts{})
	wa, wb := h.register("a"), h.register("b")
	tokA, tokB := wa.session, wb.session
	launch := issueLaunch(t, h.c, "a")
	used := issueLaunch(t, h.c, "a")
	if _, err := protocol.NewClient(h.srv.URL, used, nil).Register(context.Background(), protocol.RegisterRequest{}); err != nil {
		t.Fatal(err)
	}
	ops := h.c.OperatorCredential()
	big := `{"host":"` + strings.Repeat("x", MaxRequestBytes) + `"}`
	result := `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1,"idempotency_key":"k"}`
	cases := []struct {
		name, method, path, auth, body string
		status                         int
		code, reason                   string
	}{
		{"no credential", "POST", "/v1/workers", "", `{}`, 401, "unauthorized", protocol.ReasonMissingCredential},
		{"unknown credential", "POST", "/v1/workers", "Bearer nope", `{}`, 401, "unauthorized", protocol.ReasonUnknownCredential},
		{"basic auth", "POST", "/v1/workers", "Basic " + launch, `{}`, 401, "unauthorized", protocol.ReasonMissingCredential},
		{"used launch credential", "POST", "/v1/workers", "Bearer " + used, `{}`, 401, "unauthorized", protocol.ReasonCredentialUsed},
		{"session registers", "POST", "/v1/workers", "Bearer " + tokA, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"operator registers", "POST", "/v1/workers", "Bearer " + ops, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"launch credential claims", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + launch, `{"max":1}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"wrong session on claim", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer x" + tokA, `{"max":1}`, 401, "unauthorized", protocol.ReasonUnknownCredential},
		{"session sweeps", "POST", "/v1/operator/sweep", "Bearer " + tokA, `{}`, 401, "unauthorized", protocol.ReasonWrongCredential},
		{"GET", "GET", "/v1/workers", "Bearer " + launch, ``, 405, "bad_request", ""},
		{"bad json", "POST", "/v1/workers", "Bearer " + launch, `{"host":`, 400, "bad_request", ""},
		{"empty body", "POST", "/v1/workers", "Bearer " + launch, ``, 400, "bad_request", ""},
		{"null body", "POST", "/v1/workers", "Bearer " + launch, `null`, 400, "bad_request", ""},
		{"array body", "POST", "/v1/workers", "Bearer " + launch, `[]`, 400, "bad_request", ""},
		{"dot-dot path", "POST", "/v1/workers/../workers", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"doubled slash", "POST", "/v1//workers", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"trailing slash", "POST", "/v1/workers/", "Bearer " + launch, `{}`, 400, "bad_request", ""},
		{"trailing data", "POST", "/v1/workers", "Bearer " + launch, `{} {}`, 400, "bad_request", ""},
		{"negative pid", "POST", "/v1/workers", "Bearer " + launch, `{"pid":-1}`, 400, "bad_request", ""},
		{"long request id", "POST", "/v1/workers", "Bearer " + launch, `{"request_id":"` + strings.Repeat("r", 129) + `"}`, 400, "bad_request", ""},
		{"control characters in host", "POST", "/v1/workers", "Bearer " + launch, `{"host":"a\u001b[31mred\nw-fake"}`, 400, "bad_request", ""},
		{"token with a leading zero", "POST", "/v1/leases/01/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"huge error text", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","idempotency_key":"k","error":"` + strings.Repeat("e", MaxErrorBytes+1) + `"}`, 400, "bad_request", ""},
		{"oversize", "POST", "/v1/workers", "Bearer " + launch, big, 400, "bad_request", ""},
		{"unknown route", "POST", "/v1/nothing", "Bearer " + launch, `{}`, 404, "not_found", ""},
		{"another worker's heartbeat", "POST", "/v1/workers/w-nope/heartbeat", "Bearer " + tokA, `{}`, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"worker of another pool", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokB, `{"max":1}`, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"claim max 0", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokA, `{"max":0}`, 400, "bad_request", ""},
		{"claim negative wait", "POST", "/v1/workers/" + wa.id + "/claim", "Bearer " + tokA, `{"max":1,"wait_ms":-5}`, 400, "bad_request", ""},
		{"heartbeat bad token", "POST", "/v1/workers/" + wa.id + "/heartbeat", "Bearer " + tokA, `{"leases":[0]}`, 400, "bad_request", ""},
		{"result token not a number", "POST", "/v1/leases/abc/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"result token 0", "POST", "/v1/leases/0/result", "Bearer " + tokA, result, 400, "bad_request", ""},
		{"result without key", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1}`, 400, "bad_request", ""},
		{"result bad class", "POST", "/v1/leases/1/result", "Bearer " + tokA, `{"worker_id":"` + wa.id + `","task":"task.x","attempt":1,"idempotency_key":"k","failure_class":"meh"}`, 400, "bad_request", ""},
		{"result naming another worker", "POST", "/v1/leases/1/result", "Bearer " + tokB, result, 403, "forbidden", protocol.ReasonSessionMismatch},
		{"join token without ttl", "POST", "/v1/operator/join-tokens", "Bearer " + ops, `{"pool":"a"}`, 400, "bad_request", ""},
		{"revoke unknown join token", "POST", "/v1/operator/join-tokens/jt-nope/revoke", "Bearer " + ops, `{}`, 404, "not_found", ""},
		{"lease of unknown task", "POST", "/v1/operator/lease", "Bearer " + ops, `{"task":"task.nope"}`, 404, "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, h.srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			req.Header.Set(protocol.VersionHeader, "1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e protocol.Error
			if resp.StatusCode != c.status || json.Unmarshal(b, &e) != nil || e.Code != c.code || e.Reason != c.reason || e.Message == "" {
				t.Errorf("%s %s: %d %s; want %d with code %s, reason %q", c.method, c.path, resp.StatusCode, b, c.status, c.code, c.reason)
			}
		})
	}
	// Nothing above changed any task, and no result was recorded.
	if rs, _ := h.store.Results(context.Background(), ""); len(rs) != 0 {
		t.Errorf("results recorded: %+v", rs)
	}
}

// TestProtocolVersions: every answer names the version the coordinator
// speaks and the range it accepts; a request without a version, or with one
// outside the range, gets a typed 400 naming both; a request with fields
// the coordinator does not know is served (docs/protocol.md, "Versions").
func TestProtocolVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("a", 1)}, []coordinator.TaskRuntime{rtTask("x")}, harnessOpts{})
	cases := []struct {
		name, version, body string
		status              int
		code, message       string
	}{
		{"no version", "", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, "has no Wdc-Protocol-Version header; this coordinator accepts protocol versions 1 to 1"},
		{"newer version", "2", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `speaks protocol version "2"; this coordinator accepts protocol versions 1 to 1`},
		{"not a number", "one", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `"one"`},
		{"not canonical", "01", `{"host":"h"}`, 400, protocol.CodeUnsupportedVersion, `"01"`},
		{"version 1 with an unknown field", "1", `{"host":"h","pid":3,"newer_field":{"x":1}}`, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+"/v1/workers", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+issueLaunch(t, h.c, "a"))
			if c.version != "" {
				req.Header.Set(protocol.VersionHeader, c.version)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.Header.Get(protocol.VersionHeader) != "1" || resp.Header.Get(protocol.AcceptedVersionsHeader) != "1-1" {
				t.Errorf("answer headers %v; want the version and the accepted range", resp.Header)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("%d %s; want %d", resp.StatusCode, b, c.status)
			}
			if c.code == "" {
				return
			}
			var e protocol.Error
			if json.Unmarshal(b, &e) != nil || e.Code != c.code || !strings.Contains(e.Message, c.message) {
				t.Errorf("answer %s; want code %s and a message containing %q", b, c.code, c.message)
			}
		})
	}
}

func TestHandlerNeverPanicsOnRawGarbage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{maxClaimWait: time.Millisecond})
	w := h.register("p")
	tok := w.session
	bodies := []string{"", "null", "[]", "{}", `{"max":1e400}`, `{"leases":["x"]}`, `{"started_at":"yesterday"}`, "\x00\xff", `{"max":1}{"max":2}`}
	paths := []string{"/v1/workers", "/v1/workers/" + w.id + "/heartbeat", "/v1/workers/" + w.id + "/claim", "/v1/leases/1/result", "/v1/leases/99999999999999999999/result", "/v1/leases/-1/result", "/v1/workers//claim"}
	for _, p := range paths {
		for _, b := range bodies {
			req, _ := http.NewRequest("POST", h.srv.URL+p, bytes.NewReader([]byte(b)))
			authed(req, tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("POST %s %q: %d", p, b, resp.StatusCode)
			}
		}
	}
}

// A write the state refuses because the apply lost its lock fails the
// coordinator with that error itself, so apply stops as a lost lock does
// (apply.ErrLockLost), not as a broken state.
func TestLostLockFailsTheCoordinatorWithItsError(t *testing.T) {
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{})
	w := h.register("p")
	h.store.GuardWrites("a-lock-that-is-not-held")
	_, err := protocol.NewClient(h.srv.URL, w.session, nil).Heartbeat(context.Background(), w.id, protocol.HeartbeatRequest{})
	var ae *protocol.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError {
		t.Fatalf("heartbeat after the lock was lost: %v, want a 500", err)
	}
	select {
	case <-h.c.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the coordinator did not fail")
	}
	if !errors.Is(h.c.Err(), state.ErrLockLost) {
		t.Fatalf("the coordinator failed with %v, which does not wrap state.ErrLockLost", h.c.Err())
	}
}
