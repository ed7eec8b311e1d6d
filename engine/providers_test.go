package engine

import (
	"fmt"
	"strings"
	"testing"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
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
		{Name: "b", Provider: "local"}, {Name: "edge", Provider: ProviderExternal}, {Name: "a", Provider: "local"},
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
	if list[1].Info != ExternalProviderInfo {
		t.Errorf("external = %+v, want ExternalProviderInfo", list[1].Info)
	}
}
