package hcl

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// checkExecText refuses what no process can be started with, which exec
// would refuse only when an attempt runs (or, for an env name, pass on
// wrong): a NUL character anywhere in the command, an env name or value,
// or the dir; an env name that is empty or holds "=" (the environment is
// NAME=VALUE strings, so the name "A=B" with value x reaches the task as
// A=B=x, that is the variable A). Each error points at the list element,
// the env entry or the dir as written, or at the whole attribute when its
// value is computed; a sensitive value is never shown (a sensitive env's
// names neither).
func (l *loader) checkExecText(t *Task, body *taskBody, dirValue string) {
	for i, arg := range t.Command {
		if strings.ContainsRune(arg, 0) {
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "NUL character in command",
				Detail: fmt.Sprintf("Element %d of the command of %s holds a NUL character (\\x00); no program can be given one in its arguments: remove it.",
					i, t.Address()),
				Subject: elementRange(body.Command, i, len(t.Command)).Ptr(), Context: body.Command.Range.Ptr()})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Env)) {
		shown, seen := fmt.Sprintf("%q", name), ""
		if i := strings.IndexByte(name, '='); i >= 0 {
			seen = fmt.Sprintf("the variable %q", name[:i])
		}
		if t.Sensitive.Env {
			shown, seen = "(sensitive)", "a variable named by the part before the \"=\""
		}
		key, value := entryRanges(body.Env, name)
		var summary, detail string
		subject := key
		switch {
		case name == "":
			summary, detail = "Empty env name", fmt.Sprintf("An env name of %s is empty; an environment variable needs a name.", t.Address())
		case strings.ContainsRune(name, 0):
			summary, detail = "NUL character in env", fmt.Sprintf("The env name %s of %s holds a NUL character (\\x00), which no environment can carry: remove it.", shown, t.Address())
		case strings.ContainsRune(name, '='):
			summary, detail = "Invalid env name", fmt.Sprintf("The env name %s of %s holds \"=\": an environment holds NAME=VALUE strings, so the task would see %s instead. Use a name without \"=\".",
				shown, t.Address(), seen)
		case strings.ContainsRune(t.Env[name], 0):
			summary, detail = "NUL character in env", fmt.Sprintf("The value of env %s of %s holds a NUL character (\\x00), which no environment can carry: remove it.", shown, t.Address())
			subject = value
		default:
			continue
		}
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: subject.Ptr(), Context: body.Env.Range.Ptr()})
	}
	if strings.ContainsRune(dirValue, 0) {
		l.add(attrErr(body.Dir, "NUL character in dir",
			fmt.Sprintf("The dir of %s holds a NUL character (\\x00); no directory's path can hold one: remove it.", t.Address())))
	}
}

// elementRange is the range of element i of the list attribute attr as
// written ([a, b, …] with n elements), else that of its expression.
func elementRange(attr *hcl.Attribute, i, n int) hcl.Range {
	if tuple, ok := attr.Expr.(*hclsyntax.TupleConsExpr); ok && len(tuple.Exprs) == n {
		return tuple.Exprs[i].Range()
	}
	return attr.Expr.Range()
}

// entryRanges are the ranges of the key and the value of the entry name
// of the map attribute attr as written ({ name = value, … }), else those
// of its expression.
func entryRanges(attr *hcl.Attribute, name string) (key, value hcl.Range) {
	whole := attr.Expr.Range()
	obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return whole, whole
	}
	for _, item := range obj.Items {
		k := hcl.ExprAsKeyword(item.KeyExpr)
		if k == "" {
			v, diags := item.KeyExpr.Value(nil)
			if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
				continue
			}
			k = v.AsString()
		}
		if k == name {
			return item.KeyExpr.Range(), item.ValueExpr.Range()
		}
	}
	return whole, whole
}
