package engine

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// BenchmarkClaim measures coordinator claims per second — one grant and
// the acceptance of its (successful) result, each its own state
// transaction — next to the raw-SQL claim loop of docs/sqlite.md
// (state.RawClaimForBenchmark: BEGIN IMMEDIATE; pick; update; bump the
// counter; insert the lease; COMMIT) on a second, fresh state file, in the
// same run. Both use the store's settings (WAL, synchronous=FULL). The
// "api" case calls the coordinator's Go methods; "http" goes through the
// handler with protocol.Client over loopback. Metrics: coord_claims/s,
// raw_claims/s and their ratio coord/raw (compare ratios, not absolute
// numbers: docs/sqlite.md). ns/op covers the coordinator loop only.
func BenchmarkClaim(b *testing.B) {
	for _, via := range []string{"api", "http"} {
		b.Run(via, func(b *testing.B) {
			n := b.N
			ctx := context.Background()
			pools := []PoolRuntime{{Name: "p", Capacity: 1, HeartbeatInterval: time.Hour, TTL: 10 * time.Hour}}
			tasks := make([]TaskRuntime, n)
			for i := range tasks {
				tasks[i] = rtTask(fmt.Sprintf("b%07d", i))
			}
			dir := b.TempDir()
			s := benchStore(b, filepath.Join(dir, "coord.db"), pools, tasks)
			c, err := NewCoordinator(CoordinatorOptions{Store: s, Pools: pools, Tasks: tasks})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(c.Handler())
			defer srv.Close()
			cl, reg := registerOn(b, c, srv.URL, "p", protocol.RegisterRequest{Host: "bench"})
			w := c.workers[reg.WorkerID]
			zero := 0

			b.ResetTimer()
			start := time.Now()
			for i := range n {
				var a protocol.Assignment
				req := protocol.ResultRequest{WorkerID: w.id, ExitCode: &zero, IdempotencyKey: fmt.Sprintf("k%d", i)}
				if via == "api" {
					resp, err := c.claim(ctx, w, 1, 0)
					if err != nil || len(resp.Assignments) != 1 {
						b.Fatalf("claim %d: %+v, %v", i, resp, err)
					}
					a = resp.Assignments[0]
					req.Task, req.Attempt = a.Task, a.Attempt
					if r, err := c.result(ctx, w, a.FencingToken, req, nil); err != nil || r.Decision != "accepted" {
						b.Fatalf("result %d: %+v, %v", i, r, err)
					}
				} else {
					resp, err := cl.Claim(ctx, w.id, protocol.ClaimRequest{Max: 1})
					if err != nil || len(resp.Assignments) != 1 {
						b.Fatalf("claim %d: %+v, %v", i, resp, err)
					}
					a = resp.Assignments[0]
					req.Task, req.Attempt = a.Task, a.Attempt
					if r, err := cl.PostResult(ctx, a.FencingToken, req); err != nil || r.Decision != "accepted" {
						b.Fatalf("result %d: %+v, %v", i, r, err)
					}
				}
			}
			coord := time.Since(start)
			b.StopTimer()
			if !c.Finished() {
				b.Fatalf("not finished: %+v", c.Progress())
			}

			raw := benchStore(b, filepath.Join(dir, "raw.db"), pools, tasks)
			if _, err := raw.RegisterWorker(ctx, state.Worker{ID: "w", Pool: "p", Capacity: 1, HeartbeatInterval: time.Hour, TTL: 10 * time.Hour}, time.Now()); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			for i := range n {
				if _, ok, err := raw.RawClaimForBenchmark(ctx, "w", time.Hour, time.Now()); err != nil || !ok {
					b.Fatalf("raw claim %d: %v %v", i, ok, err)
				}
			}
			rawDur := time.Since(start)

			coordRate := float64(n) / coord.Seconds()
			rawRate := float64(n) / rawDur.Seconds()
			b.ReportMetric(coordRate, "coord_claims/s")
			b.ReportMetric(rawRate, "raw_claims/s")
			b.ReportMetric(coordRate/rawRate, "coord/raw")
		})
	}
}

func benchStore(b *testing.B, path string, pools []PoolRuntime, tasks []TaskRuntime) *state.Store {
	b.Helper()
	s, err := state.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	upsertAll(b, s, pools, tasks, time.Now())
	return s
}

// BenchmarkMetricsHotPath measures what the metrics add to one claim and
// its result, alone: the granted counter, the claim observation, and the
// result's counter and observation (docs/PERFORMANCE.md compares it with
// BenchmarkClaim's time per claim).
func BenchmarkMetricsHotPath(b *testing.B) {
	s, err := state.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	pools := []PoolRuntime{{Name: "p"}}
	upsertAll(b, s, pools, nil, time.Now())
	c, err := NewCoordinator(CoordinatorOptions{Store: s, Pools: pools})
	if err != nil {
		b.Fatal(err)
	}
	pm := c.poolByNam["p"].metrics
	claimed := protocol.ClaimResponse{Assignments: []protocol.Assignment{{Task: "task.a"}}}
	accepted := protocol.ResultResponse{Decision: protocol.DecisionAccepted}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		pm.leasesGranted.Inc()
		c.observeClaim(time.Since(start), 0, claimed, nil)
		c.countResult(pm, start, accepted, nil)
	}
}
