package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2/hclparse"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// largeConfig is the configuration of bench/plan_large.sh's plan: pools
// pool blocks p0… (provider local, max 2, labels { slot = "i" }) and tasks
// task blocks t0…, task i placed on slot i % pools.
func largeConfig(pools, tasks int) string {
	var b strings.Builder
	for i := range pools {
		fmt.Fprintf(&b, "pool \"p%d\" {\n  provider = \"local\"\n  max      = 2\n  labels   = { slot = \"%d\" }\n}\n\n", i, i)
	}
	for i := range tasks {
		fmt.Fprintf(&b, "task \"t%d\" {\n  command   = [\"true\", \"%d\"]\n  placement = { slot = \"%d\" }\n}\n\n", i, i, i%pools)
	}
	return b.String()
}

// BenchmarkPlanLarge measures what `wdc plan` does with the configuration
// of bench/plan_large.sh (10,000 task blocks placed on 100 pools, empty
// state) before it renders: hcl.Load of the directory, then New. As a
// reference in the same run it parses the same file with hclparse alone
// (what any loader of it must do at least) and reports parse_ms/op and
// the ratio plan/parse; compare that ratio, not ns/op, across machines.
func BenchmarkPlanLarge(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "main"+wdchcl.FileSuffix)
	if err := os.WriteFile(path, []byte(largeConfig(100, 10000)), 0o644); err != nil {
		b.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	snap := state.EmptySnapshot()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		p, diags := New(cfg, snap, now, Options{})
		if diags.HasErrors() || len(p.Tasks) != 10000 || p.Summary().WorkersToLaunch != 200 {
			b.Fatalf("%d changes, %+v, %v", len(p.Tasks), p.Summary(), diags)
		}
	}
	plan := time.Since(start)
	b.StopTimer()

	start = time.Now()
	for range b.N {
		if _, diags := hclparse.NewParser().ParseHCL(src, path); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
	parse := time.Since(start)
	b.ReportMetric(parse.Seconds()*1000/float64(b.N), "parse_ms/op")
	b.ReportMetric(plan.Seconds()/parse.Seconds(), "plan/parse")
}
