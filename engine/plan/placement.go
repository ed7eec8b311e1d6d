package plan

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/placement"
	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// poolIndex finds the pools whose labels satisfy a placement without
// checking every pool: a plan asks it once per task, and thousands of
// tasks each checked against each of hundreds of pools cost more than the
// rest of the plan.
type poolIndex struct {
	pools []*wdchcl.Pool
	// byLabel maps a label name and value to the positions in pools, in
	// declaration order, of the pools that have that label.
	byLabel map[string]map[string][]int
}

func newPoolIndex(pools []*wdchcl.Pool) *poolIndex {
	ix := &poolIndex{pools: pools, byLabel: map[string]map[string][]int{}}
	for i, p := range pools {
		for k, v := range p.Labels {
			byValue := ix.byLabel[k]
			if byValue == nil {
				byValue = map[string][]int{}
				ix.byLabel[k] = byValue
			}
			byValue[v] = append(byValue[v], i)
		}
	}
	return ix
}

// candidates returns the pools, in declaration order, whose labels satisfy
// placement (nil when none does).
func (ix *poolIndex) candidates(want map[string]string) []*wdchcl.Pool {
	if len(want) == 0 {
		if len(ix.pools) == 0 {
			return nil
		}
		return append([]*wdchcl.Pool(nil), ix.pools...)
	}
	var out []*wdchcl.Pool
	for _, i := range ix.rarest(want) {
		if p := ix.pools[i]; len(want) == 1 || placement.Satisfies(p.Labels, want) {
			out = append(out, p)
		}
	}
	return out
}

// satisfiable reports whether any pool's labels satisfy placement.
func (ix *poolIndex) satisfiable(want map[string]string) bool {
	if len(want) == 0 {
		return len(ix.pools) > 0
	}
	for _, i := range ix.rarest(want) {
		if len(want) == 1 || placement.Satisfies(ix.pools[i].Labels, want) {
			return true
		}
	}
	return false
}

// rarest returns the positions of the pools that have the label, of the
// non-empty placement's requirements, that the fewest pools have: only
// they can satisfy it. It is nil when no pool meets some requirement.
func (ix *poolIndex) rarest(want map[string]string) []int {
	var fewest []int
	first := true
	for k, v := range want {
		have := ix.byLabel[k][v]
		if len(have) == 0 {
			return nil
		}
		if first || len(have) < len(fewest) {
			fewest, first = have, false
		}
	}
	return fewest
}

// CheckPlacement returns an error diagnostic, at the task's placement
// attribute, for every task that no declared pool can ever run. The detail
// names every unmet label requirement of every pool, so the fix is obvious.
// The instances of a counted task that fail the same way share one
// diagnostic naming them, rather than repeating it per instance.
func CheckPlacement(cfg *wdchcl.Config) hcl.Diagnostics {
	return checkPlacement(cfg, newPoolIndex(cfg.Pools))
}

// checkPlacement is CheckPlacement with the index of cfg's pools.
func checkPlacement(cfg *wdchcl.Config, ix *poolIndex) hcl.Diagnostics {
	type group struct {
		task    *wdchcl.Task // the first instance
		indices []int
		unmet   string
	}
	var groups []*group
	byKey := map[string]*group{}
	total := map[string]int{}
	for _, t := range cfg.Tasks {
		total[t.Name]++
		if ix.satisfiable(t.Placement) {
			continue
		}
		var b strings.Builder
		for _, p := range cfg.Pools {
			unmet := strings.Join(placement.Unmet(p.Labels, t.Placement), "; ")
			if t.Sensitive.Placement || len(t.Sensitive.PlacementKeys) > 0 || p.SensitiveLabels || len(p.SensitiveLabelKeys) > 0 {
				unmet = fmt.Sprintf("%d unmet label requirements (values hidden: computed from a sensitive variable)", len(placement.Unmet(p.Labels, t.Placement)))
			}
			fmt.Fprintf(&b, "\n  %s: %s", p.Address(), unmet)
		}
		key := t.Name + "\x00" + b.String()
		g := byKey[key]
		if g == nil || t.Index < 0 {
			g = &group{task: t, unmet: b.String()}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.indices = append(g.indices, t.Index)
	}
	var diags hcl.Diagnostics
	for _, g := range groups {
		t := g.task
		subject := t.Address()
		if t.Index >= 0 {
			subject = Instances(t.Name, g.indices, total[t.Name])
		}
		detail := fmt.Sprintf("No pool's labels satisfy the placement of %s:%s", subject, g.unmet)
		if len(cfg.Pools) == 0 {
			detail = "No pool is declared. Declare a pool whose labels satisfy the placement."
		}
		rng := t.PlacementRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Unsatisfiable placement for %s", subject),
			Detail:   detail,
			Subject:  &rng,
		})
	}
	return diags
}

// Instances names the given instances (ascending indices) of the counted
// task name, which has total instances: "task.train (all 3 instances)",
// "task.train[1]", "task.train[0], task.train[2]", and runs of three or more
// as "task.train[4] to task.train[9]".
func Instances(name string, indices []int, total int) string {
	if len(indices) == total && total > 1 {
		return fmt.Sprintf("task.%s (all %d instances)", name, total)
	}
	var parts []string
	for i := 0; i < len(indices); {
		j := i
		for j+1 < len(indices) && indices[j+1] == indices[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("task.%s[%d] to task.%s[%d]", name, indices[i], name, indices[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, fmt.Sprintf("task.%s[%d]", name, indices[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// Validate runs the engine's checks of a configuration that the hcl package
// decoded without errors: placement satisfiability (CheckPlacement) and the
// coordinator's settings (CheckServe).
func Validate(cfg *wdchcl.Config) hcl.Diagnostics {
	return append(CheckPlacement(cfg), CheckServe(cfg)...)
}

// CheckServe reports settings of the wdc block that contradict each other:
// insecure = true with a tls block, and an advertise URL whose scheme is
// not what the coordinator will serve (https on a non-loopback listen
// address or with a tls block, http otherwise). WDC_LISTEN and
// WDC_ADVERTISE can still change them at apply.
func CheckServe(cfg *wdchcl.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	st := cfg.Settings
	s := httpapi.ListenSettings{Listen: st.Listen, Insecure: st.Insecure}
	if st.TLS != nil {
		s.CertFile, s.KeyFile = st.TLS.CertFile, st.TLS.KeyFile
		if st.Insecure {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "insecure contradicts tls",
				Detail:  "The wdc block has a tls block and insecure = true: the coordinator cannot serve both HTTPS and plain HTTP. Remove one of them.",
				Subject: st.InsecureRange.Ptr()})
		}
	}
	if st.Advertise != "" {
		want := map[bool]string{true: "https", false: "http"}[s.ServesTLS()]
		if got, _, _ := strings.Cut(st.Advertise, "://"); got != want {
			why := "on a loopback address it serves plain HTTP"
			if want == "https" {
				why = "it serves HTTPS on a non-loopback address (or with a tls block) unless insecure = true"
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "advertise does not match how the coordinator serves",
				Detail:  fmt.Sprintf("advertise is %q, but the coordinator will serve %s: %s.", st.Advertise, want, why),
				Subject: st.AdvertiseRange.Ptr()})
		}
	}
	return diags
}
