package hcl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/wdc-dev/wdc/protocol"
)

// Approval modes of an edge.
const (
	// ApprovalAlways: every proposal waits for someone to approve it.
	ApprovalAlways = "always"
	// ApprovalEarned: after EarnAfter consecutive approvals, proposals are
	// approved by themselves.
	ApprovalEarned = "earned"
)

// DefaultEarnAfter is earn_after's default with approval = "earned".
const DefaultEarnAfter = 5

// Edge is one edge "NAME" block: recommendations of type Type made by an
// attempt of a task From are proposals of the proposed_only task Propose.
type Edge struct {
	Name    string
	From    string // the recommending task block's name
	Type    string
	Propose string // the proposed_only task block's name
	// Input is the input's type constraint; cty.DynamicPseudoType for any.
	// It is an object type, a map type or cty.DynamicPseudoType.
	Input cty.Type
	// Approval is ApprovalAlways or ApprovalEarned.
	Approval string
	// EarnAfter is the number of consecutive approvals that earn automatic
	// approval; 0 with ApprovalAlways.
	EarnAfter int
	DeclRange hcl.Range
	// defaults are the optional(…, default) values of Input, or nil.
	defaults *typeexpr.Defaults
}

// Address returns the edge's address, "edge.NAME".
func (e *Edge) Address() string { return "edge." + e.Name }

