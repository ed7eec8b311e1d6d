package hcl

import (
	"fmt"
	"math/big"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// dependencies resolves every depends_on into instance addresses and
// reports unknown tasks, bad indexes and cycles.
func (l *loader) dependencies(tbs []*taskBlock) {
	byName := map[string]int{}
	for i, tb := range tbs {
		byName[tb.name] = i
	}
	adj := make([][]int, len(tbs))
	links := make([]map[int][]depLink, len(tbs))
	for i, tb := range tbs {
		if tb.proposed || (tb.dependsOn == nil && len(tb.mounts) == 0) {
			continue
		}
		adj[i], links[i] = l.blockDependencies(tb, byName, tbs)
	}
	l.reportCycles(tbs, adj, links)
}

// depLink is what makes one task block depend on another: an element of
// its depends_on, or one of its input blocks (Input is the block's name),
// at Range (the element, or the block's from).
type depLink struct {
	Input string
	Range hcl.Range
}

// blockDependencies resolves the depends_on and the input blocks of one
// task block: it sets its instances' DependsOn and their mounts' From,
// and returns the blocks it depends on (indexes into tbs, sorted) with
// the links that make it depend on each.
func (l *loader) blockDependencies(tb *taskBlock, byName map[string]int, tbs []*taskBlock) ([]int, map[int][]depLink) {
	deps := map[*Task]bool{}
	edges := map[int][]depLink{}
	var exprs []hcl.Expression
	if tb.dependsOn != nil {
		var diags hcl.Diagnostics
		exprs, diags = hcl.ExprList(tb.dependsOn.Expr)
		for _, d := range diags {
			d.Detail = "depends_on must be a list of task addresses, as in [task.fetch, task.build[0]]. " + d.Detail
		}
		l.add(diags...)
	}
	// An input block's task is a dependency too: its outputs must exist.
	for _, m := range tb.mounts {
		if j, from := l.mountDependency(tb, m, byName, tbs); from != nil {
			deps[from] = true
			edges[j] = append(edges[j], depLink{Input: m.Name, Range: m.From.Expr.Range()})
		}
	}
	for _, e := range exprs {
		j, idx, ok := l.dependency(e, byName, tbs, "depends_on")
		if !ok {
			continue
		}
		target := tbs[j]
		var got []*Task
		if idx < 0 {
			got = target.instances
		} else if idx < len(target.instances) {
			got = target.instances[idx : idx+1]
		}
		for _, t := range got {
			deps[t] = true
		}
		if len(got) > 0 && len(tb.instances) > 0 {
			edges[j] = append(edges[j], depLink{Range: e.Range()})
		}
	}
	setDependsOn(tb, deps)
	var adj []int
	for j := range edges {
		adj = append(adj, j)
	}
	sort.Ints(adj)
	return adj, edges
}

// mountDependency resolves the task an input block of tb takes outputs
// from: the index of its block and the instance, nil when the block names
// none that can give it a file (an error says why). The instances'
// mounts get its address.
func (l *loader) mountDependency(tb *taskBlock, m *mountBody, byName map[string]int, tbs []*taskBlock) (int, *Task) {
	if m.From == nil {
		return 0, nil
	}
	j, idx, ok := l.dependency(m.From.Expr, byName, tbs, fmt.Sprintf("input %q's from", m.Name))
	if !ok {
		return 0, nil
	}
	target := tbs[j]
	if idx < 0 && target.counted {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Input from a counted task",
			Detail:  fmt.Sprintf("task.%s has count, so the input %q must name one instance, as in task.%s[0].", target.name, m.Name, target.name),
			Subject: m.From.Expr.Range().Ptr()})
		return 0, nil
	}
	if idx < 0 {
		idx = 0
	}
	if idx >= len(target.instances) {
		return 0, nil
	}
	from := target.instances[idx]
	if msg := outputsCanMatch(from, tb, m.Name); msg != "" {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Input matches no output", Detail: msg, Subject: m.From.Expr.Range().Ptr()})
		return 0, nil
	}
	for _, t := range tb.instances {
		for k := range t.Mounts {
			if t.Mounts[k].Name == m.Name {
				t.Mounts[k].From = from.Address()
			}
		}
	}
	return j, from
}

// setDependsOn gives the instances of tb the addresses of deps, sorted.
func setDependsOn(tb *taskBlock, deps map[*Task]bool) {
	list := make([]*Task, 0, len(deps))
	for t := range deps {
		list = append(list, t)
	}
	sort.Slice(list, func(a, b int) bool {
		if list[a].Name != list[b].Name {
			return list[a].Name < list[b].Name
		}
		return list[a].Index < list[b].Index
	})
	addrs := make([]string, len(list))
	for k, t := range list {
		addrs[k] = t.Address()
	}
	if len(addrs) == 0 {
		addrs = nil
	}
	// Every instance of a block shares one slice (full slice expression:
	// an append by a caller copies): a counted task that depends on a
	// counted task would otherwise need count×count strings.
	for _, t := range tb.instances {
		t.DependsOn = addrs[:len(addrs):len(addrs)]
	}
}

