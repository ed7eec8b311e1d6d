package hcl

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// unknownDetail marks diagnostics that only repeat an earlier error (an
// expression whose inputs failed evaluates to an unknown value). Load drops
// them when any other error exists.
const unknownDetail = "value must be known"

// functions is the function table every expression sees. It is the
// Terraform-like subset that go-cty's stdlib offers, plus try and can.
func functions() map[string]function.Function {
	return map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"can":             tryfunc.CanFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"csvdecode":       stdlib.CSVDecodeFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatdate":      stdlib.FormatDateFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      stdlib.JSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           stdlib.RangeFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strlen":          stdlib.StrlenFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"timeadd":         stdlib.TimeAddFunc,
		"title":           stdlib.TitleFunc,
		"tobool":          stdlib.MakeToFunc(cty.Bool),
		"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":        stdlib.MakeToFunc(cty.String),
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"try":             tryfunc.TryFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
	}
}

// scope says which names an expression may reference.
type scope struct {
	counted bool // count.index is available
	index   int  // value of count.index when counted
	// proposed is set in a proposed_only task: proposal is the value of
	// the proposal object ({input, source}).
	proposed bool
	proposal cty.Value
	// checking is set when a proposed_only task is checked at load time,
	// with an unknown proposal: unknown results are not errors.
	checking bool
}

// evaluator holds the values every expression can see.
type evaluator struct {
	dir       string
	vars      map[string]cty.Value
	declared  map[string]bool // declared variable names
	locals    map[string]cty.Value
	localDecl map[string]bool // declared local names
	funcs     map[string]function.Function
	// cache holds the results of expressions of counted tasks that do not
	// use count: they are the same for every instance.
	cache map[hcl.Expression]cachedValue
	// base is the context of the uncounted scope, built once by freeze
	// when the variables and locals hold their final values; nil before.
	base *hcl.EvalContext
}

// freeze is called once vars and locals hold their final values: from
// then on every expression of the uncounted scope shares one context
// instead of building the var and local objects again.
func (e *evaluator) freeze() {
	e.base = nil
	e.base = e.ctx(scope{})
}

type cachedValue struct {
	v     cty.Value
	diags hcl.Diagnostics
}

func usesCount(expr hcl.Expression) bool {
	for _, tr := range expr.Variables() {
		if tr.RootName() == "count" {
			return true
		}
	}
	return false
}

func (e *evaluator) ctx(sc scope) *hcl.EvalContext {
	if e.base != nil {
		if !sc.counted && !sc.proposed {
			return e.base
		}
		vars := maps.Clone(e.base.Variables)
		if sc.counted {
			vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(sc.index))})
		}
		if sc.proposed {
			vars["proposal"] = sc.proposal
		}
		return &hcl.EvalContext{Variables: vars, Functions: e.funcs}
	}
	vars := map[string]cty.Value{
		"var":   objectOf(e.vars),
		"local": objectOf(e.locals),
		"path":  cty.ObjectVal(map[string]cty.Value{"root": cty.StringVal(e.dir)}),
	}
	if sc.counted {
		vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(sc.index))})
	}
	if sc.proposed {
		vars["proposal"] = sc.proposal
	}
	return &hcl.EvalContext{Variables: vars, Functions: e.funcs}
}

