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

// CheckPlacement returns an error diagnostic, at the task's placement
// attribute, for every task that no declared pool can ever run. The detail
// names every unmet label requirement of every pool, so the fix is obvious.
// The instances of a counted task that fail the same way share one
// diagnostic naming them, rather than repeating it per instance.
func CheckPlacement(cfg *wdchcl.Config) hcl.Diagnostics {
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
		if len(CandidatePools(cfg, t)) > 0 {
			continue
		}
		var b strings.Builder
		for _, p := range cfg.Pools {
			unmet := strings.Join(Unmet(p.Labels, t.Placement), "; ")
			if t.Sensitive.Placement || len(t.Sensitive.PlacementKeys) > 0 || p.SensitiveLabels || len(p.SensitiveLabelKeys) > 0 {
				unmet = fmt.Sprintf("%d unmet label requirements (values hidden: computed from a sensitive variable)", len(Unmet(p.Labels, t.Placement)))
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
			subject = instances(t.Name, g.indices, total[t.Name])
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

// instances names the given instances (ascending indices) of the counted
// task name, which has total instances: "task.train (all 3 instances)",
// "task.train[1]", "task.train[0], task.train[2]", and runs of three or more
// as "task.train[4] to task.train[9]".
func instances(name string, indices []int, total int) string {
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
	s := ListenSettings{Listen: st.Listen, Insecure: st.Insecure}
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
