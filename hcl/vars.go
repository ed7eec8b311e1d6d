package hcl

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

type variableBody struct {
	Type        *hcl.Attribute `hcl:"type,optional"`
	Default     *hcl.Attribute `hcl:"default,optional"`
	Description *hcl.Attribute `hcl:"description,optional"`
	Sensitive   *hcl.Attribute `hcl:"sensitive,optional"`
}

// varDecl is a declared variable while values are being gathered.
type varDecl struct {
	v        *Variable
	defaults *typeexpr.Defaults
	ok       bool // declaration decoded without errors
	set      bool // a value was given from outside
}

// variables decodes the variable blocks and resolves their values:
// default < WDC_VAR_NAME < --var-file files < --var flags.
func (l *loader) variables(blocks hcl.Blocks, in Inputs) {
	decls, order := l.declareVariables(blocks)
	failed := l.inputVariables(decls, in)
	l.resolveVariables(decls, order, failed)
}

// declareVariables decodes the variable blocks: the declarations by name,
// and their names in declaration order.
func (l *loader) declareVariables(blocks hcl.Blocks) (map[string]*varDecl, []string) {
	decls := map[string]*varDecl{}
	var order []string
	for _, b := range blocks {
		if d := validName("variable", b); d != nil {
			l.add(d)
			continue
		}
		name := b.Labels[0]
		if prev, ok := decls[name]; ok {
			l.add(duplicate("variable", b, prev.v.DeclRange))
			continue
		}
		v := &Variable{Name: name, Type: cty.DynamicPseudoType, DeclRange: b.DefRange, Value: cty.DynamicVal}
		d := &varDecl{v: v, ok: true}
		decls[name] = d
		order = append(order, name)
		l.cfg.Variables[name] = v
		l.ev.declared[name] = true
		d.ok = l.declareVariable(b, d)
	}
	return decls, order
}

// declareVariable decodes one variable block into d: its type, description,
// sensitivity and default. It returns false when the declaration has
// errors that leave the variable without a usable type or default.
func (l *loader) declareVariable(b *hcl.Block, d *varDecl) bool {
	v := d.v
	var body variableBody
	if diags := gohcl.DecodeBody(b.Body, nil, &body); diags.HasErrors() {
		l.add(suggestNames(diags, impliedSchema(&body, diags))...)
		return false
	}
	if body.Type != nil {
		ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(body.Type.Expr)
		l.add(diags...)
		if diags.HasErrors() {
			return false
		}
		v.Type, d.defaults = ty, defaults
	}
	if body.Description != nil {
		s, diags := staticValue(body.Description, cty.String)
		l.add(diags...)
		if !diags.HasErrors() && !s.IsNull() {
			v.Description = s.AsString()
		}
	}
	if body.Sensitive != nil {
		s, diags := staticValue(body.Sensitive, cty.Bool)
		l.add(diags...)
		if !diags.HasErrors() && !s.IsNull() {
			v.Sensitive = s.True()
			if v.Sensitive {
				l.sensitiveVars++
			}
		}
	}
	if body.Default == nil {
		return true
	}
	val, diags := body.Default.Expr.Value(nil)
	l.add(diags...)
	if diags.HasErrors() {
		return false
	}
	cv, err := d.convert(val)
	if err != nil {
		l.add(attrErr(body.Default, "Invalid default value for variable",
			fmt.Sprintf("The default value of variable %q does not match its type %s: %s.", v.Name, typeexpr.TypeString(v.Type), err)))
		return false
	}
	v.Default, v.HasDefault, v.Value = cv, true, cv
	return true
}

// failedInputs names the variables an input that failed may have been
// meant to set: their "No value for required variable" errors would only
// mislead. all is set when the failing input cannot be attributed (an
// unreadable or malformed var file, a --var without a name).
type failedInputs struct {
	names map[string]bool
	all   bool
}

// inputVariables sets the declared variables from the inputs, in
// increasing precedence: WDC_VAR_NAME environment variables (undeclared
// ones are ignored), --var-file files, --var flags.
func (l *loader) inputVariables(decls map[string]*varDecl, in Inputs) failedInputs {
	failed := failedInputs{names: map[string]bool{}}
	for _, kv := range in.Environ {
		if !strings.HasPrefix(kv, EnvVarPrefix) {
			continue
		}
		name, raw, ok := strings.Cut(strings.TrimPrefix(kv, EnvVarPrefix), "=")
		d := decls[name]
		if !ok || d == nil {
			continue
		}
		l.setRaw(d, raw, EnvVarPrefix+name)
	}
	for _, path := range in.VarFiles {
		names, all := l.varFile(path, decls)
		for _, n := range names {
			failed.names[n] = true
		}
		failed.all = failed.all || all
	}
	for _, kv := range in.Vars {
		l.varFlag(decls, kv, &failed)
	}
	for _, a := range in.TestVariables {
		if !l.testVariable(decls, a) {
			failed.names[a.Name] = true
		}
	}
	return failed
}

