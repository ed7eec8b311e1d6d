package coordinator_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
	"github.com/wdc-dev/wdc/state/statetest"
)

// BenchmarkClaim measures coordinator claims per second — one grant and
// the acceptance of its (successful) result, through the state's group
// commit — with 1 and 8 concurrent claimers (one worker each), next to the
// raw-SQL claim loop of docs/sqlite.md (statetest.RawClaimer: BEGIN
// IMMEDIATE; pick; update; bump the counter; insert the lease; COMMIT; one
// transaction per claim) run by the same number of goroutines on a second,
// fresh state file, in the same run. Both use the store's settings (WAL,
// synchronous=FULL). The "api" case calls the coordinator's Go methods;
// "http" goes through the handler with protocol.Client over loopback.
// Metrics: coord_claims/s, raw_claims/s and their ratio coord/raw (compare
// ratios, not absolute numbers: docs/sqlite.md); writes/group, the writes
// (claims and results) one commit carried on average, and stmts/claim,
// the statements run per claim and its accept, BEGIN and COMMIT included.
// ns/op covers the coordinator loop only.
func BenchmarkClaim(b *testing.B) {
	for _, via := range []string{"api", "http"} {
		for _, claimers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/claimers=%d", via, claimers), func(b *testing.B) {
				benchmarkClaim(b, via, claimers)
			})
		}
	}
}

func benchmarkClaim(b *testing.B, via string, claimers int) {
	n := b.N
	ctx := context.Background()
	pools := []coordinator.PoolRuntime{{Name: "p", Capacity: 1, HeartbeatInterval: time.Hour, TTL: 10 * time.Hour}}
	tasks := make([]coordinator.TaskRuntime, n)
	for i := range tasks {
		tasks[i] = rtTask(fmt.Sprintf("b%07d", i))
	}
	dir := b.TempDir()
	s := benchStore(b, filepath.Join(dir, "coord.db"), pools, tasks)
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	defer srv.Close()
	type claimer struct {
		cl *protocol.Client
		s  coordinator.Session
	}
	cs := make([]claimer, claimers)
	for i := range cs {
		cl, reg := registerOn(b, c, srv.URL, "p", protocol.RegisterRequest{Host: "bench"})
		cs[i] = claimer{cl, session(b, c, reg)}
	}
	var next atomic.Int64 // claims left to make, counted down
	next.Store(int64(n))
	errs := make(chan error, claimers)
	// Statements and write groups of the coordinator loop: each group
	// begins with BEGIN IMMEDIATE (state.TraceStatements).
	var groups, stmts atomic.Int64
	stopTrace := state.TraceStatements(func(q string, _ time.Duration) {
		stmts.Add(1)
		if q == "BEGIN IMMEDIATE" {
			groups.Add(1)
		}
	})
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, cm := range cs {
		wg.Go(func() {
			zero := 0
			for i := next.Add(-1); i >= 0; i = next.Add(-1) {
				req := protocol.ResultRequest{WorkerID: cm.s.WorkerID(), ExitCode: &zero, IdempotencyKey: fmt.Sprintf("k%d", i)}
				var a protocol.Assignment
				if via == "api" {
					resp, err := c.Claim(ctx, cm.s, 1, time.Second)
					if err != nil || len(resp.Assignments) != 1 {
						errs <- fmt.Errorf("claim %d: %+v, %v", i, resp, err)
						return
					}
					a = resp.Assignments[0]
					req.Task, req.Attempt = a.Task, a.Attempt
					if r, err := c.Result(ctx, cm.s, a.FencingToken, req, nil); err != nil || r.Decision != "accepted" {
						errs <- fmt.Errorf("result %d: %+v, %v", i, r, err)
						return
					}
					continue
				}
				resp, err := cm.cl.Claim(ctx, cm.s.WorkerID(), protocol.ClaimRequest{Max: 1, WaitMS: 1000})
				if err != nil || len(resp.Assignments) != 1 {
					errs <- fmt.Errorf("claim %d: %+v, %v", i, resp, err)
					return
				}
				a = resp.Assignments[0]
				req.Task, req.Attempt = a.Task, a.Attempt
				if r, err := cm.cl.PostResult(ctx, a.FencingToken, req); err != nil || r.Decision != "accepted" {
					errs <- fmt.Errorf("result %d: %+v, %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	coord := time.Since(start)
	b.StopTimer()
	stopTrace()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if !c.Finished() {
		b.Fatalf("not finished: %+v", c.Progress())
	}

	raw := benchStore(b, filepath.Join(dir, "raw.db"), pools, tasks)
	if _, err := raw.RegisterWorker(ctx, state.Worker{ID: "w", Pool: "p", Capacity: 1, HeartbeatInterval: time.Hour, TTL: 10 * time.Hour}, time.Now()); err != nil {
		b.Fatal(err)
	}
	rc := statetest.NewRawClaimer(b, raw.Path())
	next.Store(int64(n))
	start = time.Now()
	for range claimers {
		wg.Go(func() {
			for i := next.Add(-1); i >= 0; i = next.Add(-1) {
				if _, ok, err := rc.Claim(ctx, "w", time.Hour, time.Now()); err != nil || !ok {
					b.Errorf("raw claim %d: %v %v", i, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	rawDur := time.Since(start)

	coordRate := float64(n) / coord.Seconds()
	rawRate := float64(n) / rawDur.Seconds()
	b.ReportMetric(coordRate, "coord_claims/s")
	b.ReportMetric(rawRate, "raw_claims/s")
	b.ReportMetric(coordRate/rawRate, "coord/raw")
	b.ReportMetric(float64(2*n)/float64(max(1, groups.Load())), "writes/group")
	b.ReportMetric(float64(stmts.Load())/float64(n), "stmts/claim")
}

func benchStore(b *testing.B, path string, pools []coordinator.PoolRuntime, tasks []coordinator.TaskRuntime) *state.Store {
	b.Helper()
	s, err := state.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	upsertAll(b, s, pools, tasks, time.Now())
	return s
}
