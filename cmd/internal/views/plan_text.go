package views

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// ANSI colors for plan symbols, used only on a terminal.
const (
	colorReset  = "\x1b[0m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorRed    = "\x1b[31m"
	colorBold   = "\x1b[1m"
)

// PlanText writes the plan document for people, in the Terraform-like
// grammar of docs/design.md §6: each pool's worker count with why, one
// block per change with its symbol, reason and placement (the pool it
// counts toward, the other pools that could run it) and the definition
// (command, env, dir, placement labels, dependencies, inputs, outputs and
// input blocks with where their files land), the proposals waiting
// for approval, then the summary line. With color, symbols and the summary
// carry ANSI colors (for a terminal).
func PlanText(w io.Writer, doc *jsonplan.Plan, color bool) error {
	var b strings.Builder
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + colorReset
	}
	if !doc.Summary.HasChanges {
		b.WriteString(paint(colorBold, "No changes.") + " The state matches the configuration.\n")
		writeWaiting(&b, doc.WaitingProposals)
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
		if pd.Provider == providers.External {
			fmt.Fprintf(&b, "\n  # %s will wait for up to %s to join (%s counted toward it, capacity %d, max %d): wdc join-token create %s\n",
				pd.Address, plural.Count(pd.Workers, "worker", "workers"), plural.Count(pd.Tasks, "task", "tasks"), pd.Capacity, pd.Max, pd.Name)
			fmt.Fprintf(&b, "%s %s (external)\n", sym("+"), pd.Address)
			writeUnconfined(&b, pd)
			continue
		}
		launch := plural.Count(pd.Workers, "worker", "workers")
		switch {
		case pd.InitialWorkers == 0:
			launch = fmt.Sprintf("up to %s, none until one of its tasks can start", launch)
		case pd.InitialWorkers < pd.Workers:
			launch = fmt.Sprintf("up to %s, starting with %d", launch, pd.InitialWorkers)
		}
		fmt.Fprintf(&b, "\n  # %s will launch %s (%s counted toward it, capacity %d, min %d, max %d)\n",
			pd.Address, launch, plural.Count(pd.Tasks, "task", "tasks"), pd.Capacity, pd.Min, pd.Max)
		fmt.Fprintf(&b, "%s %s\n", sym("+"), pd.Address)
		writeUnconfined(&b, pd)
		if len(pd.LaunchPreview) > 0 {
			b.WriteString("      each launch creates (names and the apply-id label are known after apply):\n")
			for _, o := range pd.LaunchPreview {
				fmt.Fprintf(&b, "        # %s %s\n", o.Kind, o.Name)
				for _, line := range strings.Split(strings.TrimRight(o.Body, "\n"), "\n") {
					b.WriteString("        " + line + "\n")
				}
			}
		}
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
			b.WriteString("      command    = " + CommandText(a.Command) + "\n")
			if len(a.Env) > 0 {
				b.WriteString("      env        = " + HCLMap(a.Env) + "\n")
			}
			if a.Dir != "" && a.Dir != "." {
				b.WriteString("      dir        = " + strconv.Quote(a.Dir) + "\n")
			}
			if len(a.Placement) > 0 {
				b.WriteString("      placement  = " + HCLMap(a.Placement) + "\n")
			}
			if len(a.DependsOn) > 0 {
				b.WriteString("      depends_on = [" + strings.Join(a.DependsOn, ", ") + "]\n")
			}
			writeFiles(&b, a)
			if cd.Action == "replace" && cd.Before != nil && cd.Before.Command != nil {
				for _, line := range changedLines(cd.Before, a) {
					b.WriteString("      " + paint(colorYellow, "~") + " " + line + "\n")
				}
			}
		}
	}
	writeWaiting(&b, doc.WaitingProposals)
	b.WriteString("\n" + paint(colorBold, doc.Summary.Text) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// maxInputsShown is how many input files a change lists; the JSON
// document lists all, with their hashes.
const maxInputsShown = 10

// writeFiles writes what goes into a definition from files: the inputs of
// the configuration directory, the output patterns, and each input block
// with where its files land (the folder NAME of the attempt's directory,
// under their paths as the producing task wrote them).
func writeFiles(b *strings.Builder, a *jsonplan.After) {
	if len(a.Inputs) > 0 {
		paths := make([]string, 0, min(len(a.Inputs), maxInputsShown))
		for _, in := range a.Inputs[:min(len(a.Inputs), maxInputsShown)] {
			paths = append(paths, in.Path)
		}
		line := "      inputs     = " + hclList(paths)
		if len(a.Inputs) > maxInputsShown {
			line = strings.TrimSuffix(line, "]") + fmt.Sprintf(", …] (%d files)", len(a.Inputs))
		}
		b.WriteString(line + "\n")
	}
	if len(a.Outputs) > 0 {
		b.WriteString("      outputs    = " + hclList(a.Outputs) + "\n")
	}
	// A task that sets dir runs there, but its input blocks still land in
	// the attempt's directory.
	where := ""
	if a.Dir != "" {
		where = "$WDC_ATTEMPT_DIR/"
	}
	for _, m := range a.Mounts {
		fmt.Fprintf(b, "      input %q ← %s outputs %s → %s%s/%s\n", m.Name, m.From, m.Output, where, m.Name, m.Output)
	}
}

// writeWaiting lists the proposals waiting for approval: they are not
// changes, and nothing runs them until they are approved.
func writeWaiting(b *strings.Builder, waiting []jsonplan.ProposalRef) {
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s waiting for approval (not run until approved):\n", plural.Count(len(waiting), "proposal", "proposals"))
	for i, p := range waiting {
		if i == maxWaitingShown && len(waiting) > maxWaitingShown+1 {
			fmt.Fprintf(b, "  … and %d more: wdc proposals list --status pending\n", len(waiting)-i)
			break
		}
		fmt.Fprintf(b, "  %s  %s proposed by %s attempt %d via edge.%s: wdc approve %d, or wdc reject %d --reason TEXT\n",
			p.Address, p.Task, p.SourceTask, p.SourceAttempt, p.Edge, p.ID, p.ID)
	}
}

// maxWaitingShown is how many waiting proposals a plan names; the JSON
// document lists all.
const maxWaitingShown = 10

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

// CommandText renders a command as an HCL list, ["a", "b"], or
// "(sensitive)" for a command hidden whole.
func CommandText(cmd []string) string {
	if len(cmd) == 1 && cmd[0] == jsonplan.Sensitive {
		return jsonplan.Sensitive
	}
	return hclList(cmd)
}

// changedLines lists, for a replace, each definition field that differs
// from what the state recorded: "command was [...]", "env.KEY: "a" → "b"".
func changedLines(before *jsonplan.Before, after *jsonplan.After) []string {
	var out []string
	if hclList(before.Command) != hclList(after.Command) {
		out = append(out, "command was "+CommandText(before.Command))
	}
	keys := map[string]bool{}
	for k := range before.Env {
		keys[k] = true
	}
	for k := range after.Env {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		old, had := before.Env[k]
		cur, has := after.Env[k]
		switch {
		case had && !has:
			out = append(out, fmt.Sprintf("env.%s removed (was %q)", k, old))
		case !had && has:
			out = append(out, fmt.Sprintf("env.%s added: %q", k, cur))
		case old != cur:
			out = append(out, fmt.Sprintf("env.%s: %q → %q", k, old, cur))
		}
	}
	if before.Dir != after.Dir {
		out = append(out, fmt.Sprintf("dir: %q → %q", before.Dir, after.Dir))
	}
	if strings.Join(before.DependsOn, ",") != strings.Join(after.DependsOn, ",") {
		out = append(out, fmt.Sprintf("depends_on was [%s]", strings.Join(before.DependsOn, ", ")))
	}
	if hclList(before.Outputs) != hclList(after.Outputs) {
		out = append(out, "outputs was "+hclList(before.Outputs))
	}
	if !slices.Equal(before.Mounts, after.Mounts) {
		var was []string
		for _, m := range before.Mounts {
			was = append(was, fmt.Sprintf("%q ← %s outputs %s", m.Name, m.From, m.Output))
		}
		if len(was) == 0 {
			was = []string{"none"}
		}
		out = append(out, "input blocks were "+strings.Join(was, ", "))
	}
	return out
}

// HCLMap renders a string map as an HCL object literal with sorted keys:
// { A = "1", B = "2" }.
func HCLMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Quote(k) + " = " + strconv.Quote(m[k])
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// writeUnconfined notes a pool whose attempts run without confinement.
func writeUnconfined(b *strings.Builder, pd jsonplan.Pool) {
	if pd.Unconfined {
		b.WriteString("      confine = false: its tasks run unconfined and can read the work folder (the state, the workers' sessions) and signal their agent\n")
	}
}
