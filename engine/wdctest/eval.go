package wdctest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// Observed is what a run left, as assertions see it.
type Observed struct {
	// Tasks are the state's tasks by address.
	Tasks map[string]state.Task
	// Attempts are each task's attempts, by address, in order.
	Attempts map[string][]state.Attempt
	// WorkerPools maps each worker's id to its pool.
	WorkerPools map[string]string
	// Outputs maps a task's address to its last accepted attempt's outputs:
	// name to content.
	Outputs map[string]map[string]string
	// Launched counts the workers apply launched, by pool.
	Launched map[string]int
	// Proposals are the state's proposals, by id.
	Proposals []state.Proposal
	// Plan is the plan the run made (for apply, the one it carried out);
	// nil when planning failed (PlanFailed) or never happened.
	Plan       *plan.Plan
	PlanFailed bool
}

// Exit codes plan.exit_code gives, as `wdc plan --detailed-exitcode`
// exits.
const (
	PlanExitNoChanges = 0
	PlanExitError     = 1
	PlanExitChanges   = 2
)

// taskType is the object type of one task instance in an assertion.
var taskType = cty.Object(map[string]cty.Type{
	"status":   cty.String,
	"attempts": cty.Number,
	"lost":     cty.Number,
	"failed":   cty.Number,
	"outputs":  cty.Map(cty.String),
	"pool":     cty.String,
	"action":   cty.String,
})

// proposalType is the object type of one proposal.
var proposalType = cty.Object(map[string]cty.Type{
	"id":     cty.Number,
	"status": cty.String,
	"task":   cty.String,
	"edge":   cty.String,
})

// EvalContext builds the context assertions are evaluated in from what a
// run of cfg left: task, pool, plan, proposals and var, with the
// configuration language's functions.
func EvalContext(cfg *wdchcl.Config, o *Observed) *hcl.EvalContext {
	actions := map[string]string{}
	if o.Plan != nil {
		for _, tc := range o.Plan.Tasks {
			actions[tc.Address] = string(tc.Action)
		}
	}
	// Instances by block name; a counted block is a tuple in index order.
	type block struct {
		counted   bool
		instances []cty.Value
	}
	blocks := map[string]*block{}
	var order []string
	add := func(name string, counted bool, v cty.Value) {
		b := blocks[name]
		if b == nil {
			b = &block{counted: counted}
			blocks[name] = b
			order = append(order, name)
		}
		b.instances = append(b.instances, v)
	}
	for _, t := range cfg.Tasks {
		add(t.Name, t.Index >= 0, o.taskValue(t.Address(), actions))
	}
	for _, t := range cfg.ProposedTasks {
		if blocks[t.Name] == nil {
			add(t.Name, false, o.taskValue("", actions))
		}
	}
	tasks := map[string]cty.Value{}
	for _, name := range order {
		b := blocks[name]
		if b.counted {
			tasks[name] = cty.TupleVal(b.instances)
		} else {
			tasks[name] = b.instances[0]
		}
	}
	pools := map[string]cty.Value{}
	for _, p := range cfg.Pools {
		pools[p.Name] = cty.ObjectVal(map[string]cty.Value{
			"launched": cty.NumberIntVal(int64(o.Launched[p.Name])),
			"provider": cty.StringVal(p.Provider),
		})
	}
	vars := map[string]cty.Value{}
	for name, v := range cfg.Variables {
		val, _ := v.Value.UnmarkDeep()
		vars[name] = val
	}
	var props []cty.Value
	for _, p := range o.Proposals {
		props = append(props, cty.ObjectVal(map[string]cty.Value{
			"id":     cty.NumberIntVal(p.ID),
			"status": cty.StringVal(string(p.Status)),
			"task":   cty.StringVal(p.Propose),
			"edge":   cty.StringVal(p.Edge),
		}))
	}
	proposals := cty.ListValEmpty(proposalType)
	if len(props) > 0 {
		proposals = cty.ListVal(props)
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"task":      objectOrEmpty(tasks),
			"pool":      objectOrEmpty(pools),
			"var":       objectOrEmpty(vars),
			"plan":      o.planValue(),
			"proposals": proposals,
		},
		Functions: wdchcl.Functions(),
	}
}

func objectOrEmpty(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// taskValue is the object of the task instance addr ("" or an address the
// state does not hold: the zero values).
func (o *Observed) taskValue(addr string, actions map[string]string) cty.Value {
	t := o.Tasks[addr]
	lost, failed, pool := 0, 0, ""
	for _, a := range o.Attempts[addr] {
		switch a.FailureClass {
		case state.FailureClassLost:
			lost++
		case state.FailureClassFailure:
			failed++
		}
		if p, ok := o.WorkerPools[a.WorkerID]; ok {
			pool = p
		}
	}
	outputs := cty.MapValEmpty(cty.String)
	if m := o.Outputs[addr]; len(m) > 0 {
		vals := map[string]cty.Value{}
		for k, v := range m {
			vals[k] = cty.StringVal(v)
		}
		outputs = cty.MapVal(vals)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"status":   cty.StringVal(string(t.Status)),
		"attempts": cty.NumberIntVal(int64(t.Attempts)),
		"lost":     cty.NumberIntVal(int64(lost)),
		"failed":   cty.NumberIntVal(int64(failed)),
		"outputs":  outputs,
		"pool":     cty.StringVal(pool),
		"action":   cty.StringVal(actions[addr]),
	})
}