// varFlag sets a variable from a --var NAME=VALUE flag.
func (l *loader) varFlag(decls map[string]*varDecl, kv string, failed *failedInputs) {
	name, raw, ok := strings.Cut(kv, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid --var option",
			Detail:   fmt.Sprintf("The value %q is not of the form NAME=VALUE.", kv),
		})
		if name == "" {
			failed.all = true
		} else {
			failed.names[name] = true
		}
		return
	}
	d := decls[name]
	if d == nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Value for undeclared variable",
			Detail: fmt.Sprintf("--var sets a variable named %q, but no variable %q is declared in the configuration.%s Declare it with a variable %q { } block.",
				name, name, didYouMean(name, mapKeys(decls)), name),
		})
		return
	}
	l.setRaw(d, raw, "--var "+name)
}

// testVariable sets a variable from an attribute of a test run's
// variables block; false when it could not.
func (l *loader) testVariable(decls map[string]*varDecl, a *hcl.Attribute) bool {
	d := decls[a.Name]
	if d == nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Value for undeclared variable",
			Detail: fmt.Sprintf("The test run sets a variable named %q, but no variable %q is declared in the configuration.%s",
				a.Name, a.Name, didYouMean(a.Name, mapKeys(decls))),
			Subject: a.NameRange.Ptr(),
		})
		return false
	}
	if !d.ok {
		return false
	}
	val, vd := a.Expr.Value(nil)
	l.add(vd...)
	if vd.HasErrors() {
		d.ok = false
		return false
	}
	cv, err := d.convert(val)
	if err != nil {
		l.add(attrErr(a, fmt.Sprintf("Invalid value for variable %q", a.Name),
			fmt.Sprintf("The value of variable %q is not %s: %s.", a.Name, typeArticle(d.v.Type), err)))
		d.ok = false
		return false
	}
	d.v.Value, d.set = cv, true
	return true
}

// resolveVariables gives expressions the final value of every declared
// variable, reporting the required ones that got none (unless a failed
// input may have been meant to set them); a variable without a usable
// value is unknown to expressions.
func (l *loader) resolveVariables(decls map[string]*varDecl, order []string, failed failedInputs) {
	for _, name := range order {
		d := decls[name]
		if !d.ok {
			continue
		}
		if !d.set && !d.v.HasDefault {
			if failed.names[name] || failed.all {
				continue
			}
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "No value for required variable",
				Detail: fmt.Sprintf("The variable %q has no default, so it needs a value: use --var %s=VALUE, a --var-file, or the environment variable %s%s.",
					name, name, EnvVarPrefix, name),
				Subject: d.v.DeclRange.Ptr(),
			})
			continue
		}
		l.ev.vars[name] = d.v.Value
	}
	for _, name := range order {
		if _, ok := l.ev.vars[name]; !ok {
			l.ev.vars[name] = cty.DynamicVal
		}
	}
}

// staticValue evaluates an expression that may not reference anything.
func staticValue(attr *hcl.Attribute, ty cty.Type) (cty.Value, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return cty.NullVal(ty), diags
	}
	cv, err := convert.Convert(v, ty)
	if err != nil || !cv.IsWhollyKnown() {
		msg := "value must be known"
		if err != nil {
			msg = err.Error()
		}
		return cty.NullVal(ty), append(diags, attrErr(attr, "Incorrect attribute value type",
			fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, msg)))
	}
	return cv, diags
}

func (d *varDecl) convert(val cty.Value) (cty.Value, error) {
	if d.defaults != nil && !val.IsNull() && val.IsWhollyKnown() {
		val = d.defaults.Apply(val)
	}
	cv, err := convert.Convert(val, d.v.Type)
	if err != nil {
		return cty.NilVal, err
	}
	if cv.ContainsMarked() {
		cv, _ = cv.UnmarkDeep()
	}
	return cv, nil
}

