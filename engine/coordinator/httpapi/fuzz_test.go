package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// FuzzHandler posts arbitrary bodies to arbitrary paths, with no, a valid
// or a wrong bearer token and any method: the handler must never panic and
// never answer 5xx; every error answer is a protocol.Error with a code.
// "{w}" in a path stands for a registered worker's id.
func FuzzHandler(f *testing.F) {
	s, err := state.Open(context.Background(), filepath.Join(f.TempDir(), "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	pools := []coordinator.PoolRuntime{rtPool("p", 2, "arch=amd64")}
	tasks := []coordinator.TaskRuntime{rtTask("a"), rtTask("b", "task.a"), withRetry(rtTask("c"), 3, 3, time.Millisecond)}
	upsertAll(f, s, pools, tasks, time.Now())
	blobs, err := artifact.Open(filepath.Join(f.TempDir(), "artifacts"), 1<<16)
	if err != nil {
		f.Fatal(err)
	}
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, MaxClaimWait: time.Millisecond, Artifacts: blobs})
	if err != nil {
		f.Fatal(err)
	}
	h := New(c)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, authed(httptest.NewRequest("POST", "/v1/workers", strings.NewReader(`{"host":"h","pid":1}`)), issueLaunch(f, c, "p")))
	var reg protocol.RegisterResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil || reg.WorkerID == "" {
		f.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	// The worker routes take the session; registration takes a fresh
	// launch credential each time (auth 3), or a used one (auth 1).
	tok := reg.SessionToken
	used := issueLaunch(f, c, "p")
	h.ServeHTTP(httptest.NewRecorder(), authed(httptest.NewRequest("POST", "/v1/workers", strings.NewReader(`{}`)), used))
	ops := c.OperatorCredential()

	seeds := []struct {
		method, path, body string
		auth               uint8
	}{
		{"POST", "/v1/workers", `{"host":"h","pid":2,"version":"v"}`, 1},
		{"POST", "/v1/workers/{w}/heartbeat", `{"leases":[1,2,3]}`, 1},
		{"POST", "/v1/workers/{w}/claim", `{"max":2,"wait_ms":1}`, 1},
		{"POST", "/v1/leases/1/result", `{"worker_id":"{w}","task":"task.a","attempt":1,"idempotency_key":"k1","exit_code":0}`, 1},
		{"POST", "/v1/leases/1/result", `{"worker_id":"{w}","task":"task.a","attempt":1,"idempotency_key":"k2","failure_class":"failure","started_at":"2025-01-01T00:00:00Z"}`, 1},
		{"POST", "/v1/leases/2/result", `{"worker_id":"{w}","task":"task.c","attempt":1,"idempotency_key":"k3","failure_class":"refused"}`, 1},
		{"GET", "/v1/workers/{w}/claim", ``, 1},
		{"POST", "/v1/workers", `{}`, 0},
		{"POST", "/v1/workers", `{}`, 2},
		{"POST", "/v1/leases/-7/result", `{"x":1}`, 1},
		{"POST", "/v1/workers/{w}/claim", `{"max":1e99}`, 1},
		{"DELETE", "/v1/../v1/workers", `[`, 1},
		{"POST", "/v1/workers", `{"request_id":"r1"}`, 3},
		{"POST", "/v1/workers", `null`, 3},
		{"POST", "/v1/operator/join-tokens", `{"pool":"p","ttl_ms":60000,"labels":{"arch":"amd64"}}`, 4},
		{"POST", "/v1/operator/join-tokens/jt-x/revoke", `{}`, 4},
		{"POST", "/v1/operator/lease", `{"task":"task.a"}`, 4},
		{"POST", "/v1/operator/sweep", `{}`, 4},
		{"POST", "/v1/operator/sweep", `{}`, 1},
		{"POST", "/v1/operator/gc", `{"dry_run":true}`, 4},
		{"POST", "/v1/operator/status", `{}`, 4},
		{"POST", "/v1/operator/status", `{}`, 1},
		{"POST", "/v1/operator/logs", `{"task":"task.a","stream":"stdout","offset":0,"wait_ms":5}`, 4},
		{"POST", "/v1/operator/logs", `{"task":"task.a","attempt":-1,"stream":"x","offset":-3}`, 4},
		{"POST", "/v1/leases/1/log", `{"worker_id":"{w}","stream":"stdout","offset":0,"data":"aGVsbG8="}`, 1},
		{"POST", "/v1/leases/1/log", `{"worker_id":"{w}","stream":"stderr","offset":99,"data":"!!"}`, 1},
		{"POST", "/v1/workers/{w}/claim", `{"max":1}`, 4},
		{"POST", "/v1/workers/w-other/heartbeat", `{"leases":[]}`, 1},
		{"PUT", "/v1/artifacts/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", `hello`, 1},
		{"PUT", "/v1/artifacts/xyz", `hello`, 1},
		{"POST", "/v1/leases/1/result", `{"worker_id":"{w}","idempotency_key":"k9","exit_code":0,"artifacts":[{"kind":"log","name":"stdout","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5}]}`, 1},
		{"POST", "/v1/leases/1/result", `{"worker_id":"{w}","idempotency_key":"k8","artifacts":[{"kind":"x","name":"","sha256":"zz","size":-1}]}`, 1},
		{"GET", "/metrics", ``, 0},
		{"GET", "/metrics", ``, 4},
		{"GET", "/metrics?name[]=wdc_tasks", ``, 5},
		{"HEAD", "/metrics", ``, 1},
		{"POST", "/metrics", `{}`, 4},
		{"GET", "/metrics/", ``, 4},
		{"GET", "/metrics/../metrics", ``, 4},
		{"POST", "/v1/workers/w-other/leave", `{}`, 1},
		{"POST", "/v1/workers/{w}/leave", `{"reason":"\u0000"}`, 1},
		{"POST", "/v1/workers/{w}/leave", `[]`, 1},
		// Last: the worker leaves, and its session is refused afterwards.
		{"POST", "/v1/workers/{w}/leave", `{"reason":"done"}`, 1},
	}
	for _, sd := range seeds {
		f.Add(sd.method, sd.path, []byte(sd.body), sd.auth)
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte, auth uint8) {
		path = strings.ReplaceAll(path, "{w}", reg.WorkerID)
		body = bytes.ReplaceAll(body, []byte("{w}"), []byte(reg.WorkerID))
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://coordinator"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		switch auth % 6 {
		case 1:
			authed(req, tok)
		case 2:
			authed(req, tok+"x")
		case 3:
			authed(req, used)
		case 4:
			authed(req, ops)
		case 5:
			req.Header.Set(protocol.VersionHeader, "1")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %q %q: %d %s", method, path, body, rec.Code, rec.Body)
		case rec.Code >= 300 && rec.Code < 400:
			t.Fatalf("%s %q: redirect %d; unclean paths get a 400", method, path, rec.Code)
		case rec.Code != http.StatusOK:
			var e protocol.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
				t.Fatalf("%s %q: %d with body %q, not a protocol.Error", method, path, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzDecoders feeds arbitrary bytes to the request decoders: they never
// panic, and what one accepts survives a round trip through JSON.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		`{"host":"h","pid":1,"version":"v"}`, `{"leases":[1,2]}`, `{"max":1,"wait_ms":10}`,
		`{"worker_id":"w","task":"task.a","attempt":1,"idempotency_key":"k","exit_code":3,"signal":"SIGKILL","failure_class":"failure"}`,
		`{}`, `null`, `{"pid":-1}`, `{"max":0}`, `{"leases":[0]}`, `{"started_at":"bad"}`, `{} x`, "\xff",
		`{"pool":"p","ttl_ms":1000,"labels":{"a":"b"}}`, `{"pool":"","ttl_ms":-1}`, `{"request_id":"r"}`,
		`{"worker_id":"w","stream":"stdout","offset":3,"data":"aGk="}`, `{"worker_id":"w","stream":"stdout","data":"***"}`,
		`{"reason":"the script ended"}`, `{"reason":"a\u001bb"}`, `{"reason":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		roundTrip(t, body, DecodeRegisterRequest)
		roundTrip(t, body, DecodeHeartbeatRequest)
		roundTrip(t, body, DecodeClaimRequest)
		roundTrip(t, body, DecodeResultRequest)
		roundTrip(t, body, DecodeJoinTokenRequest)
		roundTrip(t, body, DecodeLogChunkRequest)
		roundTrip(t, body, DecodeLeaveRequest)
	})
}

func roundTrip[T any](t *testing.T, body []byte, decode func([]byte) (T, error)) {
	v, err := decode(body)
	if err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted %q but cannot marshal it: %v", body, err)
	}
	if _, err := decode(b); err != nil {
		t.Fatalf("accepted %q but not its re-encoding %s: %v", body, b, err)
	}
}