func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// traversalStep returns the attribute name that follows the root of a
// traversal (x in var.x or var["x"]).
func traversalStep(tr hcl.Traversal) (string, bool) {
	if len(tr) < 2 {
		return "", false
	}
	switch s := tr[1].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

// checkRefs reports every reference of expr that the scope cannot resolve,
// with a message more useful than the generic one HCL would give.
func (e *evaluator) checkRefs(expr hcl.Expression, sc scope) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		rng := tr.SourceRange()
		root := tr.RootName()
		name, ok := traversalStep(tr)
		switch root {
		case "var":
			if !ok {
				diags = append(diags, refErr(rng, "Invalid reference", `The "var" object must be followed by a variable name, as in var.NAME.`))
			} else if !e.declared[name] {
				diags = append(diags, refErr(rng, "Reference to undeclared input variable",
					fmt.Sprintf("An input variable named %q is not declared.%s Declare it with a variable %q { } block.", name, didYouMean(name, mapKeys(e.declared)), name)))
			}
		case "local":
			if !ok {
				diags = append(diags, refErr(rng, "Invalid reference", `The "local" object must be followed by a local value name, as in local.NAME.`))
			} else if !e.localDecl[name] {
				diags = append(diags, refErr(rng, "Reference to undeclared local value",
					fmt.Sprintf("A local value named %q is not declared in any locals { } block.%s", name, didYouMean(name, mapKeys(e.localDecl)))))
			}
		case "path":
			if !ok || name != "root" {
				diags = append(diags, refErr(rng, "Invalid path reference",
					`The only attribute of "path" is path.root, the absolute configuration directory.`))
			}
		case "count":
			if !sc.counted {
				diags = append(diags, refErr(rng, `Reference to "count" in non-counted context`,
					`The "count" object can only be used inside a task block whose count argument is set (and not in count itself).`))
			} else if !ok || name != "index" {
				diags = append(diags, refErr(rng, "Invalid count reference",
					`The only attribute of "count" is count.index.`))
			}
		case "task", "pool":
			diags = append(diags, refErr(rng, "Invalid reference",
				fmt.Sprintf("A %s can only be referenced in depends_on; it has no value usable in an expression.", root)))
		case "proposal":
			if !sc.proposed {
				diags = append(diags, refErr(rng, `Reference to "proposal" outside a proposed_only task`,
					`The "proposal" object is the recommendation a proposed_only task runs for; it can only be used in a task block with proposed_only = true, as proposal.input.KEY, proposal.source.task or proposal.source.attempt.`))
			} else if !ok || (name != "input" && name != "source") {
				diags = append(diags, refErr(rng, "Invalid proposal reference",
					`The attributes of "proposal" are proposal.input (the recommendation's input, as in proposal.input.KEY) and proposal.source (proposal.source.task and proposal.source.attempt).`))
			}
		default:
			also := "in a counted task, count.index"
			if sc.proposed {
				also = "proposal.input.KEY, proposal.source.task and proposal.source.attempt"
			}
			diags = append(diags, refErr(rng, "Unknown variable",
				fmt.Sprintf("There is no object named %q. Expressions can use var.NAME, local.NAME, path.root and %s.", root, also)))
		}
	}
	return diags
}

// noReferences reports that expr refers to no variable, for the shapes
// literal values are written in: literals, strings without
// interpolations, and lists and objects (with name or literal keys) of
// them. It returns false for any other shape, so the caller asks
// expr.Variables(), which walks the expression with more allocation than
// these checks.
func noReferences(expr hcl.Expression) bool {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateExpr:
		for _, part := range e.Parts {
			if !noReferences(part) {
				return false
			}
		}
		return true
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			if !noReferences(x) {
				return false
			}
		}
		return true
	case *hclsyntax.ObjectConsExpr:
		for _, item := range e.Items {
			if !noReferences(item.KeyExpr) || !noReferences(item.ValueExpr) {
				return false
			}
		}
		return true
	case *hclsyntax.ObjectConsKeyExpr:
		// A key that is a name ({ slot = ... }) is a string, not a
		// reference: Variables does not look into it either.
		return (!e.ForceNonLiteral && hcl.ExprAsKeyword(e.Wrapped) != "") || noReferences(e.Wrapped)
	}
	return false
}

func refErr(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}

// eval evaluates expr in scope. When the references are bad it does not
// evaluate, and returns cty.DynamicVal with the errors.
func (e *evaluator) eval(expr hcl.Expression, sc scope) (cty.Value, hcl.Diagnostics) {
	if !sc.counted || usesCount(expr) {
		return e.evalNow(expr, sc)
	}
	if c, ok := e.cache[expr]; ok {
		return c.v, c.diags
	}
	v, diags := e.evalNow(expr, sc)
	if e.cache == nil {
		e.cache = map[hcl.Expression]cachedValue{}
	}
	e.cache[expr] = cachedValue{v, diags}
	return v, diags
}

