package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wdc-dev/wdc/protocol"
)

// ANSI colors for plan symbols, used only on a terminal.
const (
	colorReset  = "\x1b[0m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorRed    = "\x1b[31m"
	colorBold   = "\x1b[1m"
)

// renderPlan writes the plan document in the Terraform-like grammar of
// docs/design.md §6: one block per change with its symbol, reason and placement
// (the pool it counts toward, the other pools that could run it), each
// pool's worker count with why, then the summary line.
func renderPlan(w io.Writer, doc *planDoc, color bool) error {
	var b strings.Builder
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + colorReset
	}
	if !doc.Summary.HasChanges {
		b.WriteString(paint(colorBold, "No changes.") + " The state matches the configuration.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("wdc will perform the following actions:\n")
	symbolColor := map[string]string{"+": colorGreen, "-/+": colorYellow, "~": colorYellow, "-": colorRed}
	sym := func(s string) string { return paint(symbolColor[s], fmt.Sprintf("%3s", s)) }
	for _, pd := range doc.Pools {
		if pd.Workers == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  # %s will launch %s (%s counted toward it, capacity %d, min %d, max %d)\n",
			pd.Address, count(pd.Workers, "worker", "workers"), count(pd.Tasks, "task", "tasks"), pd.Capacity, pd.Min, pd.Max)
		fmt.Fprintf(&b, "%s %s\n", sym("+"), pd.Address)
	}
	for _, cd := range doc.Changes {
		fmt.Fprintf(&b, "\n  # %s %s: %s\n", cd.Address, actionPhrase(cd.Action), cd.Reason)
		line := sym(cd.Symbol) + " " + cd.Address
		switch {
		case cd.Action == "replace" && cd.Before != nil && cd.After != nil && cd.Before.DefHash == cd.After.DefHash:
			line += fmt.Sprintf("  %s (definition unchanged)", protocol.ShortHash(cd.After.DefHash))
		case cd.Action == "replace" && cd.Before != nil && cd.After != nil:
			line += fmt.Sprintf("  %s → %s", protocol.ShortHash(cd.Before.DefHash), protocol.ShortHash(cd.After.DefHash))
		case cd.After != nil:
			line += "  " + protocol.ShortHash(cd.After.DefHash)
		}
		if cd.Pool != "" {
			line += "  on pool." + cd.Pool
			if len(cd.Candidates) > 1 {
				var others []string
				for _, c := range cd.Candidates {
					if c != cd.Pool {
						others = append(others, "pool."+c)
					}
				}
				line += " (could also run on " + strings.Join(others, ", ") + ")"
			}
		}
		b.WriteString(line + "\n")
		if a := cd.After; a != nil {
			if len(a.Command) == 1 && a.Command[0] == sensitiveText {
				b.WriteString("      command    = " + sensitiveText + "\n")
			} else {
				b.WriteString("      command    = " + hclList(a.Command) + "\n")
			}
			if len(a.DependsOn) > 0 {
				b.WriteString("      depends_on = [" + strings.Join(a.DependsOn, ", ") + "]\n")
			}
		}
	}
	b.WriteString("\n" + paint(colorBold, doc.Summary.Text) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func actionPhrase(action string) string {
	switch action {
	case "run":
		return "will run"
	case "replace":
		return "will be replaced"
	case "retry":
		return "will be retried"
	case "cancel":
		return "will be cancelled"
	}
	return action
}

// hclList renders strings as an HCL list literal: ["a", "b"].
func hclList(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = strconv.Quote(it)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
