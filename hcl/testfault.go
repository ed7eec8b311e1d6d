package hcl

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
)

// Fault kinds: what a fault block of a run injects.
const (
	// FaultKillWorker: SIGKILL the worker running an attempt of a task
	// when that attempt starts.
	FaultKillWorker = "kill_worker"
	// FaultSilenceWorker: the heartbeats of the worker running an attempt
	// of a task are dropped, from its start, for a duration on the run's
	// clock, so its lease expires.
	FaultSilenceWorker = "silence_worker"
	// FaultLateResult: the lease of an attempt of a task is revoked just
	// before its result is judged, so the result arrives late.
	FaultLateResult = "late_result"
	// FaultFailLaunch: a pool's next launches fail.
	FaultFailLaunch = "fail_launch"
	// FaultDiskFull: the state's disk is full after a number of writes.
	FaultDiskFull = "disk_full"
)

// FaultKinds are the fault kinds a run may inject, in the order the
// documentation lists them.
var FaultKinds = []string{FaultKillWorker, FaultSilenceWorker, FaultFailLaunch, FaultLateResult, FaultDiskFull}

// TestFault is a fault "KIND" block of a run.
type TestFault struct {
	// Kind is one of FaultKinds.
	Kind string
	// Task is the address of the task whose attempt the fault targets,
	// "task.NAME" or "task.NAME[INDEX]" (kill_worker, silence_worker,
	// late_result), and Attempt the attempt's number (default 1).
	Task    string
	Attempt int
	// Pool is the name of the pool whose launches fail (fail_launch), and
	// Count how many of its next launches (default 1).
	Pool  string
	Count int
	// Writes is how many writes of the state succeed before its disk is
	// full (disk_full).
	Writes int
	// Duration is how long a silenced worker's heartbeats are dropped, on
	// the run's clock (silence_worker; default 1m).
	Duration time.Duration
	// TargetRange is the range of the task or pool reference.
	TargetRange hcl.Range
	DeclRange   hcl.Range
}

// String names the fault as messages do: `kill_worker of task.shard[1]
// attempt 1`, `fail_launch of pool.gpu (2 launches)`.
func (f *TestFault) String() string {
	switch f.Kind {
	case FaultFailLaunch:
		return fmt.Sprintf("%s of pool.%s (%d %s)", f.Kind, f.Pool, f.Count, map[bool]string{true: "launch", false: "launches"}[f.Count == 1])
	case FaultDiskFull:
		return fmt.Sprintf("%s of the state after %d %s", f.Kind, f.Writes, map[bool]string{true: "write", false: "writes"}[f.Writes == 1])
	}
	return fmt.Sprintf("%s of %s attempt %d", f.Kind, f.Task, f.Attempt)
}

// DefaultSilence is how long silence_worker drops heartbeats when the
// block names no duration.
const DefaultSilence = time.Minute

var faultSchemas = map[string]*hcl.BodySchema{
	FaultKillWorker:    {Attributes: []hcl.AttributeSchema{{Name: "task", Required: true}, {Name: "attempt"}}},
	FaultSilenceWorker: {Attributes: []hcl.AttributeSchema{{Name: "task", Required: true}, {Name: "attempt"}, {Name: "duration"}}},
	FaultLateResult:    {Attributes: []hcl.AttributeSchema{{Name: "task", Required: true}, {Name: "attempt"}}},
	FaultFailLaunch:    {Attributes: []hcl.AttributeSchema{{Name: "pool", Required: true}, {Name: "count"}}},
	FaultDiskFull:      {Attributes: []hcl.AttributeSchema{{Name: "after", Required: true}}},
}