// reportCycles reports every dependency cycle among the task blocks (adj:
// the blocks each depends on; links: what makes it depend on each),
// naming every task in it, each link with what it is (a depends_on
// element or an input block) and where, and the link to remove. The error
// is reported at that link.
func (l *loader) reportCycles(tbs []*taskBlock, adj [][]int, links []map[int][]depLink) {
	for _, comp := range stronglyConnected(len(tbs), adj) {
		cyc := cycleIn(comp, adj)
		if cyc == nil {
			continue
		}
		names := make([]string, len(cyc))
		for k, n := range cyc {
			names[k] = "task." + tbs[n].name
		}
		var said []string
		cut := -1 // the step of the cycle whose links to remove
		for k := 0; k+1 < len(cyc); k++ {
			ls := links[cyc[k]][cyc[k+1]]
			parts := make([]string, len(ls))
			for m, lk := range ls {
				parts[m] = l.describeLink(lk)
			}
			said = append(said, fmt.Sprintf("\n  %s → %s by %s", names[k], names[k+1], strings.Join(parts, " and ")))
			if cut < 0 || betterCut(ls, links[cyc[cut]][cyc[cut+1]]) {
				cut = k
			}
		}
		detail := fmt.Sprintf("These tasks depend on each other, so none of them could ever start: %s.%s The links:%s\n%s",
			strings.Join(names, " → "), alsoIn(comp, cyc, func(n int) string { return "task." + tbs[n].name }),
			strings.Join(said, ";")+".", l.removeAdvice(names[cut], links[cyc[cut]][cyc[cut+1]]))
		subject := cycleSubject(tbs[cyc[0]])
		if ls := links[cyc[cut]][cyc[cut+1]]; len(ls) > 0 {
			subject = ls[0].Range.Ptr()
		}
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Dependency cycle",
			Detail:   detail,
			Subject:  subject,
		})
	}
}

// describeLink says what a link is and where: `depends_on element
// task.b (main.wdc.hcl:3)` or `input "parts" from task.a (main.wdc.hcl:9)`.
func (l *loader) describeLink(lk depLink) string {
	if lk.Input != "" {
		return fmt.Sprintf("input %q from %s (%s)", lk.Input, l.linkText(lk), linkAt(lk))
	}
	return fmt.Sprintf("depends_on element %s (%s)", l.linkText(lk), linkAt(lk))
}

// linkText is the source text of a link's reference (task.b, task.a[0]).
func (l *loader) linkText(lk depLink) string {
	if f := l.parser.Files()[lk.Range.Filename]; f != nil && lk.Range.End.Byte <= len(f.Bytes) {
		return string(lk.Range.SliceBytes(f.Bytes))
	}
	return "the task"
}

// linkAt is where a link is: its file's name and line, main.wdc.hcl:3.
func linkAt(lk depLink) string {
	return rangeStart(lk.Range)
}

