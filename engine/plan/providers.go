package plan

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// ProviderEntry is one provider of `wdc providers`: a registry entry, or
// the external pseudo-provider, with what the configuration does with it.
type ProviderEntry struct {
	providers.Entry
	// Pseudo is true for "external" (providers.ExternalInfo): pools name
	// it, but it is not in the registry.
	Pseudo bool
	// Pools names the pools of the configuration whose provider it is, in
	// declaration order; empty without a configuration.
	Pools []string
	// ClusterWritesEnabled is true when a pool of the configuration that
	// uses the provider enables cluster writes (allow_writes = true in its
	// kubernetes or ray block; writes are off unless a pool opts in,
	// docs/design.md §3 invariant 10).
	ClusterWritesEnabled bool
}

// ListProviders returns the providers of a registry listing
// (providers.List) and the external pseudo-provider, sorted by name, each
// with the pools of cfg that use it. cfg may be nil (no configuration, or
// one that does not load): then no entry has pools.
func ListProviders(entries []providers.Entry, cfg *wdchcl.Config) []ProviderEntry {
	out := make([]ProviderEntry, 0, len(entries)+1)
	hasExternal := false
	for _, e := range entries {
		out = append(out, ProviderEntry{Entry: e})
		hasExternal = hasExternal || e.Info.Name == providers.External
	}
	if !hasExternal {
		out = append(out, ProviderEntry{Entry: providers.Entry{Info: providers.ExternalInfo, Status: providers.StatusAvailable}, Pseudo: true})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	if cfg == nil {
		return out
	}
	for i := range out {
		for _, p := range cfg.Pools {
			if p.Provider == out[i].Info.Name {
				out[i].Pools = append(out[i].Pools, p.Name)
				out[i].ClusterWritesEnabled = out[i].ClusterWritesEnabled || AllowsClusterWrites(p)
			}
		}
	}
	return out
}

// AllowsClusterWrites reports whether pool p lets apply write to its
// cluster: its settings allow it (allow_writes = true in its kubernetes or
// ray block).
func AllowsClusterWrites(p *wdchcl.Pool) bool {
	return p.Settings != nil && p.Settings.WritesAllowed()
}

// ClusterWriteDiags returns an error diagnostic, on the pool's provider
// block, for every pool of cfg whose provider writes to a shared cluster
// (providers.Capabilities.ClusterWrites) and that does not allow it
// (AllowsClusterWrites). Apply refuses on them before it opens the state
// or reaches a cluster (docs/design.md §3 invariant 10).
func ClusterWriteDiags(cfg *wdchcl.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	writers := map[string]providers.Info{} // the providers that write to a cluster
	for _, e := range providers.List() {
		if e.Status == providers.StatusAvailable && e.Info.Capabilities.ClusterWrites {
			writers[e.Info.Name] = e.Info
		}
	}
	for _, p := range cfg.Pools {
		info, writes := writers[p.Provider]
		if !writes || AllowsClusterWrites(p) {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cluster writes not allowed",
			Detail:  fmt.Sprintf("Pool %q would create %s, and apply writes to a cluster only when the pool allows it: add allow_writes = true to its %s block (wdc plan shows what it would create).", p.Name, info.Creates, p.Provider),
			Subject: poolSubject(p)})
	}
	return diags
}