// parseTestFault decodes a fault block of run; nil when it is unusable.
func parseTestFault(run string, blk *hcl.Block) (*TestFault, hcl.Diagnostics) {
	kind := blk.Labels[0]
	schema := faultSchemas[kind]
	if schema == nil {
		detail := fmt.Sprintf("Run %q has a fault %q; the fault kinds are %s.%s", run, kind, strings.Join(FaultKinds, ", "), didYouMean(kind, FaultKinds))
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unknown fault kind",
			Detail:   detail,
			Subject:  blk.LabelRanges[0].Ptr(),
		}}
	}
	c, diags := blk.Body.Content(schema)
	if diags.HasErrors() {
		return nil, diags
	}
	f := &TestFault{Kind: kind, Attempt: 1, Count: 1, Duration: DefaultSilence, DeclRange: blk.DefRange}
	ok := true
	if a := c.Attributes["task"]; a != nil {
		addr, d := faultTarget(a, "task", true)
		diags = append(diags, d...)
		f.Task, f.TargetRange, ok = addr, a.Expr.Range(), ok && !d.HasErrors()
	}
	if a := c.Attributes["pool"]; a != nil {
		name, d := faultTarget(a, "pool", false)
		diags = append(diags, d...)
		f.Pool, f.TargetRange, ok = strings.TrimPrefix(name, "pool."), a.Expr.Range(), ok && !d.HasErrors()
	}
	for _, num := range []struct {
		name string
		into *int
	}{{"attempt", &f.Attempt}, {"count", &f.Count}, {"after", &f.Writes}} {
		a := c.Attributes[num.name]
		if a == nil {
			continue
		}
		n, d := wholePositive(a, fmt.Sprintf("The %s of fault %q", num.name, kind))
		diags = append(diags, d...)
		*num.into, ok = n, ok && !d.HasErrors()
	}
	if a := c.Attributes["duration"]; a != nil {
		v, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		var dur time.Duration
		var err error
		if !d.HasErrors() {
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				err = fmt.Errorf("not a string")
			} else {
				dur, err = time.ParseDuration(v.AsString())
			}
		}
		if err != nil || (!d.HasErrors() && dur <= 0) {
			diags = append(diags, attrErr(a, "Invalid duration", fmt.Sprintf("The duration of fault %q must be a duration greater than zero, such as \"30s\" or \"5m\".", kind)))
			ok = false
		}
		f.Duration = dur
	}
	if !ok {
		return nil, diags
	}
	return f, diags
}

// faultTarget reads a fault's reference to a task (root "task": task.NAME
// or, with indexed, task.NAME[INDEX]) or a pool (pool.NAME) and returns
// it as an address.
func faultTarget(a *hcl.Attribute, root string, indexed bool) (string, hcl.Diagnostics) {
	want := root + ".NAME"
	if indexed {
		want += " or " + root + ".NAME[INDEX]"
	}
	bad := hcl.Diagnostics{attrErr(a, "Invalid fault target", fmt.Sprintf("The %s of a fault must be a reference such as %s.", root, want))}
	tr, d := hcl.AbsTraversalForExpr(a.Expr)
	if d.HasErrors() || len(tr) < 2 || tr.RootName() != root {
		return "", bad
	}
	name, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return "", bad
	}
	addr := root + "." + name.Name
	switch {
	case len(tr) == 2:
		return addr, nil
	case len(tr) == 3 && indexed:
		idx, ok := tr[2].(hcl.TraverseIndex)
		var i int
		if !ok || gocty.FromCtyValue(idx.Key, &i) != nil || i < 0 {
			return "", bad
		}
		return fmt.Sprintf("%s[%d]", addr, i), nil
	}
	return "", bad
}

// wholePositive reads a whole number ≥ 1; what names it in the error.
func wholePositive(a *hcl.Attribute, what string) (int, hcl.Diagnostics) {
	v, d := a.Expr.Value(nil)
	if d.HasErrors() {
		return 0, d
	}
	var n int
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number || gocty.FromCtyValue(v, &n) != nil || n < 1 {
		return 0, hcl.Diagnostics{attrErr(a, "Invalid number", what+" must be a whole number of at least 1.")}
	}
	return n, nil
}