// rangeStart is where r starts, as file:line:col (the form every
// diagnostic's location has).
func rangeStart(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// betterCut reports whether removing the links a breaks a cycle at less
// cost than removing b: depends_on elements only order tasks, where an
// input block also brings files, so a step made of depends_on alone is
// better, then one with fewer links.
func betterCut(a, b []depLink) bool {
	inputs := func(ls []depLink) int {
		n := 0
		for _, lk := range ls {
			if lk.Input != "" {
				n++
			}
		}
		return n
	}
	if ia, ib := inputs(a), inputs(b); ia != ib {
		return ia < ib
	}
	return len(a) < len(b)
}

// removeAdvice says which links to remove to break a cycle at the step
// from task from.
func (l *loader) removeAdvice(from string, ls []depLink) string {
	var what []string
	for _, lk := range ls {
		if lk.Input != "" {
			what = append(what, fmt.Sprintf("the input block %q of %s (%s), taking its files another way", lk.Input, from, linkAt(lk)))
		} else {
			what = append(what, fmt.Sprintf("%s from the depends_on of %s (%s)", l.linkText(lk), from, linkAt(lk)))
		}
	}
	return "To break the cycle, remove " + strings.Join(what, " and ") + "."
}

// outputsCanMatch says why the input block name of the tasks of tb can
// never get a file from task from, or "" when it may: from declares no
// outputs, or no declared output can match the block's pattern (checked
// when either side is a plain name, without wildcards).
func outputsCanMatch(from *Task, tb *taskBlock, name string) string {
	if len(tb.instances) == 0 {
		return ""
	}
	var pattern string
	for _, m := range tb.instances[0].Mounts {
		if m.Name == name {
			pattern = m.Output
		}
	}
	if pattern == "" {
		return ""
	}
	if len(from.Outputs) == 0 {
		return fmt.Sprintf("Input %q takes the outputs of %s matching %q, but %s declares no outputs; add outputs = [...] to it.", name, from.Address(), pattern, from.Address())
	}
	for _, o := range from.Outputs {
		plainO, plainP := !hasMeta(o), !hasMeta(pattern)
		if !plainO && !plainP {
			return "" // two wildcards: either may match
		}
		if plainO {
			if ok, _ := path.Match(pattern, o); ok {
				return ""
			}
		} else if ok, _ := path.Match(o, pattern); ok {
			return ""
		}
	}
	return fmt.Sprintf("Input %q takes the outputs of %s matching %q, but none of its declared outputs (%s) can match it.", name, from.Address(), pattern, strings.Join(from.Outputs, ", "))
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// dependency checks one depends_on element (or an input block's from;
// what names it in messages): it returns the index of the target block
// and the instance index (-1 for every instance).
func (l *loader) dependency(e hcl.Expression, byName map[string]int, tbs []*taskBlock, what string) (int, int, bool) {
	bad := func(detail string) (int, int, bool) {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + what + " reference",
			Detail:   detail + " A dependency is a task address: task.NAME, or task.NAME[INDEX] for one instance of a counted task.",
			Subject:  e.Range().Ptr(),
		})
		return 0, 0, false
	}
	tr, diags := hcl.AbsTraversalForExpr(e)
	if diags.HasErrors() {
		return bad("This is not a static reference.")
	}
	if tr.RootName() != "task" {
		return bad(fmt.Sprintf("%s can only name tasks, not %q.", what, tr.RootName()))
	}
	if len(tr) < 2 || len(tr) > 3 {
		return bad("The reference has the wrong shape.")
	}
	step, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return bad("The task name must follow \"task.\".")
	}
	idx := -1
	if len(tr) == 3 {
		ix, ok := tr[2].(hcl.TraverseIndex)
		if !ok || ix.Key.IsNull() || !ix.Key.IsKnown() || ix.Key.Type() != cty.Number {
			return bad("The instance index must be a whole number.")
		}
		n, acc := ix.Key.AsBigFloat().Int64()
		if !ix.Key.AsBigFloat().IsInt() || n < 0 || (acc != big.Exact && n <= MaxCount) {
			return bad("The instance index must be a whole number, 0 or more.")
		}
		idx = int(min(n, MaxCount+1))
	}
	j, found := byName[step.Name]
	if !found {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Reference to undeclared task",
			Detail:   fmt.Sprintf("%s names task.%s, but no task %q is declared.%s", what, step.Name, step.Name, didYouMean(step.Name, mapKeys(byName))),
			Subject:  e.Range().Ptr(),
		})
		return 0, 0, false
	}
	target := tbs[j]
	if target.proposed {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Dependency on a proposed_only task",
			Detail:   fmt.Sprintf("task.%s is proposed_only: it runs only when a proposal is approved, so nothing can depend on it.", step.Name),
			Subject:  e.Range().Ptr(),
		})
		return 0, 0, false
	}
	if target.failed {
		return 0, 0, false // its own errors were reported
	}
	if idx >= 0 {
		if !target.counted {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Index on a task without count",
				Detail:   fmt.Sprintf("task.%s has no count argument, so it has one instance, addressed as task.%s without an index.", step.Name, step.Name),
				Subject:  e.Range().Ptr(),
			})
			return 0, 0, false
		}
		if idx >= target.count {
			detail := fmt.Sprintf("task.%s has count = %d, so its indexes are 0 to %d; there is no task.%s[%d].", step.Name, target.count, target.count-1, step.Name, idx)
			if target.count == 0 {
				detail = fmt.Sprintf("task.%s has count = 0, so it has no instances; use task.%s to depend on all of them (none).", step.Name, step.Name)
			}
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Task index out of range",
				Detail:   detail,
				Subject:  e.Range().Ptr(),
			})
			return 0, 0, false
		}
	}
	return j, idx, true
}

// cycleSubject is where a dependency cycle is reported: the block's
// depends_on, or its first input block.
func cycleSubject(tb *taskBlock) *hcl.Range {
	if tb.dependsOn != nil {
		return tb.dependsOn.Expr.Range().Ptr()
	}
	for _, m := range tb.mounts {
		if m.From != nil {
			return m.From.Expr.Range().Ptr()
		}
	}
	return tb.block.DefRange.Ptr()
}
