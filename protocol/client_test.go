package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	method, path, auth, contentType string
	body                            map[string]any
}

func TestClientRoutes(t *testing.T) {
	t.Parallel()
	var got recorded
	answers := map[string]string{
		"/v1/workers":               `{"worker_id":"w-1","pool":"builders","labels":{"can":"build"},"capacity":2,"heartbeat_interval_ms":2000,"ttl_ms":10000}`,
		"/v1/workers/w 1/heartbeat": `{"drain":true,"cancel_leases":[7]}`,
		"/v1/workers/w 1/claim":     `{"assignments":[{"task":"task.a","attempt":1,"fencing_token":9,"def_hash":"ab","definition":{"command":["true"],"env":{},"dir":".","depends_on":[]},"work_dir":"/tmp","timeout_ms":1000,"expires_at":"2026-01-02T03:04:05Z"}]}`,
		"/v1/leases/42/result":      `{"decision":"rejected","reason":"stale_token","duplicate":true}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = recorded{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
		if err := json.NewDecoder(r.Body).Decode(&got.body); err != nil {
			t.Errorf("decoding request body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	c := NewClient(srv.URL+"/", "s3cret", srv.Client())
	ctx := context.Background()

	check := func(t *testing.T, path, bodyKey string, bodyVal any) {
		t.Helper()
		if got.method != http.MethodPost || got.path != path {
			t.Errorf("request = %s %s, want POST %s", got.method, got.path, path)
		}
		if got.auth != "Bearer s3cret" {
			t.Errorf("Authorization = %q", got.auth)
		}
		if got.contentType != "application/json" {
			t.Errorf("Content-Type = %q", got.contentType)
		}
		if b, _ := json.Marshal(got.body[bodyKey]); string(b) != mustJSON(bodyVal) {
			t.Errorf("body[%s] = %s, want %s", bodyKey, b, mustJSON(bodyVal))
		}
	}

	t.Run("register", func(t *testing.T) {
		resp, err := c.Register(ctx, RegisterRequest{Host: "h", PID: 12, Version: "v0"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "/v1/workers", "pid", 12)
		if resp.WorkerID != "w-1" || resp.Capacity != 2 || resp.TTLMS != 10000 || resp.Labels["can"] != "build" {
			t.Errorf("response = %+v", resp)
		}
	})
	t.Run("heartbeat escapes the worker id", func(t *testing.T) {
		resp, err := c.Heartbeat(ctx, "w 1", HeartbeatRequest{Leases: []int64{7, 8}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "/v1/workers/w 1/heartbeat", "leases", []int64{7, 8})
		if !resp.Drain || len(resp.CancelLeases) != 1 || resp.CancelLeases[0] != 7 {
			t.Errorf("response = %+v", resp)
		}
	})
	t.Run("claim", func(t *testing.T) {
		resp, err := c.Claim(ctx, "w 1", ClaimRequest{Max: 2, WaitMS: 10000})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "/v1/workers/w 1/claim", "wait_ms", 10000)
		if len(resp.Assignments) != 1 || resp.Assignments[0].FencingToken != 9 || !resp.Assignments[0].ExpiresAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("response = %+v", resp)
		}
	})
	t.Run("result", func(t *testing.T) {
		resp, err := c.PostResult(ctx, 42, ResultRequest{WorkerID: "w-1", IdempotencyKey: "w-1-42"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "/v1/leases/42/result", "idempotency_key", "w-1-42")
		if resp.Decision != DecisionRejected || resp.Reason != ReasonStaleToken || !resp.Duplicate {
			t.Errorf("response = %+v", resp)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		body      string
		want      APIError
		temporary bool
	}{
		{"typed 401", 401, `{"code":"unauthorized","message":"unknown pool token"}`, APIError{Status: 401, Code: "unauthorized", Message: "unknown pool token"}, false},
		{"typed 404", 404, `{"code":"not_found","message":"unknown worker w-9"}`, APIError{Status: 404, Code: "not_found", Message: "unknown worker w-9"}, false},
		{"typed 409", 409, `{"code":"conflict","message":"worker is gone"}`, APIError{Status: 409, Code: "conflict", Message: "worker is gone"}, false},
		{"plain-text 502 from a proxy", 502, "Bad Gateway\n", APIError{Status: 502, Code: "internal", Message: "Bad Gateway"}, true},
		{"503 without body", 503, "", APIError{Status: 503, Code: "internal", Message: ""}, true},
		{"429", 429, "slow down", APIError{Status: 429, Code: "bad_request", Message: "slow down"}, true},
		{"JSON without code", 400, `{"message":"x"}`, APIError{Status: 400, Code: "bad_request", Message: `{"message":"x"}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			_, err := NewClient(srv.URL, "t", nil).Heartbeat(context.Background(), "w", HeartbeatRequest{})
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v (%T), want *APIError", err, err)
			}
			if diff := cmp.Diff(tt.want, *ae); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if ae.Temporary() != tt.temporary {
				t.Errorf("Temporary() = %v, want %v", ae.Temporary(), tt.temporary)
			}
			if StatusOf(err) != tt.status {
				t.Errorf("StatusOf = %d", StatusOf(err))
			}
		})
	}
}

func TestClientNetworkErrorIsReturnedAsIs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	_, err = NewClient("http://"+addr, "t", nil).Register(context.Background(), RegisterRequest{})
	if err == nil {
		t.Fatal("want an error")
	}
	var ae *APIError
	if errors.As(err, &ae) || StatusOf(err) != 0 {
		t.Errorf("network error became an APIError: %v", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("error = %v (%T), want a *net.OpError inside", err, err)
	}
}

func TestClientLimitsResponseSize(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"worker_id":"`+strings.Repeat("x", MaxResponseBytes)+`"}`)
	}))
	defer srv.Close()
	_, err := NewClient(srv.URL, "t", nil).Register(context.Background(), RegisterRequest{})
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error = %v, want a size error", err)
	}
}

func TestClientHonoursContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := NewClient(srv.URL, "t", nil).Claim(ctx, "w", ClaimRequest{Max: 1, WaitMS: 10000})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
}