// Hash returns the lowercase hex SHA-256 of a canonical encoding of what
// the edge does (from, type, propose, the input's type, approval and
// earn_after, and the input's optional attributes and their defaults when
// it has any; not its name or position): a changed edge starts its record of approvals again.
func (e *Edge) Hash() string {
	enc := struct {
		From      string   `json:"from"`
		Type      string   `json:"type"`
		Propose   string   `json:"propose"`
		Input     string   `json:"input"`
		Approval  string   `json:"approval"`
		EarnAfter int      `json:"earn_after"`
		Optional  []string `json:"optional,omitempty"`
		Defaults  string   `json:"defaults,omitempty"`
	}{e.From, e.Type, e.Propose, typeexpr.TypeString(e.Input), e.Approval, e.EarnAfter, optionalAttrs(e.Input, ""), defaultsString(e.defaults)}
	b, err := json.Marshal(enc)
	if err != nil {
		panic(err) // strings and an int always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// optionalAttrs lists the paths of the optional attributes of ty (which
// typeexpr.TypeString does not show), sorted: ".a", ".b[*].c".
func optionalAttrs(ty cty.Type, at string) []string {
	var out []string
	switch {
	case ty.IsObjectType():
		for name, at2 := range ty.AttributeTypes() {
			p := at + "." + name
			if ty.AttributeOptional(name) {
				out = append(out, p)
			}
			out = append(out, optionalAttrs(at2, p)...)
		}
	case ty.IsTupleType():
		for i, el := range ty.TupleElementTypes() {
			out = append(out, optionalAttrs(el, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case ty.IsCollectionType():
		out = optionalAttrs(ty.ElementType(), at+"[*]")
	}
	sort.Strings(out)
	return out
}

// defaultsString renders the defaults of a type constraint canonically
// (sorted keys, JSON values), or "" when there are none.
func defaultsString(d *typeexpr.Defaults) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	var walk func(d *typeexpr.Defaults)
	walk = func(d *typeexpr.Defaults) {
		b.WriteString("{")
		keys := make([]string, 0, len(d.DefaultValues))
		for k := range d.DefaultValues {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := d.DefaultValues[k]
			js, err := ctyjson.Marshal(v, v.Type())
			if err != nil {
				js = []byte(strconv.Quote(err.Error()))
			}
			fmt.Fprintf(&b, "%q=%s:%s;", k, typeexpr.TypeString(v.Type()), js)
		}
		keys = keys[:0]
		for k := range d.Children {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%q:", k)
			walk(d.Children[k])
			b.WriteString(";")
		}
		b.WriteString("}")
	}
	walk(d)
	return b.String()
}

// ConvertInput decodes a recommendation's input, raw JSON that must be an
// object, and converts it to the edge's Input type (applying the defaults
// of optional attributes). The error says what does not fit, as in
// `attribute "run" is required` or `at .run: string required`. It never
// panics.
func (e *Edge) ConvertInput(raw []byte) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = cty.NilVal, fmt.Errorf("the input cannot be read: %v", r)
		}
	}()
	if !json.Valid(raw) {
		return cty.NilVal, errors.New("the input is not valid JSON")
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return cty.NilVal, errors.New("the input is not a JSON object")
	}
	if err := checkJSON(raw); err != nil {
		return cty.NilVal, err
	}
	ty, err := ctyjson.ImpliedType(raw)
	if err != nil {
		return cty.NilVal, fmt.Errorf("the input cannot be read: %s", err)
	}
	v, err = ctyjson.Unmarshal(raw, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("the input cannot be read: %s", pathError(err))
	}
	if e.defaults != nil {
		v = e.defaults.Apply(v)
	}
	cv, err := convert.Convert(v, e.Input)
	if err != nil {
		return cty.NilVal, fmt.Errorf("the input does not match %s: %s", typeexpr.TypeString(e.Input), pathError(err))
	}
	// A null is no value: an attribute the type requires must have one
	// (an optional one may be null, or left out).
	if ty := e.Input; ty.IsObjectType() {
		names := make([]string, 0, len(ty.AttributeTypes()))
		for name := range ty.AttributeTypes() {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !ty.AttributeOptional(name) && cv.GetAttr(name).IsNull() {
				return cty.NilVal, fmt.Errorf("the input does not match %s: attribute %q is null, and it is required", typeexpr.TypeString(e.Input), name)
			}
		}
	}
	return cv, nil
}

// maxInputNumberLength and maxInputNumberExp bound the numbers of an
// input: rendering a number as a string (in a template, jsonencode, a
// conversion) writes all its decimal digits, and 1e-999999 has a million.
const (
	maxInputNumberLength = 1000
	maxInputNumberExp    = 1000 // decimal exponent, either way
)

// checkJSON looks through valid JSON raw for what decoding would hide or
// choke on: an object with a key twice (the value kept, the last, may not
// be the one a reviewer of the proposal read) and numbers too large, too
// small or too long to render.
func checkJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF: raw is valid JSON
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil {
			if top.wantKey {
				if tok == json.Delim('}') {
					stack = stack[:len(stack)-1]
					continue
				}
				k, _ := tok.(string)
				if top.keys[k] {
					return fmt.Errorf("the input has the key %q twice in one object", k)
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
			top.wantKey = true // tok is the value, or opens it
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if msg := checkNumber(string(t)); msg != "" {
				return errors.New(msg)
			}
		}
	}
}

// checkNumber says why a JSON number is out of bounds, or "".
func checkNumber(s string) string {
	if len(s) > maxInputNumberLength {
		return fmt.Sprintf("the input has a number of %d characters; at most %d are allowed", len(s), maxInputNumberLength)
	}
	f, _, err := big.ParseFloat(s, 10, 64, big.ToNearestEven)
	if err != nil || f.IsInf() {
		return fmt.Sprintf("the input has a number too large to read: %.40s", s)
	}
	// 2^3322 is about 10^1000.
	if exp := f.MantExp(nil); f.Sign() != 0 && (exp > 3322 || exp < -3322) {
		return fmt.Sprintf("the input has the number %.40s, beyond 1e%d in magnitude or closer to zero than 1e-%d", s, maxInputNumberExp, maxInputNumberExp)
	}
	return ""
}

// pathError renders a cty.PathError with its path first: "at .run.x:
// string required".
func pathError(err error) string {
	var pe cty.PathError
	if !errors.As(err, &pe) || len(pe.Path) == 0 {
		return err.Error()
	}
	var b strings.Builder
	for _, step := range pe.Path {
		switch s := step.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown() || s.Key.IsNull():
				b.WriteString("[?]")
			case s.Key.Type() == cty.String:
				b.WriteString("[" + strconv.Quote(s.Key.AsString()) + "]")
			case s.Key.Type() == cty.Number:
				b.WriteString("[" + s.Key.AsBigFloat().Text('f', -1) + "]")
			default:
				b.WriteString("[?]")
			}
		}
	}
	return fmt.Sprintf("at %s: %s", b.String(), pe.Error())
}

