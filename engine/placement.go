package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// Satisfies reports whether a worker with the given labels may run a task
// with the given placement: every required label is present with the
// required value. An empty placement is satisfied by any labels.
func Satisfies(labels, placement map[string]string) bool {
	for k, want := range placement {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// Unmet lists, sorted by label name, every requirement of placement that
// labels do not meet, each as a phrase such as
// `needs can = "build", has can = "test"` or `needs gpu = "a100", has no gpu label`.
// It returns nil when Satisfies(labels, placement) is true.
func Unmet(labels, placement map[string]string) []string {
	keys := make([]string, 0, len(placement))
	for k := range placement {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		want := placement[k]
		got, ok := labels[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("needs %s = %q, has no %s label", k, want, k))
		case got != want:
			out = append(out, fmt.Sprintf("needs %s = %q, has %s = %q", k, want, k, got))
		}
	}
	return out
}

// CandidatePools returns the pools, in declaration order, whose labels
// satisfy the task's placement.
func CandidatePools(cfg *wdchcl.Config, t *wdchcl.Task) []*wdchcl.Pool {
	var out []*wdchcl.Pool
	for _, p := range cfg.Pools {
		if Satisfies(p.Labels, t.Placement) {
			out = append(out, p)
		}
	}
	return out
}

// CheckPlacement returns one error diagnostic, at the task's placement
// attribute, for every task instance that no declared pool can ever run.
// The detail names every unmet label requirement of every pool, so the fix
// is obvious.
func CheckPlacement(cfg *wdchcl.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range cfg.Tasks {
		if len(CandidatePools(cfg, t)) > 0 {
			continue
		}
		var b strings.Builder
		if len(cfg.Pools) == 0 {
			b.WriteString("No pool is declared. Declare a pool whose labels satisfy the placement.")
		} else {
			fmt.Fprintf(&b, "No pool's labels satisfy the placement of %s:", t.Address())
			for _, p := range cfg.Pools {
				unmet := strings.Join(Unmet(p.Labels, t.Placement), "; ")
				if t.Sensitive.Placement || len(t.Sensitive.PlacementKeys) > 0 || p.SensitiveLabels || len(p.SensitiveLabelKeys) > 0 {
					unmet = fmt.Sprintf("%d unmet label requirements (values hidden: computed from a sensitive variable)", len(Unmet(p.Labels, t.Placement)))
				}
				fmt.Fprintf(&b, "\n  %s: %s", p.Address(), unmet)
			}
		}
		rng := t.PlacementRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Unsatisfiable placement for %s", t.Address()),
			Detail:   b.String(),
			Subject:  &rng,
		})
	}
	return diags
}

// Validate runs the engine's checks of a configuration that the hcl package
// decoded without errors: today, placement satisfiability.
func Validate(cfg *wdchcl.Config) hcl.Diagnostics {
	return CheckPlacement(cfg)
}