func (e *evaluator) evalNow(expr hcl.Expression, sc scope) (cty.Value, hcl.Diagnostics) {
	if noReferences(expr) {
		// checkRefs would find nothing to check.
	} else if diags := e.checkRefs(expr, sc); diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	v, diags := expr.Value(e.ctx(sc))
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	if v.ContainsMarked() {
		v, _ = v.UnmarkDeep()
	}
	return v, diags
}

// typed evaluates attr and converts the result to ty. ok is false when
// there were errors or the value is unknown. A null value is returned as is
// (null means "not set" for optional arguments). A tuple of strings, for
// list(string), and an object of strings, for map(string), are returned
// unconverted: they have the same elements, and stringList and stringMap
// read them alike.
func (e *evaluator) typed(attr *hcl.Attribute, sc scope, ty cty.Type) (cty.Value, bool, hcl.Diagnostics) {
	v, diags := e.eval(attr.Expr, sc)
	if diags.HasErrors() {
		return cty.DynamicVal, false, diags
	}
	if !v.IsWhollyKnown() {
		if !sc.checking {
			return cty.DynamicVal, false, append(diags, unknownErr(attr))
		}
		// A proposed_only task checked with an unknown proposal: the
		// value is not known yet, but its type may already be wrong.
		if _, err := convert.Convert(v, ty); err != nil {
			return cty.DynamicVal, false, append(diags, typeErr(e, attr, sc, err))
		}
		return cty.DynamicVal, false, diags
	}
	if v.IsNull() {
		return cty.NullVal(ty), true, diags
	}
	if ofStrings(v.Type(), ty) {
		return v, true, diags
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		return cty.DynamicVal, false, append(diags, typeErr(e, attr, sc, err))
	}
	return cv, true, diags
}

func typeErr(e *evaluator, attr *hcl.Attribute, sc scope, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity:    hcl.DiagError,
		Summary:     "Incorrect attribute value type",
		Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, err.Error()),
		Subject:     attr.Expr.Range().Ptr(),
		Context:     attr.Range.Ptr(),
		Expression:  attr.Expr,
		EvalContext: e.ctx(sc),
	}
}

// ofStrings reports whether have is a tuple type of only strings and want
// list(string), or have an object type of only strings and want
// map(string): what a literal ["a", "b"] or { k = "v" } evaluates to.
func ofStrings(have, want cty.Type) bool {
	switch {
	case have.IsTupleType() && want.Equals(listOfStrings):
		for _, t := range have.TupleElementTypes() {
			if t != cty.String {
				return false
			}
		}
		return true
	case have.IsObjectType() && want.Equals(mapOfStrings):
		for _, t := range have.AttributeTypes() {
			if t != cty.String {
				return false
			}
		}
		return true
	}
	return false
}

var listOfStrings, mapOfStrings = cty.List(cty.String), cty.Map(cty.String)

func unknownErr(attr *hcl.Attribute) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid attribute value",
		Detail:   fmt.Sprintf("The value of %q is not known: %s.", attr.Name, unknownDetail),
		Subject:  attr.Expr.Range().Ptr(),
	}
}

func attrErr(attr *hcl.Attribute, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  attr.Expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	}
}

// String evaluates an optional string attribute; set is false when the
// attribute is absent or null.
func (e *evaluator) str(attr *hcl.Attribute, sc scope) (s string, set bool, diags hcl.Diagnostics) {
	if attr == nil {
		return "", false, nil
	}
	v, ok, diags := e.typed(attr, sc, cty.String)
	if !ok || v.IsNull() {
		return "", false, diags
	}
	return v.AsString(), true, diags
}

