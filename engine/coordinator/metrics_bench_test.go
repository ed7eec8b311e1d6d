package coordinator

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

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
	if err := s.UpsertPool(context.Background(), state.Pool{Name: "p", Provider: "local", Max: 4, Capacity: 1, Labels: map[string]string{}}, time.Now()); err != nil {
		b.Fatal(err)
	}
	c, err := New(Options{Store: s, Pools: pools})
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
