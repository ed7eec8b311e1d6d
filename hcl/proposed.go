package hcl

import (
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// ProposedTask is a task "NAME" block with proposed_only = true. The plan
// never runs it on its own: a recommendation that an edge maps to it is a
// proposal, and when the proposal is approved RenderProposal evaluates the
// block with that proposal's input and source.
type ProposedTask struct {
	Name      string
	DeclRange hcl.Range

	block *hcl.Block
	body  taskBody // without count, depends_on, inputs and input blocks
	ev    *evaluator
	// sensitiveLocals and sensitiveVars are the loader's: what the
	// Sensitive flags and the diagnostics' scrubbing need.
	sensitiveLocals map[string]bool
	sensitiveVars   int
}

// Address returns "task.NAME".
func (p *ProposedTask) Address() string { return "task." + p.Name }

// ProposalSource is the causation of a proposal.
type ProposalSource struct {
	// Task is the address of the recommending task instance, as in
	// "task.ci_doctor" or "task.ci_doctor[2]".
	Task string
	// Attempt is the number of the attempt that wrote the recommendation.
	Attempt int
}

// proposalSourceType is the type of proposal.source.
var proposalSourceType = cty.Object(map[string]cty.Type{"task": cty.String, "attempt": cty.Number})

// proposalValue is the value of the proposal object.
func proposalValue(input, source cty.Value) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"input": input, "source": source})
}

// ProposedTask returns the proposed_only task block named name, or nil.
func (c *Config) ProposedTask(name string) *ProposedTask {
	for _, p := range c.ProposedTasks {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// proposedTask records a task block with proposed_only = true, reporting
// the arguments such a task cannot have.
func (l *loader) proposedTask(tb *taskBlock, body *taskBody) {
	forbidden := func(what string, rng hcl.Range, why string) {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid argument in a proposed_only task",
			Detail:   fmt.Sprintf("A proposed_only task runs when a proposal for it is approved; it cannot have %s. %s", what, why),
			Subject:  rng.Ptr(),
		})
	}
	if body.Count != nil {
		forbidden("count", body.Count.Range, "Each approved proposal runs one instance; what differs between them comes from proposal.input.")
	}
	if body.DependsOn != nil {
		forbidden("depends_on", body.DependsOn.Range, "It runs after the attempt whose recommendation proposed it.")
	}
	if body.Inputs != nil {
		forbidden("inputs", body.Inputs.Range, "Give it what it needs through proposal.input.")
	}
	if len(body.Mounts) > 0 {
		ranges := map[string]hcl.Range{}
		if sb, ok := tb.block.Body.(*hclsyntax.Body); ok {
			for _, b := range sb.Blocks {
				if b.Type == "input" && len(b.Labels) > 0 {
					if _, dup := ranges[b.Labels[0]]; !dup {
						ranges[b.Labels[0]] = b.DefRange()
					}
				}
			}
		}
		for _, m := range body.Mounts {
			rng, ok := ranges[m.Name]
			if !ok {
				rng = m.Body.MissingItemRange()
			}
			forbidden("input blocks", rng, "Give it what it needs through proposal.input.")
		}
	}
	b := *body
	b.Count, b.DependsOn, b.Inputs, b.Mounts = nil, nil, nil, nil
	l.cfg.ProposedTasks = append(l.cfg.ProposedTasks, &ProposedTask{
		Name:            tb.name,
		DeclRange:       tb.block.DefRange,
		block:           tb.block,
		body:            b,
		ev:              l.ev,
		sensitiveLocals: l.sensitiveLocals,
		sensitiveVars:   l.sensitiveVars,
	})
}