func (e *evaluator) boolean(attr *hcl.Attribute, sc scope, def bool) (bool, hcl.Diagnostics) {
	if attr == nil {
		return def, nil
	}
	v, ok, diags := e.typed(attr, sc, cty.Bool)
	if !ok || v.IsNull() {
		return def, diags
	}
	return v.True(), diags
}

// integer evaluates an optional whole-number attribute in [min, max].
func (e *evaluator) integer(attr *hcl.Attribute, sc scope, def, min, max int) (int, bool, hcl.Diagnostics) {
	if attr == nil {
		return def, true, nil
	}
	n, null, ok, diags := e.intValue(attr, sc, min, max)
	if null || !ok {
		return def, ok, diags
	}
	return n, true, diags
}

// intValue evaluates a whole-number attribute in [min, max]; null reports
// a null value.
func (e *evaluator) intValue(attr *hcl.Attribute, sc scope, min, max int) (n int, null, ok bool, diags hcl.Diagnostics) {
	v, ok, diags := e.typed(attr, sc, cty.Number)
	if !ok {
		return 0, false, false, diags
	}
	if v.IsNull() {
		return 0, true, true, diags
	}
	i, err := wholeNumber(v.AsBigFloat())
	if err != "" {
		return 0, false, false, append(diags, attrErr(attr, "Invalid number", fmt.Sprintf("%q must be %s.", attr.Name, err)))
	}
	if i < int64(min) {
		return 0, false, false, append(diags, attrErr(attr, "Value out of range",
			fmt.Sprintf("%q must be at least %d; got %d.", attr.Name, min, i)))
	}
	if i > int64(max) {
		return 0, false, false, append(diags, attrErr(attr, "Value out of range",
			fmt.Sprintf("%q must be at most %d; got %d.", attr.Name, max, i)))
	}
	return int(i), false, true, diags
}

func wholeNumber(f *big.Float) (int64, string) {
	if !f.IsInt() {
		return 0, "a whole number"
	}
	n, acc := f.Int64()
	if acc != big.Exact || n > math.MaxInt32 || n < math.MinInt32 {
		return 0, "a whole number of reasonable size"
	}
	return n, ""
}

// duration evaluates an optional duration attribute: a string that
// time.ParseDuration accepts, greater than zero.
func (e *evaluator) duration(attr *hcl.Attribute, sc scope, def time.Duration) (time.Duration, bool, hcl.Diagnostics) {
	return e.parseDuration(attr, sc, def, false)
}

// durationZeroOK is duration for a setting where "0s" means "none" (a retry
// backoff of zero retries at once).
func (e *evaluator) durationZeroOK(attr *hcl.Attribute, sc scope, def time.Duration) (time.Duration, bool, hcl.Diagnostics) {
	return e.parseDuration(attr, sc, def, true)
}

