package hcl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// locals gathers every locals block and evaluates the values in
// dependency order, reporting duplicates and cycles.
func (l *loader) locals(blocks hcl.Blocks) {
	var attrs []*hcl.Attribute
	index := map[string]int{}
	for _, b := range blocks {
		am, diags := b.Body.JustAttributes()
		l.add(diags...)
		list := make([]*hcl.Attribute, 0, len(am))
		for _, a := range am {
			list = append(list, a)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
		for _, a := range list {
			if i, ok := index[a.Name]; ok {
				l.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Duplicate local value %q", a.Name),
					Detail:   fmt.Sprintf("A local value named %q was already defined at %s. Each local value needs a unique name.", a.Name, attrs[i].NameRange),
					Subject:  a.NameRange.Ptr(),
				})
				continue
			}
			index[a.Name] = len(attrs)
			attrs = append(attrs, a)
			l.ev.localDecl[a.Name] = true
		}
	}

	adj := make([][]int, len(attrs))
	for i, a := range attrs {
		seen := map[int]bool{}
		for _, tr := range a.Expr.Variables() {
			if tr.RootName() != "local" {
				continue
			}
			name, ok := traversalStep(tr)
			if j, found := index[name]; ok && found && !seen[j] {
				seen[j] = true
				adj[i] = append(adj[i], j)
			}
		}
		sort.Ints(adj[i])
	}

	for _, comp := range stronglyConnected(len(attrs), adj) {
		if cyc := cycleIn(comp, adj); cyc != nil {
			names := make([]string, len(cyc))
			for k, n := range cyc {
				names[k] = "local." + attrs[n].Name
			}
			first := attrs[cyc[0]]
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cycle in local values",
				Detail:   fmt.Sprintf("These local values refer to each other: %s.%s", strings.Join(names, " → "), alsoIn(comp, cyc, func(n int) string { return "local." + attrs[n].Name })),
				Subject:  first.NameRange.Ptr(),
			})
			for _, n := range comp {
				l.ev.locals[attrs[n].Name] = cty.DynamicVal
			}
			continue
		}
		a := attrs[comp[0]]
		if l.usesSensitive(a.Expr) {
			l.sensitiveLocals[a.Name] = true
		}
		v, diags := l.ev.eval(a.Expr, scope{})
		l.add(diags...)
		l.ev.locals[a.Name] = v
		if !diags.HasErrors() {
			l.cfg.Locals[a.Name] = v
		}
	}
}

// stronglyConnected returns the strongly connected components of a graph
// (edges point from a node to what it depends on), each sorted, in an
// order where every component comes after the components it depends on.
func stronglyConnected(n int, adj [][]int) [][]int {
	index := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	// Iterative Tarjan, so deep chains cannot overflow the stack.
	type frame struct{ v, edge int }
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		on[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.edge < len(adj[f.v]) {
				w := adj[f.v][f.edge]
				f.edge++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					on[w] = true
					call = append(call, frame{w, 0})
				} else if on[w] && index[w] < low[f.v] {
					low[f.v] = index[w]
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				if low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					on[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				sort.Ints(comp)
				out = append(out, comp)
			}
		}
	}
	return out
}

// cycleIn returns a shortest cycle through the first node of a component,
// as a node list that starts and ends with that node, or nil when the
// component is a single node without a self edge.
func cycleIn(comp []int, adj [][]int) []int {
	start := comp[0]
	if len(comp) == 1 {
		for _, w := range adj[start] {
			if w == start {
				return []int{start, start}
			}
		}
		return nil
	}
	in := map[int]bool{}
	for _, c := range comp {
		in[c] = true
	}
	prev := map[int]int{}
	queue := []int{start}
	visited := map[int]bool{start: true}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range adj[v] {
			if !in[w] {
				continue
			}
			if w == start {
				path := []int{start}
				for x := v; x != start; x = prev[x] {
					path = append(path, x)
				}
				// path is start, v, …, reversed after the first element.
				for i, j := 1, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return append(path, start)
			}
			if !visited[w] {
				visited[w] = true
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil
}

// alsoIn names the members of a component that a cycle leaves out.
func alsoIn(comp, cyc []int, name func(int) string) string {
	inCycle := map[int]bool{}
	for _, c := range cyc {
		inCycle[c] = true
	}
	var rest []string
	for _, c := range comp {
		if !inCycle[c] {
			rest = append(rest, name(c))
		}
	}
	if len(rest) == 0 {
		return ""
	}
	return " These are part of the same cycle too: " + strings.Join(rest, ", ") + "."
}
