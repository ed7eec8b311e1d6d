package coordinator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/protocol"
)

// scrape GETs /metrics from h's server with the bearer credential auth (""
// for none) and no protocol version header, as a Prometheus scraper does.
func (h *harness) scrape(auth string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+httpapi.MetricsPath, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(body)
}

// metrics scrapes with the operator credential and returns the samples by
// series, e.g. `wdc_leases_granted_total{pool="p"}` → 2.
func (h *harness) metrics() map[string]float64 {
	h.t.Helper()
	resp, body := h.scrape(h.c.OperatorCredential())
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			h.t.Fatalf("scrape: sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// wantMetrics checks samples of a scrape.
func wantMetrics(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for series, v := range want {
		g, ok := got[series]
		switch {
		case !ok:
			t.Errorf("%s: missing from the scrape", series)
		case g != v:
			t.Errorf("%s = %v, want %v", series, g, v)
		}
	}
}

// TestMetricsCount: the lease counters move as leases are granted,
// expired, released and revoked (by WorkerLost and RevokeLeases), the
// result counters by decision and reason, the latency histograms once per
// claim and result, the supervisor decisions as apply records them, and
// the gauges follow the coordinator's memory. A second coordinator in the
// same process counts on its own.
func TestMetricsCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools := []coordinator.PoolRuntime{rtPool("p", 2)}
	tasks := []coordinator.TaskRuntime{rtTask("a"), rtTask("b"), rtTask("c"), rtTask("d")}
	h := newHarness(t, pools, tasks, harnessOpts{})
	other := newHarness(t, pools, tasks, harnessOpts{})

	wantMetrics(t, h.metrics(), map[string]float64{
		`wdc_leases_granted_total{pool="p"}`:                        0,
		`wdc_results_rejected_total{pool="p",reason="stale_token"}`: 0,
		`wdc_tasks{status="queued"}`:                                4,
		`wdc_tasks{status="running"}`:                               0,
		`wdc_pool_queued_tasks{pool="p"}`:                           4,
		`wdc_pool_unfinished_tasks{pool="p"}`:                       4,
		`wdc_workers{pool="p",status="active"}`:                     0,
		`wdc_supervisor_decisions_total{action="hold",pool="p"}`:    0,
	})

	w := h.register("p")
	first := w.claim(2) // a, b
	if len(first) != 2 {
		t.Fatalf("claim: %d assignments, want 2", len(first))
	}
	a, b := first[0], first[1]
	wantMetrics(t, h.metrics(), map[string]float64{
		`wdc_leases_granted_total{pool="p"}`:                  2,
		`wdc_tasks{status="running"}`:                         2,
		`wdc_tasks{status="queued"}`:                          2,
		`wdc_pool_queued_tasks{pool="p"}`:                     2,
		`wdc_active_leases{pool="p"}`:                         2,
		`wdc_workers{pool="p",status="active"}`:               1,
		`wdc_claim_duration_seconds_count{outcome="granted"}`: 1,
	})

	// accepted, then the same post again: a duplicate
	if r := w.post(a, "", ""); r.Decision != protocol.DecisionAccepted {
		t.Fatalf("result of a: %+v", r)
	}
	if r := w.post(a, "", ""); !r.Duplicate {
		t.Fatalf("repost of a: %+v", r)
	}

	// b's lease expires with its silent worker; its late result is
	// rejected as lease_expired
	h.clock.Advance(11 * time.Second)
	h.sweep()
	m := h.metrics()
	wantMetrics(t, m, map[string]float64{
		`wdc_leases_expired_total{pool="p"}`:   1,
		`wdc_workers{pool="p",status="stale"}`: 1,
		`wdc_active_leases{pool="p"}`:          0,
	})
	w.heartbeat()
	if r := w.post(b, "", "late-1"); r.Reason != protocol.ReasonLeaseExpired {
		t.Fatalf("late result of b: %+v", r)
	}

	// b again and c; the first lease of b is stale now, a result for b's
	// new lease from another worker is wrong_worker, an unknown token
	// unknown_lease
	h.clock.Advance(2 * time.Second)
	second := w.claim(2)
	if len(second) != 2 {
		t.Fatalf("second claim: %d assignments, want 2", len(second))
	}
	if r := w.post(b, "", "late-2"); r.Reason != protocol.ReasonStaleToken {
		t.Fatalf("stale result of b: %+v", r)
	}
	w2 := h.register("p")
	if r := w2.post(second[0], "", "thief"); r.Reason != protocol.ReasonWrongWorker {
		t.Fatalf("result of another worker's lease: %+v", r)
	}
	if r := w2.post(protocol.Assignment{FencingToken: 999}, "", "nothing"); r.Reason != protocol.ReasonUnknownLease {
		t.Fatalf("result of an unknown lease: %+v", r)
	}

	// d granted to w2, which does not report holding it: released
	d := w2.claimOne()
	h.clock.Advance(5 * time.Second)
	w2.heartbeat()
	if got := h.task(d.Task).Status; got != "queued" {
		t.Fatalf("%s after its release: %s, want queued", d.Task, got)
	}

	// w lost: its two leases revoked; b again (its third loss fails it:
	// max_lost 3), revoked when the apply ends
	if err := h.c.WorkerLost(ctx, w.id, "killed"); err != nil {
		t.Fatal(err)
	}
	if got := w2.claimOne(); got.Task != b.Task {
		t.Fatalf("claim after w was lost: %s, want %s", got.Task, b.Task)
	}
	if _, err := h.c.RevokeLeases(ctx, "apply ending"); err != nil {
		t.Fatal(err)
	}

	h.c.RecordDecision("p", supervise.Decision{Action: supervise.Launch, Count: 1})
	h.c.RecordDecision("p", supervise.Decision{Action: supervise.Hold})
	h.c.RecordDecision("p", supervise.Decision{Action: supervise.Hold})
	h.c.RecordDecision("elsewhere", supervise.Decision{Action: supervise.Drain})

	wantMetrics(t, h.metrics(), map[string]float64{
		`wdc_leases_granted_total{pool="p"}`:                              6,
		`wdc_leases_expired_total{pool="p"}`:                              1,
		`wdc_leases_released_total{pool="p"}`:                             1,
		`wdc_leases_revoked_total{pool="p"}`:                              3,
		`wdc_results_accepted_total{pool="p"}`:                            1,
		`wdc_results_duplicate_total{pool="p"}`:                           1,
		`wdc_results_rejected_total{pool="p",reason="lease_expired"}`:     1,
		`wdc_results_rejected_total{pool="p",reason="stale_token"}`:       1,
		`wdc_results_rejected_total{pool="p",reason="wrong_worker"}`:      1,
		`wdc_results_rejected_total{pool="p",reason="unknown_lease"}`:     1,
		`wdc_claim_duration_seconds_count{outcome="granted"}`:             4,
		`wdc_result_duration_seconds_count{outcome="accepted"}`:           1,
		`wdc_result_duration_seconds_count{outcome="duplicate"}`:          1,
		`wdc_result_duration_seconds_count{outcome="rejected"}`:           4,
		`wdc_supervisor_decisions_total{action="launch",pool="p"}`:        1,
		`wdc_supervisor_decisions_total{action="hold",pool="p"}`:          2,
		`wdc_supervisor_decisions_total{action="drain",pool="p"}`:         0,
		`wdc_supervisor_decisions_total{action="drain",pool="elsewhere"}`: 1,
		`wdc_tasks{status="succeeded"}`:                                   1,
		`wdc_tasks{status="queued"}`:                                      2,
		`wdc_tasks{status="failed"}`:                                      1,
		`wdc_tasks{status="running"}`:                                     0,
		`wdc_workers{pool="p",status="gone"}`:                             2,
		`wdc_workers{pool="p",status="active"}`:                           0,
		`wdc_active_leases{pool="p"}`:                                     0,
	})
	if m := h.metrics(); m[`go_goroutines`] == 0 || m[`process_resident_memory_bytes`] == 0 {
		t.Errorf("the Go runtime and process collectors are missing: go_goroutines %v, process_resident_memory_bytes %v",
			m[`go_goroutines`], m[`process_resident_memory_bytes`])
	}

	// the other coordinator of this process saw none of it
	wantMetrics(t, other.metrics(), map[string]float64{
		`wdc_leases_granted_total{pool="p"}`:   0,
		`wdc_results_accepted_total{pool="p"}`: 0,
		`wdc_tasks{status="queued"}`:           4,
	})
}

// TestMetricsEmptyClaimWaitNotCounted: a claim that long-polls and comes
// back empty is observed as "empty", without the time it waited.
func TestMetricsEmptyClaimWaitNotCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a")}, harnessOpts{maxClaimWait: 300 * time.Millisecond})
	w := h.register("p")
	w.claimOne()
	resp, err := w.cl.Claim(context.Background(), w.id, protocol.ClaimRequest{Max: 1, WaitMS: 300})
	if err != nil || len(resp.Assignments) != 0 {
		t.Fatalf("claim with nothing to grant: %+v, %v", resp, err)
	}
	m := h.metrics()
	wantMetrics(t, m, map[string]float64{
		`wdc_claim_duration_seconds_count{outcome="empty"}`:   1,
		`wdc_claim_duration_seconds_count{outcome="granted"}`: 1,
	})
	if sum := m[`wdc_claim_duration_seconds_sum{outcome="empty"}`]; sum >= 0.25 {
		t.Errorf("the empty claim was observed at %vs: its 300ms wait was counted", sum)
	}
}