func (e *evaluator) parseDuration(attr *hcl.Attribute, sc scope, def time.Duration, zeroOK bool) (time.Duration, bool, hcl.Diagnostics) {
	if attr == nil {
		return def, true, nil
	}
	v, ok, diags := e.typed(attr, sc, cty.String)
	if !ok {
		return def, false, diags
	}
	if v.IsNull() {
		return def, true, diags
	}
	s := v.AsString()
	if strings.TrimSpace(s) != s {
		return def, false, append(diags, attrErr(attr, "Invalid duration",
			fmt.Sprintf("%q is not a duration: remove the leading or trailing spaces.", s)))
	}
	atLeast := "greater than zero"
	if zeroOK {
		atLeast = "zero or more"
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "eEnNiI") {
		// A bare number (timeout = 30, or "30"): it lacks only the unit.
		if n < 0 || (n == 0 && !zeroOK) {
			return def, false, append(diags, attrErr(attr, "Invalid duration",
				fmt.Sprintf("%q must be %s; got %s.", attr.Name, atLeast, s)))
		}
		if n != 0 {
			return def, false, append(diags, attrErr(attr, "Invalid duration",
				fmt.Sprintf("%s is a number, not a duration: a duration is a string with a unit. Write %s = \"%ss\" for %s seconds (or \"%sm\", \"%sh\").",
					s, attr.Name, s, s, s, s)))
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		msg := fmt.Sprintf("%q is not a duration: write a number and a unit, such as \"90s\", \"10m\" or \"1h30m\".", s)
		switch {
		case durationSyntax.MatchString(s) && strings.HasPrefix(s, "-"):
			msg = fmt.Sprintf("%q must be %s; got %q.", attr.Name, atLeast, s)
		case durationSyntax.MatchString(s):
			// Well formed, yet rejected: it does not fit in a
			// time.Duration.
			msg = fmt.Sprintf("%q is too large: a duration can be at most %dh (about 292 years).", s, int64(math.MaxInt64/int64(time.Hour)))
		}
		return def, false, append(diags, attrErr(attr, "Invalid duration", msg))
	}
	if d < 0 || (d == 0 && !zeroOK) {
		return def, false, append(diags, attrErr(attr, "Invalid duration",
			fmt.Sprintf("%q must be %s; got %q.", attr.Name, atLeast, s)))
	}
	return d, true, diags
}

// durationSyntax matches what time.ParseDuration reads; a string that
// matches and still fails to parse overflows.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// stringList evaluates a list(string) attribute with no null elements.
func (e *evaluator) stringList(attr *hcl.Attribute, sc scope) ([]string, bool, hcl.Diagnostics) {
	if attr == nil {
		return nil, true, nil
	}
	v, ok, diags := e.typed(attr, sc, cty.List(cty.String))
	if !ok || v.IsNull() {
		return nil, ok, diags
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() {
			return nil, false, append(diags, attrErr(attr, "Invalid attribute value",
				fmt.Sprintf("The elements of %q must not be null.", attr.Name)))
		}
		out = append(out, ev.AsString())
	}
	return out, true, diags
}

// stringMap evaluates a map(string) attribute with no null values. The
// result is never nil.
func (e *evaluator) stringMap(attr *hcl.Attribute, sc scope) (map[string]string, hcl.Diagnostics) {
	out := map[string]string{}
	if attr == nil {
		return out, nil
	}
	v, ok, diags := e.typed(attr, sc, cty.Map(cty.String))
	if !ok || v.IsNull() {
		return out, diags
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		if ev.IsNull() {
			return map[string]string{}, append(diags, attrErr(attr, "Invalid attribute value",
				fmt.Sprintf("The value of %q for key %q must not be null.", attr.Name, k.AsString())))
		}
		out[k.AsString()] = ev.AsString()
	}
	return out, diags
}

// validName reports whether a block label can be used in an address: an
// ASCII identifier, a letter or underscore and then letters, digits,
// underscores and dashes (names end up in addresses, file paths and
// WDC_VAR_NAME environment variables).
func validName(kind string, block *hcl.Block) *hcl.Diagnostic {
	if len(block.Labels) == 0 {
		return nil
	}
	name := block.Labels[0]
	if isName(name) && len(name) <= MaxNameLength {
		return nil
	}
	why := "a name starts with an ASCII letter or underscore and holds only ASCII letters, digits, underscores and dashes"
	switch {
	case name == "":
		why = "a name must not be empty"
	case isName(name):
		why = fmt.Sprintf("a name is at most %d characters long (it names log folders on disk); this one has %d", MaxNameLength, len(name))
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail:   fmt.Sprintf("%q is not a valid %s name: %s.", name, kind, why),
		Subject:  block.LabelRanges[0].Ptr(),
	}
}

// MaxNameLength bounds pool, task and variable names: a task's address
// names its attempt log and scratch folders, and file names are limited to
// 255 bytes.
const MaxNameLength = 128

// isName reports whether s matches ^[a-zA-Z_][a-zA-Z0-9_-]*$.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Functions returns the function library of the configuration language,
// for other expressions written in it (a test's assertions).
func Functions() map[string]function.Function { return functions() }
