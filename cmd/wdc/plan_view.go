package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wdc-dev/wdc/engine"
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

// renderPlan writes p in the Terraform-like grammar of DESIGN §6: one block
// per change with its symbol and reason, then the summary line.
func renderPlan(w io.Writer, p *engine.Plan, color bool) error {
	var b strings.Builder
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + colorReset
	}
	sum := p.Summary()
	if !p.HasChanges() {
		b.WriteString(paint(colorBold, "No changes.") + " The state matches the configuration: every task succeeded with its current definition.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("wdc will perform the following actions:\n")
	symbolColor := map[engine.Action]string{
		engine.ActionLaunch:  colorGreen,
		engine.ActionRun:     colorGreen,
		engine.ActionReplace: colorYellow,
		engine.ActionRetry:   colorYellow,
		engine.ActionCancel:  colorRed,
	}
	sym := func(a engine.Action) string {
		return paint(symbolColor[a], fmt.Sprintf("%3s", a.Symbol()))
	}
	for _, pc := range p.Pools {
		if pc.Workers == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  # pool.%s will launch %s (%s counted toward it, capacity %d, min %d, max %d)\n",
			pc.Name, count(pc.Workers, "worker", "workers"), count(pc.Tasks, "task", "tasks"), pc.Capacity, pc.Min, pc.Max)
		fmt.Fprintf(&b, "%s pool.%s\n", sym(engine.ActionLaunch), pc.Name)
	}
	for _, tc := range p.Tasks {
		fmt.Fprintf(&b, "\n  # %s %s: %s\n", tc.Address, actionPhrase(tc.Action), tc.Reason)
		line := sym(tc.Action) + " " + tc.Address
		switch tc.Action {
		case engine.ActionReplace:
			if tc.OldHash == tc.NewHash {
				line += fmt.Sprintf("  %s (definition unchanged)", protocol.ShortHash(tc.NewHash))
			} else {
				line += fmt.Sprintf("  %s → %s", protocol.ShortHash(tc.OldHash), protocol.ShortHash(tc.NewHash))
			}
		case engine.ActionRun, engine.ActionRetry:
			line += "  " + protocol.ShortHash(tc.NewHash)
		}
		if tc.Pool != "" {
			line += "  on pool." + tc.Pool
		}
		b.WriteString(line + "\n")
		if def, ok := p.Definitions[tc.Address]; ok && tc.Action != engine.ActionCancel {
			b.WriteString("      command    = " + hclList(def.Definition.Command) + "\n")
			if len(def.Definition.DependsOn) > 0 {
				b.WriteString("      depends_on = [" + strings.Join(def.Definition.DependsOn, ", ") + "]\n")
			}
		}
	}
	b.WriteString("\n" + paint(colorBold, sum.String()) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func actionPhrase(a engine.Action) string {
	switch a {
	case engine.ActionRun:
		return "will run"
	case engine.ActionReplace:
		return "will be replaced"
	case engine.ActionRetry:
		return "will be retried"
	case engine.ActionCancel:
		return "will be cancelled"
	}
	return string(a)
}

// hclList renders strings as an HCL list literal: ["a", "b"].
func hclList(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = strconv.Quote(it)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
