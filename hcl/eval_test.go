package hcl

import (
	"os"
	"path/filepath"
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

// TestNoReferences checks that noReferences is true only for expressions
// whose Variables are empty, and true for the usual literal shapes.
func TestNoReferences(t *testing.T) {
	for src, want := range map[string]bool{
		`1`: true, `"a"`: true, `null`: true, `true`: true, `[]`: true, `{}`: true,
		`["true", "1"]`: true, `{ slot = "1" }`: true, `{ "a b" = "c", d = ["e", 2] }`: true,
		`{ null = 1, true = 2 }`: true, "<<EOT\nx\nEOT\n": true, `[["a"], { b = { c = "d" } }]`: true,
		`"a${"b"}"`: true, `"${x}"`: false, `"a${x}"`: false, `x`: false, `var.a`: false, `[count.index]`: false,
		`{ a = b }`: false, `{ (k) = 1 }`: false, `{ (slot) = 1 }`: false, `{ "${k}" = 1 }`: false,
		`{ a.b = 1 }`: false, `upper("a")`: false, `1 + 1`: false, `[for s in x: s]`: false,
		`"%{ if true }a%{ endif }"`: false, `-1`: false, `("a")`: false,
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		got := noReferences(expr)
		if got && len(expr.Variables()) > 0 {
			t.Errorf("%s: noReferences is true, but it refers to %d variables", src, len(expr.Variables()))
		}
		if got != want {
			t.Errorf("%s: noReferences is %v, want %v", src, got, want)
		}
	}
	// Every expression of the test configurations.
	files, _ := filepath.Glob("testdata/*/*/*.wdc.hcl")
	n := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		hclsyntax.VisitAll(f.Body.(*hclsyntax.Body), func(node hclsyntax.Node) hcl.Diagnostics {
			if expr, ok := node.(hclsyntax.Expression); ok {
				n++
				if noReferences(expr) && len(expr.Variables()) > 0 {
					t.Errorf("%s: noReferences is true, but it refers to %v", expr.Range(), expr.Variables())
				}
			}
			return nil
		})
	}
	if n < 100 {
		t.Fatalf("only %d expressions checked", n)
	}
}

// FuzzNoReferences checks that noReferences is true only for expressions
// that refer to no variable.
func FuzzNoReferences(f *testing.F) {
	for _, src := range []string{`["a", 1]`, `{ a = "b", "c" = [null] }`, `{ (a) = 1 }`, `"a${b}"`, "<<EOT\n${x}\nEOT\n"} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			return
		}
		if noReferences(expr) && len(expr.Variables()) > 0 {
			t.Fatalf("%s: noReferences is true, but it refers to %v", src, expr.Variables())
		}
	})
}
