package hcl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
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

		var body variableBody
		if diags := gohcl.DecodeBody(b.Body, nil, &body); diags.HasErrors() {
			l.add(diags...)
			d.ok = false
			continue
		}
		if body.Type != nil {
			ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(body.Type.Expr)
			l.add(diags...)
			if diags.HasErrors() {
				d.ok = false
				continue
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
			}
		}
		if body.Default != nil {
			val, diags := body.Default.Expr.Value(nil)
			l.add(diags...)
			if diags.HasErrors() {
				d.ok = false
				continue
			}
			cv, err := d.convert(val)
			if err != nil {
				l.add(attrErr(body.Default, "Invalid default value for variable",
					fmt.Sprintf("The default value of variable %q does not match its type %s: %s.", name, typeexpr.TypeString(v.Type), err)))
				d.ok = false
				continue
			}
			v.Default, v.HasDefault, v.Value = cv, true, cv
		}
	}

	// WDC_VAR_NAME environment variables. Undeclared ones are ignored.
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

	// --var-file files.
	for _, path := range in.VarFiles {
		l.varFile(path, decls)
	}

	// --var flags.
	for i, kv := range in.Vars {
		name, raw, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid --var option",
				Detail:   fmt.Sprintf("The value %q is not of the form NAME=VALUE.", kv),
			})
			continue
		}
		d := decls[name]
		if d == nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail: fmt.Sprintf("--var sets a variable named %q, but no variable %q is declared in the configuration. Declare it with a variable %q { } block.",
					name, name, name),
			})
			continue
		}
		src := "--var " + name
		if i > 0 {
			src = fmt.Sprintf("--var %s #%d", name, i+1)
		}
		l.setRaw(d, raw, src)
	}

	for _, name := range order {
		d := decls[name]
		if !d.ok {
			continue
		}
		if !d.set && !d.v.HasDefault {
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
	name := d.v.Name
	if d.v.Type == cty.String {
		d.v.Value, d.set = cty.StringVal(raw), true
		return
	}
	fname := fmt.Sprintf("<value for %s>", source)
	src := []byte(raw)
	expr, diags := hclsyntax.ParseExpression(src, fname, hcl.InitialPos)
	l.parser.AddFile(fname, &hcl.File{Body: hcl.EmptyBody(), Bytes: src})
	var val cty.Value
	if !diags.HasErrors() {
		var vd hcl.Diagnostics
		val, vd = expr.Value(nil)
		diags = append(diags, vd...)
	}
	if diags.HasErrors() {
		if d.v.Type == cty.DynamicPseudoType {
			d.v.Value, d.set = cty.StringVal(raw), true
			return
		}
		for _, diag := range diags {
			diag.Detail = fmt.Sprintf("The value of variable %q from %s is not a valid %s value. %s",
				name, source, typeexpr.TypeString(d.v.Type), diag.Detail)
		}
		l.add(diags...)
		d.ok = false
		return
	}
	cv, err := d.convert(val)
	if err != nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value of variable %q from %s does not match its type %s: %s.", name, source, typeexpr.TypeString(d.v.Type), err),
			Subject:  expr.Range().Ptr(),
		})
		d.ok = false
		return
	}
	d.v.Value, d.set = cv, true
}

// varFile reads one --var-file: HCL (or JSON, for a .json file) holding
// NAME = value attributes.
func (l *loader) varFile(path string, decls map[string]*varDecl) {
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = l.parser.ParseJSONFile(path)
	} else {
		f, diags = l.parser.ParseHCLFile(path)
	}
	l.add(diags...)
	if f == nil || f.Body == nil || diags.HasErrors() {
		return
	}
	attrs, diags := f.Body.JustAttributes()
	l.add(diags...)
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
				Detail: fmt.Sprintf("The file %s sets a variable named %q, but no variable %q is declared in the configuration.",
					path, a.Name, a.Name),
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
			continue
		}
		cv, err := d.convert(val)
		if err != nil {
			l.add(attrErr(a, "Invalid value for variable",
				fmt.Sprintf("The value of variable %q does not match its type %s: %s.", a.Name, typeexpr.TypeString(d.v.Type), err)))
			d.ok = false
			continue
		}
		d.v.Value, d.set = cv, true
	}
}