// setRaw sets a variable from a string given outside HCL (environment or
// --var). For a variable of type string the text is the value. For other
// types it is parsed as an HCL expression; for a variable with no type, a
// text that is not a literal HCL value is taken as a string.
func (l *loader) setRaw(d *varDecl, raw, source string) {
	if !d.ok {
		return
	}
	if d.v.Type == cty.String {
		d.v.Value, d.set = cty.StringVal(raw), true
		return
	}
	// The text gets a pseudo file, so diagnostics can show it. A variable
	// set twice by the same kind of input gets a second, distinct file.
	fname := fmt.Sprintf("<value of %s>", source)
	for n := 2; l.parser.Files()[fname] != nil; n++ {
		fname = fmt.Sprintf("<value of %s, occurrence %d>", source, n)
	}
	src := []byte(raw)
	shown := raw // what messages may repeat of the value
	if d.v.Sensitive {
		shown = "(sensitive)" // no snippet and no echo of a sensitive value
	} else {
		l.parser.AddFile(fname, &hcl.File{Body: hcl.EmptyBody(), Bytes: src})
	}
	expr, diags := hclsyntax.ParseExpression(src, fname, hcl.InitialPos)
	rng := hcl.Range{Filename: fname, Start: hcl.InitialPos, End: hcl.InitialPos}
	if expr != nil {
		rng = expr.Range()
	}
	var val cty.Value
	if !diags.HasErrors() {
		var vd hcl.Diagnostics
		val, vd = expr.Value(nil)
		diags = append(diags, vd...)
	}
	if diags.HasErrors() && d.v.Type == cty.DynamicPseudoType {
		d.v.Value, d.set = cty.StringVal(raw), true
		return
	}
	var reason string
	if diags.HasErrors() {
		reason = rawReason(shown, d.v.Type, diags)
	} else if cv, err := d.convert(val); err != nil {
		reason = fmt.Sprintf("%q is not %s: %s", shown, typeArticle(d.v.Type), err)
	} else {
		d.v.Value, d.set = cv, true
		return
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid value for variable %q", d.v.Name),
		Detail:   fmt.Sprintf("The value of %s is invalid: %s.", source, reason),
		Subject:  rng.Ptr(),
	})
	d.ok = false
}

// rawReason explains why the text of a --var or WDC_VAR_ value is not
// a valid HCL value of type ty.
func rawReason(raw string, ty cty.Type, diags hcl.Diagnostics) string {
	if ty.IsPrimitiveType() {
		// "abc" for a number parses as a reference: saying so would only
		// confuse. What matters is that it is not a number.
		hint := ""
		if ty == cty.Bool {
			hint = " (write true or false)"
		}
		return fmt.Sprintf("%q is not %s%s", raw, typeArticle(ty), hint)
	}
	var first *hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			first = d
			break
		}
	}
	why := ""
	switch {
	case first == nil:
	case first.Summary == "Variables not allowed" || first.Summary == "Function calls not allowed":
		why = "it must be a literal value, without references or function calls; quote strings, as in [\"a\", \"b\"]"
	default:
		why = strings.TrimSuffix(first.Summary+": "+first.Detail, ".")
	}
	msg := fmt.Sprintf("%q is not a valid %s value", raw, typeexpr.TypeString(ty))
	if why != "" {
		msg += ": " + why
	}
	return msg
}

// typeArticle names a type for a message: "a number", "a bool",
// "a list(string)".
func typeArticle(ty cty.Type) string {
	return "a " + typeexpr.TypeString(ty)
}

// varFile reads one --var-file: HCL (or JSON, for a .json file) holding
// NAME = value attributes. It returns the names of the variables whose
// values it failed to give, and all = true when it failed in a way that
// cannot be attributed to names (unreadable or malformed file).
func (l *loader) varFile(path string, decls map[string]*varDecl) (failed []string, all bool) {
	src, err := regularfile.Read(path, MaxVarFileBytes)
	if err != nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read variables file",
			Detail:   fmt.Sprintf("The variables file %s could not be read: %s.", path, ioReason(err)),
		})
		return nil, true
	}
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = l.parser.ParseJSON(src, path)
	} else {
		f, diags = l.parser.ParseHCL(src, path)
	}
	l.add(diags...)
	if f == nil || f.Body == nil || diags.HasErrors() {
		return nil, true
	}
	attrs, diags := f.Body.JustAttributes()
	l.add(diags...)
	if diags.HasErrors() {
		// A duplicate name, a block: the file is not what was meant.
		all = true
	}
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
	for _, a := range list {
		d := decls[a.Name]
		if d == nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("The variables file %s sets a variable named %q, but no variable %q is declared in the configuration.%s",
					path, a.Name, a.Name, didYouMean(a.Name, mapKeys(decls))),
				Subject: a.NameRange.Ptr(),
			})
			continue
		}
		if !d.ok {
			continue
		}
		val, vd := a.Expr.Value(nil)
		l.add(vd...)
		if vd.HasErrors() {
			d.ok = false
			failed = append(failed, a.Name)
			continue
		}
		cv, err := d.convert(val)
		if err != nil {
			l.add(attrErr(a, fmt.Sprintf("Invalid value for variable %q", a.Name),
				fmt.Sprintf("The value of variable %q in %s is not %s: %s.", a.Name, path, typeArticle(d.v.Type), err)))
			d.ok = false
			failed = append(failed, a.Name)
			continue
		}
		d.v.Value, d.set = cv, true
	}
	return failed, all
}

// ioReason is the reason of a file error without the path, which the
// message gives already: "no such file or directory", "permission
// denied", "it is a FIFO (named pipe), not a regular file".
func ioReason(err error) string {
	var reasoned interface{ Reason() string }
	if errors.As(err, &reasoned) {
		return reasoned.Reason()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