// checkProposed evaluates every proposed_only task once for each edge that
// proposes it, with an unknown proposal of the edge's input type, so the
// references it can check (proposal.input.nope, types) are reported at
// load time. A task no edge proposes is checked with an input of any type,
// and gets a warning.
func (l *loader) checkProposed() {
	unknownSource := cty.UnknownVal(proposalSourceType)
	for _, p := range l.cfg.ProposedTasks {
		var edges []*Edge
		for _, e := range l.cfg.Edges {
			if e.Propose == p.Name {
				edges = append(edges, e)
			}
		}
		if len(edges) == 0 {
			if !hcl.Diagnostics(l.diags).HasErrors() {
				// (With errors, an edge that proposes it may be among the
				// blocks that did not decode: no warning that would mislead.)
				l.add(&hcl.Diagnostic{
					Severity: hcl.DiagWarning,
					Summary:  "Proposed task that no edge proposes",
					Detail:   fmt.Sprintf("task.%s is proposed_only, and no edge block has propose = task.%s, so it never runs. Add an edge for it, or remove proposed_only.", p.Name, p.Name),
					Subject:  p.DeclRange.Ptr(),
				})
			}
			edges = append(edges, &Edge{Input: cty.DynamicPseudoType})
		}
		for _, e := range edges {
			sc := scope{proposed: true, checking: true, proposal: proposalValue(cty.UnknownVal(e.Input), unknownSource)}
			body := p.body
			before := len(l.diags)
			l.instance(&taskBlock{name: p.Name, block: p.block}, &body, sc, -1)
			if e.Name == "" || len(edges) == 1 {
				continue
			}
			// Several edges propose the task: say whose input an error
			// about proposal.input was found with.
			for _, d := range l.diags[before:] {
				if d.Severity == hcl.DiagError && usesProposalInput(d.Expression) {
					d.Detail += fmt.Sprintf(" (proposal.input as %s gives it: %s.)", e.Address(), typeexpr.TypeString(e.Input))
				}
			}
		}
	}
}

// RenderProposal evaluates the proposed_only task e.Propose with
// proposal.input = input (a value ConvertInput returned) and
// proposal.source = src, and returns the task instance it renders: Name
// the block's name, Index -1, and everything else as for an instance of
// a normal task (defaults applied, Dir absolute, Placement, Timeout,
// Retry, Sensitive flags). Errors (a value of the wrong type, a null
// command, an edge that names no proposed_only task) are returned as
// diagnostics, with a nil Task. It is safe to call from several
// goroutines once Load has returned.
func (c *Config) RenderProposal(e *Edge, input cty.Value, src ProposalSource) (t *Task, diags hcl.Diagnostics) {
	fail := func(summary, detail string, subject *hcl.Range) (*Task, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: subject}}
	}
	if e == nil {
		return fail("No edge", "RenderProposal needs the edge whose recommendation is proposed.", nil)
	}
	p := c.ProposedTask(e.Propose)
	if p == nil || p.ev == nil {
		return fail("Unknown proposed task", fmt.Sprintf("%s proposes task.%s, which is not a proposed_only task of this configuration.", e.Address(), e.Propose), e.DeclRange.Ptr())
	}
	if input == cty.NilVal {
		input = cty.NullVal(e.Input)
	}
	defer func() {
		if r := recover(); r != nil {
			t, diags = fail("Internal error while rendering a proposal",
				fmt.Sprintf("This is a bug in wdc; please report it with the configuration that caused it.\n\n%v\n\n%s", r, debug.Stack()), p.DeclRange.Ptr())
		}
	}()
	if input.IsMarked() || input.ContainsMarked() {
		input, _ = input.UnmarkDeep()
	}
	if !input.IsWhollyKnown() {
		return fail("Unknown proposal input", fmt.Sprintf("The input proposed to task.%s by %s is not known; it must be a value ConvertInput returned.", p.Name, e.Address()), p.DeclRange.Ptr())
	}
	input, err := convert.Convert(input, e.Input)
	if err != nil {
		return fail("Proposal input of the wrong type",
			fmt.Sprintf("The input proposed to task.%s by %s does not match %s: %s.", p.Name, e.Address(), typeexpr.TypeString(e.Input), pathError(err)), e.DeclRange.Ptr())
	}
	source := cty.ObjectVal(map[string]cty.Value{
		"task":    cty.StringVal(src.Task),
		"attempt": cty.NumberIntVal(int64(src.Attempt)),
	})
	l := &loader{
		cfg:             c,
		ev:              p.ev,
		sensitiveLocals: p.sensitiveLocals,
		sensitiveVars:   p.sensitiveVars,
	}
	body := p.body
	sc := scope{proposed: true, proposal: proposalValue(input, source)}
	t, failed := l.instance(&taskBlock{name: p.Name, block: p.block}, &body, sc, -1)
	diags = l.scrubSensitive(cleanDiags(l.diags))
	if failed || diags.HasErrors() {
		return nil, diags
	}
	return t, diags
}

// usesProposalInput reports whether expr refers to proposal.input.
func usesProposalInput(expr hcl.Expression) bool {
	if expr == nil {
		return false
	}
	for _, tr := range expr.Variables() {
		if name, ok := traversalStep(tr); ok && tr.RootName() == "proposal" && name == "input" {
			return true
		}
	}
	return false
}