// TestMetricsAuth: /metrics takes no protocol version header; on a
// loopback listener (MetricsOpen) it is open, elsewhere it needs the
// operator credential and answers a typed 401 without it. Only GET (and
// HEAD) is served, and the exemption from the version header is for
// /metrics alone.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	pools := []coordinator.PoolRuntime{rtPool("p", 1)}
	tasks := []coordinator.TaskRuntime{rtTask("a")}
	closed := newHarness(t, pools, tasks, harnessOpts{})
	open := newHarness(t, pools, tasks, harnessOpts{metricsOpen: true})
	session := closed.register("p").session
	cases := []struct {
		name           string
		h              *harness
		method, path   string
		auth           string
		status         int
		code, reason   string
		allow, content string
	}{
		{name: "open, no credential", h: open, method: "GET", path: httpapi.MetricsPath, status: 200, content: "text/plain"},
		{name: "open, HEAD", h: open, method: "HEAD", path: httpapi.MetricsPath, status: 200},
		{name: "closed, operator credential", h: closed, method: "GET", path: httpapi.MetricsPath, auth: closed.c.OperatorCredential(), status: 200, content: "text/plain"},
		{name: "closed, no credential", h: closed, method: "GET", path: httpapi.MetricsPath, status: 401, code: "unauthorized", reason: protocol.ReasonMissingCredential},
		{name: "closed, unknown credential", h: closed, method: "GET", path: httpapi.MetricsPath, auth: "wdco_nope", status: 401, code: "unauthorized", reason: protocol.ReasonUnknownCredential},
		{name: "closed, another apply's operator credential", h: closed, method: "GET", path: httpapi.MetricsPath, auth: open.c.OperatorCredential(), status: 401, code: "unauthorized", reason: protocol.ReasonUnknownCredential},
		{name: "closed, session token", h: closed, method: "GET", path: httpapi.MetricsPath, auth: session, status: 401, code: "unauthorized", reason: protocol.ReasonWrongCredential},
		{name: "POST", h: open, method: "POST", path: httpapi.MetricsPath, status: 405, code: "bad_request", allow: "GET, HEAD"},
		{name: "trailing slash", h: open, method: "GET", path: httpapi.MetricsPath + "/", status: 400, code: "bad_request"},
		{name: "protocol route still needs the version", h: open, method: "POST", path: "/v1/operator/sweep", auth: open.c.OperatorCredential(), status: 400, code: protocol.CodeUnsupportedVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.h.srv.URL+tc.path, strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", "Bearer "+tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.content != "" {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.content) {
					t.Errorf("Content-Type %q, want %s", ct, tc.content)
				}
				if !strings.Contains(string(body), "# TYPE wdc_leases_granted_total counter") {
					t.Errorf("the scrape lacks wdc_leases_granted_total:\n%s", body)
				}
			}
			if tc.allow != "" && resp.Header.Get("Allow") != tc.allow {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), tc.allow)
			}
			if tc.code == "" {
				return
			}
			var e protocol.Error
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not a protocol.Error: %s", body)
			}
			if e.Code != tc.code || e.Reason != tc.reason {
				t.Errorf("code %q reason %q, want %q %q (%s)", e.Code, e.Reason, tc.code, tc.reason, e.Message)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
		})
	}
}