// planValue is the plan object: changes (task changes), workers (to
// launch), exit_code and summary.
func (o *Observed) planValue() cty.Value {
	changes, workers, code, summary := 0, 0, PlanExitNoChanges, ""
	switch {
	case o.PlanFailed:
		code, summary = PlanExitError, "the plan has errors"
	case o.Plan != nil:
		s := o.Plan.Summary()
		changes, workers, summary = s.Total, s.WorkersToLaunch, s.String()
		if o.Plan.HasChanges() {
			code = PlanExitChanges
		}
	}
	return cty.ObjectVal(map[string]cty.Value{
		"changes":   cty.NumberIntVal(int64(changes)),
		"workers":   cty.NumberIntVal(int64(workers)),
		"exit_code": cty.NumberIntVal(int64(code)),
		"summary":   cty.StringVal(summary),
	})
}

// Failure is an assertion that did not hold, or could not be evaluated.
type Failure struct {
	// Range is the range of the assertion's condition.
	Range hcl.Range
	// Message is the error message (evaluated; its source text when it
	// could not be).
	Message string
	// Values are the references the condition makes, each once, in source
	// order, with their values.
	Values []Reference
	// Diags are the errors of evaluating the condition (none when it
	// evaluated to false).
	Diags hcl.Diagnostics
	// Fault: not an assertion but a fault block that never fired (Range
	// is the block's).
	Fault bool
}

// Reference is one reference of a condition and its value, written as HCL.
type Reference struct {
	Ref   string `json:"ref"`
	Value string `json:"value"`
}

// Assert evaluates one assertion in ctx: nil when its condition is true,
// else the Failure. src is the source of the test file (for the text of
// references and of a message that does not evaluate).
func Assert(a *wdchcl.TestAssert, ctx *hcl.EvalContext, src []byte) *Failure {
	f := &Failure{Range: a.Condition.Range(), Values: References(a.Condition, ctx, src)}
	f.Message = message(a.ErrorMessage, ctx, src)
	v, diags := a.Condition.Value(ctx)
	if diags.HasErrors() {
		f.Diags = diags
		return f
	}
	v, _ = v.UnmarkDeep()
	switch {
	case v.IsNull():
		f.Diags = hcl.Diagnostics{condDiag(a, "The condition is null; it must be true or false.")}
	case !v.IsKnown():
		f.Diags = hcl.Diagnostics{condDiag(a, "The condition is unknown; it must be true or false.")}
	case v.Type() != cty.Bool:
		f.Diags = hcl.Diagnostics{condDiag(a, fmt.Sprintf("The condition is %s, not a bool; it must be true or false.", v.Type().FriendlyName()))}
	case v.True():
		return nil
	}
	return f
}

func condDiag(a *wdchcl.TestAssert, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid condition", Detail: detail, Subject: a.Condition.Range().Ptr()}
}

// message evaluates an error message; its source text when it does not
// evaluate to a string.
func message(expr hcl.Expression, ctx *hcl.EvalContext, src []byte) string {
	v, diags := expr.Value(ctx)
	if !diags.HasErrors() {
		v, _ = v.UnmarkDeep()
		if v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
			return v.AsString()
		}
	}
	return sourceText(expr.Range(), src)
}

// References lists the references expr makes, each once, in source order,
// with their values in ctx written as HCL ("(error: …)" for one that does
// not evaluate).
func References(expr hcl.Expression, ctx *hcl.EvalContext, src []byte) []Reference {
	trs := expr.Variables()
	sort.SliceStable(trs, func(i, j int) bool { return trs[i].SourceRange().Start.Byte < trs[j].SourceRange().Start.Byte })
	seen := map[string]bool{}
	var out []Reference
	for _, tr := range trs {
		ref := sourceText(tr.SourceRange(), src)
		if seen[ref] {
			continue
		}
		seen[ref] = true
		v, diags := tr.TraverseAbs(ctx)
		text := ""
		if diags.HasErrors() {
			text = "(error: " + strings.TrimSuffix(diags[0].Detail, ".") + ")"
			if diags[0].Detail == "" {
				text = "(error: " + diags[0].Summary + ")"
			}
		} else {
			text = FormatValue(v)
		}
		out = append(out, Reference{Ref: ref, Value: text})
	}
	return out
}

// FormatValue writes v as HCL, on one line.
func FormatValue(v cty.Value) string {
	v, _ = v.UnmarkDeep()
	if !v.IsWhollyKnown() {
		return "(unknown)"
	}
	s := string(hclwrite.TokensForValue(v).Bytes())
	return strings.Join(strings.Fields(s), " ")
}

// sourceText is the text of rng in src, or the range itself when src
// does not hold it.
func sourceText(rng hcl.Range, src []byte) string {
	if rng.Start.Byte >= 0 && rng.End.Byte <= len(src) && rng.Start.Byte <= rng.End.Byte {
		return string(src[rng.Start.Byte:rng.End.Byte])
	}
	return rng.String()
}