// EdgeFor returns the edge for recommendations of type typ made by the
// task block fromTask (a block name, not an instance address), or nil.
func (c *Config) EdgeFor(fromTask, typ string) *Edge {
	for _, e := range c.Edges {
		if e.From == fromTask && e.Type == typ {
			return e
		}
	}
	return nil
}

type edgeBody struct {
	From      *hcl.Attribute `hcl:"from"`
	Type      *hcl.Attribute `hcl:"type"`
	Propose   *hcl.Attribute `hcl:"propose"`
	Input     *hcl.Attribute `hcl:"input,optional"`
	Approval  *hcl.Attribute `hcl:"approval,optional"`
	EarnAfter *hcl.Attribute `hcl:"earn_after,optional"`
}

// edges decodes the edge blocks; the task blocks are decoded already.
func (l *loader) edges(blocks hcl.Blocks) {
	byName := map[string]*taskBlock{}
	for _, tb := range l.taskBlocks {
		byName[tb.name] = tb
	}
	seen := map[string]hcl.Range{}
	type key struct{ from, typ string }
	byKey := map[key]*Edge{}
	for _, b := range blocks {
		if d := claimLabel("edge", b, seen); d != nil {
			l.add(d)
			continue
		}
		e, ok := l.edge(b, byName)
		if !ok {
			continue
		}
		k := key{e.From, e.Type}
		if first := byKey[k]; first != nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Two edges for one recommendation type",
				Detail: fmt.Sprintf("edge.%s and %s (at %s) both take recommendations of type %q from task.%s; a recommendation goes to one edge, so remove or retype one of them.",
					e.Name, first.Address(), first.DeclRange, e.Type, e.From),
				Subject: e.DeclRange.Ptr(),
			})
			continue
		}
		byKey[k] = e
		l.cfg.Edges = append(l.cfg.Edges, e)
	}
}

// edge decodes one edge block; ok is false when it has errors.
func (l *loader) edge(b *hcl.Block, tasks map[string]*taskBlock) (*Edge, bool) {
	var body edgeBody
	diags := gohcl.DecodeBody(b.Body, nil, &body)
	l.add(suggestNames(diags, impliedSchema(&body, diags))...)
	if diags.HasErrors() {
		return nil, false
	}
	ok := true
	for _, a := range []struct {
		name string
		attr *hcl.Attribute
	}{{"from", body.From}, {"type", body.Type}, {"propose", body.Propose}} {
		if a.attr == nil {
			l.add(missing(a.name, b))
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	before := len(l.diags)
	e := &Edge{
		Name:      b.Labels[0],
		Input:     cty.DynamicPseudoType,
		Approval:  ApprovalAlways,
		DeclRange: b.DefRange,
	}
	var fromOK, proposeOK bool
	e.From, fromOK = l.edgeTask(body.From, tasks, false)
	e.Propose, proposeOK = l.edgeTask(body.Propose, tasks, true)

	if typ, d := staticValue(body.Type, cty.String); d.HasErrors() {
		l.add(d...)
	} else if msg := checkRecommendationType(typ); msg != "" {
		l.add(attrErr(body.Type, "Invalid recommendation type", msg))
	} else {
		e.Type = typ.AsString()
	}

	if body.Input != nil {
		ty, defaults, d := typeexpr.TypeConstraintWithDefaults(body.Input.Expr)
		l.add(d...)
		if !d.HasErrors() {
			if ty != cty.DynamicPseudoType && !ty.IsObjectType() && !ty.IsMapType() {
				l.add(attrErr(body.Input, "Invalid input type",
					fmt.Sprintf("The input's type is %s, but a recommendation's input is a JSON object: write object({ KEY = TYPE, ... }), map(TYPE) or any.", typeexpr.TypeString(ty))))
			} else {
				e.Input, e.defaults = ty, defaults
			}
		}
	}

	sc := scope{}
	if body.Approval != nil {
		a, set, d := l.ev.str(body.Approval, sc)
		l.add(d...)
		switch {
		case d.HasErrors():
		case !set:
			// null: the default
		case a == ApprovalAlways || a == ApprovalEarned:
			e.Approval = a
		default:
			l.add(attrErr(body.Approval, "Invalid approval",
				fmt.Sprintf("approval is %q; it must be %q (someone approves every proposal; the default) or %q (proposals are approved by themselves after earn_after consecutive approvals).",
					a, ApprovalAlways, ApprovalEarned)))
		}
	}
	if e.Approval == ApprovalEarned {
		n, _, d := l.ev.integer(body.EarnAfter, sc, DefaultEarnAfter, 1, math.MaxInt32)
		l.add(d...)
		e.EarnAfter = n
	} else if body.EarnAfter != nil && !l.isNull(body.EarnAfter) && !hcl.Diagnostics(l.diags[before:]).HasErrors() {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "earn_after without earned approval",
			Detail:   fmt.Sprintf("earn_after counts the approvals that earn automatic approval, so it needs approval = %q; with approval = %q every proposal waits for someone.", ApprovalEarned, ApprovalAlways),
			Subject:  body.EarnAfter.Range.Ptr(),
		})
	}
	return e, fromOK && proposeOK && !hcl.Diagnostics(l.diags[before:]).HasErrors()
}

