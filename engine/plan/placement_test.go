package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wdc-dev/wdc/engine/placement"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// TestPoolIndexSameAsEveryPool checks the pool index against checking
// every pool with Satisfies, on random labels and placements.
func TestPoolIndexSameAsEveryPool(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	labels := func(n int) map[string]string {
		m := map[string]string{}
		for range r.IntN(n + 1) {
			m[fmt.Sprint("k", r.IntN(4))] = fmt.Sprint("v", r.IntN(3))
		}
		return m
	}
	for round := range 200 {
		var pools []*wdchcl.Pool
		for i := range r.IntN(12) {
			pools = append(pools, pool(fmt.Sprint("p", i), 1, 0, 1, labels(4)))
		}
		ix := newPoolIndex(pools)
		for range 20 {
			req := labels(3)
			var want []*wdchcl.Pool
			for _, p := range pools {
				if placement.Satisfies(p.Labels, req) {
					want = append(want, p)
				}
			}
			got := ix.candidates(req)
			if !slices.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("round %d: placement %v: candidates %v, want %v", round, req, names(got), names(want))
			}
			if ix.satisfiable(req) != (len(want) > 0) {
				t.Fatalf("round %d: placement %v: satisfiable %v, want %v", round, req, !(len(want) > 0), len(want) > 0)
			}
		}
	}
}

func names(pools []*wdchcl.Pool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out
}
