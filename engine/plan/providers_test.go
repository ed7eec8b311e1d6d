package plan

import (
	"fmt"
	"strings"
	"testing"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"

	// The ray provider, registered for ClusterWriteDiags.
	"github.com/wdc-dev/wdc/providers/ray"
)

func TestListProviders(t *testing.T) {
	t.Parallel()
	entries := []providers.Entry{
		{Info: providers.Info{Name: "ray", Summary: "Ray jobs"}, Status: providers.StatusPlanned},
		{Info: providers.Info{Name: "local", Source: providers.SourceBuiltIn, Capabilities: providers.Capabilities{Render: true}}, Status: providers.StatusAvailable},
		{Info: providers.Info{Name: "broken", Source: "test"}, Status: providers.StatusInvalid,
			Err: &providers.ContractError{Provider: "broken", Rule: providers.RuleName, Detail: "x"}},
	}
	cfg := &wdchcl.Config{Pools: []*wdchcl.Pool{
		{Name: "b", Provider: "local"}, {Name: "edge", Provider: providers.External}, {Name: "a", Provider: "local"},
	}}
	show := func(list []ProviderEntry) string {
		var s []string
		for _, e := range list {
			s = append(s, fmt.Sprintf("%s/%s/pseudo=%v/pools=%v/cw=%v", e.Info.Name, e.Status, e.Pseudo, e.Pools, e.ClusterWritesEnabled))
		}
		return strings.Join(s, " ")
	}
	got := show(ListProviders(entries, cfg))
	want := "broken/invalid/pseudo=false/pools=[]/cw=false external/available/pseudo=true/pools=[edge]/cw=false " +
		"local/available/pseudo=false/pools=[b a]/cw=false ray/planned/pseudo=false/pools=[]/cw=false"
	if got != want {
		t.Errorf("ListProviders =\n  %s\nwant\n  %s", got, want)
	}
	got = show(ListProviders(entries, nil))
	want = "broken/invalid/pseudo=false/pools=[]/cw=false external/available/pseudo=true/pools=[]/cw=false " +
		"local/available/pseudo=false/pools=[]/cw=false ray/planned/pseudo=false/pools=[]/cw=false"
	if got != want {
		t.Errorf("ListProviders without a configuration =\n  %s\nwant\n  %s", got, want)
	}
	list := ListProviders(entries, nil)
	if list[0].Err == nil || list[0].Err.Rule != providers.RuleName {
		t.Errorf("the contract error is lost: %+v", list[0])
	}
	if list[1].Info != providers.ExternalInfo {
		t.Errorf("external = %+v, want providers.ExternalInfo", list[1].Info)
	}
}

// Ray pools: apply refuses them without allow_writes, naming Ray jobs and
// pointing at the ray block; their settings reach the launch preview
// (apply.TestRayPoolSettings: and apply's launches and reclaim).
func TestRayPoolWiring(t *testing.T) {
	t.Parallel()
	closed := &ray.Settings{Address: "http://h:8265", WdcPath: "/wdc"}
	closed.Range.Start.Line = 7
	open := &ray.Settings{Address: "http://h:8265", WdcPath: "/wdc", AllowWrites: true}
	cfg := &wdchcl.Config{Pools: []*wdchcl.Pool{{Name: "closed", Provider: "ray", Settings: closed}, {Name: "open", Provider: "ray", Settings: open}}}
	if !AllowsClusterWrites(cfg.Pools[1]) || AllowsClusterWrites(cfg.Pools[0]) {
		t.Error("AllowsClusterWrites does not follow the ray block's allow_writes")
	}
	diags := ClusterWriteDiags(cfg)
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `Pool "closed" would create Ray jobs`) || diags[0].Subject == nil || diags[0].Subject.Start.Line != 7 {
		t.Errorf("ClusterWriteDiags = %v", diags)
	}
	if req := LaunchRequestFor(cfg.Pools[0], "", 1); req.Settings != wdchcl.ProviderSettings(closed) {
		t.Errorf("LaunchRequestFor: Settings %v", req.Settings)
	}
}
