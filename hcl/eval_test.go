package hcl

import (
	"reflect"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// TestStringsUnconverted checks that stringList and stringMap, which read
// a tuple or object of strings without converting it, give what they give
// for the converted list or map.
func TestStringsUnconverted(t *testing.T) {
	ev := &evaluator{vars: map[string]cty.Value{"s": cty.NullVal(cty.String)}, declared: map[string]bool{"s": true},
		locals: map[string]cty.Value{}, localDecl: map[string]bool{}, funcs: functions()}
	ev.freeze()
	attr := func(src string) *hcl.Attribute {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return &hcl.Attribute{Name: "a", Expr: expr}
	}
	// want converts as typed did before it read tuples and objects as they are.
	want := func(src string, ty cty.Type) cty.Value {
		v, diags := attr(src).Expr.Value(ev.ctx(scope{}))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		cv, err := convert.Convert(v, ty)
		if err != nil {
			t.Fatal(err)
		}
		return cv
	}
	for _, src := range []string{`[]`, `["a"]`, `["a", "b", "a"]`, `["a", 1, true]`, `[var.s]`, `tolist(["x"])`, `["${1 + 1}"]`} {
		got, ok, diags := ev.stringList(attr(src), scope{})
		cv := want(src, cty.List(cty.String))
		var exp []string
		expOK := true
		for it := cv.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() {
				exp, expOK = nil, false
				break
			}
			exp = append(exp, e.AsString())
		}
		if expOK && exp == nil {
			exp = []string{}
		}
		if !reflect.DeepEqual(got, exp) || ok != expOK || diags.HasErrors() == expOK {
			t.Errorf("%s: stringList gives %#v, %v, %v; want %#v, %v", src, got, ok, diags, exp, expOK)
		}
	}
	for _, src := range []string{`{}`, `{ a = "x" }`, `{ a = "x", "b c" = "y" }`, `{ a = 1, b = true }`, `{ a = var.s }`, `tomap({ a = "x" })`} {
		got, diags := ev.stringMap(attr(src), scope{})
		cv := want(src, cty.Map(cty.String))
		exp := map[string]string{}
		for it := cv.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsNull() {
				exp = map[string]string{}
				break
			}
			exp[k.AsString()] = e.AsString()
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("%s: stringMap gives %#v, %v; want %#v", src, got, diags, exp)
		}
	}
}