// edgeTask resolves an edge's from (proposed false) or propose (true): a
// static task.NAME naming a declared task block, a proposed_only one for
// propose. It returns the block's name.
func (l *loader) edgeTask(attr *hcl.Attribute, tasks map[string]*taskBlock, proposed bool) (string, bool) {
	what := "from"
	if proposed {
		what = "propose"
	}
	bad := func(summary, detail string) (string, bool) {
		l.add(attrErr(attr, summary, detail))
		return "", false
	}
	tr, diags := hcl.AbsTraversalForExpr(attr.Expr)
	if diags.HasErrors() {
		return bad("Invalid "+what+" reference", fmt.Sprintf("%s must name a task block, as in %s = task.NAME.", what, what))
	}
	if tr.RootName() != "task" {
		return bad("Invalid "+what+" reference", fmt.Sprintf("%s can only name a task, not %q; write %s = task.NAME.", what, tr.RootName(), what))
	}
	if len(tr) == 3 {
		if _, ok := tr[2].(hcl.TraverseIndex); ok {
			if !proposed {
				return bad("Invalid from reference", "An edge names a whole task block: recommendations of any instance of it take the edge. Remove the index.")
			}
			return bad("Invalid propose reference", "An edge names a whole task block; a proposed_only task has no count, so remove the index.")
		}
	}
	step, ok := tr[len(tr)-1].(hcl.TraverseAttr)
	if len(tr) != 2 || !ok {
		return bad("Invalid "+what+" reference", fmt.Sprintf("The reference has the wrong shape: write %s = task.NAME.", what))
	}
	name := step.Name
	tb, found := tasks[name]
	if !found {
		return bad("Reference to undeclared task", fmt.Sprintf("%s names task.%s, but no task %q is declared.%s", what, name, name, didYouMean(name, mapKeys(tasks))))
	}
	if proposed && !tb.proposed {
		return bad("Proposing a task that is not proposed_only",
			fmt.Sprintf("task.%s is not proposed_only: the plan runs it on its own. Add proposed_only = true to it, or propose another task.", name))
	}
	if tb.failed && proposed {
		return "", false // its own errors were reported
	}
	return name, true
}

// checkRecommendationType says why a type's value cannot name a
// recommendation type, or "".
func checkRecommendationType(v cty.Value) string {
	if v.IsNull() {
		return "type must not be null; it is the type of recommendation the edge takes, as in type = \"flake\"."
	}
	s := v.AsString()
	switch {
	case s == "":
		return "type must not be empty; it is the type of recommendation the edge takes, as in type = \"flake\"."
	case len(s) > protocol.MaxRecommendationTypeLength:
		return fmt.Sprintf("type is at most %d characters long; this one has %d.", protocol.MaxRecommendationTypeLength, len(s))
	case !isName(s):
		return fmt.Sprintf("%q is not a valid recommendation type: it starts with an ASCII letter or underscore and holds only ASCII letters, digits, underscores and dashes.", s)
	}
	return ""
}

// isNull reports whether attr evaluates to null (is not set).
func (l *loader) isNull(attr *hcl.Attribute) bool {
	v, diags := l.ev.eval(attr.Expr, scope{})
	return !diags.HasErrors() && v.IsKnown() && v.IsNull()
}
