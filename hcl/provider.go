package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"
)

// ProviderSchema is what a provider tells the language about its pools: the
// default of their launch_timeout, and how their provider block is decoded.
// Load takes one per provider name from Inputs.Providers; the provider
// packages declare theirs, and package providers hands them over.
type ProviderSchema struct {
	// LaunchTimeout is the default launch_timeout of the provider's pools.
	LaunchTimeout time.Duration
	// Decode decodes and checks the provider block of one pool, against
	// the provider's own schema, and returns the pool's settings, or nil
	// when the pool has none. It reports its diagnostics on b. Load calls
	// it once for every pool that names the provider, in declaration
	// order; b.Body is nil for a pool without a block of the provider's
	// name (a provider that needs one reports it missing). Nil means the
	// provider takes no settings: a pool's block of its name must be empty.
	Decode func(b *ProviderBlock) ProviderSettings
}

// ProviderSettings are a pool's settings as its provider decoded them from
// the pool's provider block (ProviderSchema.Decode). This is all the
// language and the engine see of them; the provider's own type behind it is
// handed back to the provider with every launch of the pool.
type ProviderSettings interface {
	// WritesAllowed reports the block's allow_writes: whether apply may
	// create objects for the pool on a shared cluster. False for settings
	// of a provider that writes to no cluster.
	WritesAllowed() bool
	// BlockRange is the provider block's range, where diagnostics about
	// the pool's launches point.
	BlockRange() hcl.Range
}

// ProviderBlock is a pool's provider block (kubernetes { }, ray { },
// local { }) as Load hands it to the pool's provider: undecoded, with the
// evaluation every other block of the configuration gets (var.NAME,
// local.NAME, path.root and the functions; no count). Its evaluating
// methods report their diagnostics, in the language's words, on the block;
// Load adds them to its own, in order.
type ProviderBlock struct {
	// Pool is the pool's name.
	Pool string
	// Body is the block's body; nil when the pool has no block of its
	// provider's name.
	Body hcl.Body
	// DefRange is the range of the block's header; for a pool without
	// the block, the pool body's MissingItemRange (its opening brace),
	// where an error about the missing block points.
	DefRange hcl.Range

	dir   string
	ev    *evaluator
	diags hcl.Diagnostics
}

// Report adds diagnostics about the block.
func (b *ProviderBlock) Report(diags ...*hcl.Diagnostic) { b.diags = append(b.diags, diags...) }

// Diagnostics returns what was reported so far.
func (b *ProviderBlock) Diagnostics() hcl.Diagnostics { return b.diags }

// DecodeBody decodes the block's body into val, a pointer to a struct
// with gohcl tags (the provider's schema), as gohcl.DecodeBody does with no
// evaluation context: attributes are best declared as *hcl.Attribute and
// evaluated with the methods below. It reports the diagnostics and
// returns false when there were errors.
func (b *ProviderBlock) DecodeBody(val any) bool {
	d := gohcl.DecodeBody(b.Body, nil, val)
	b.Report(suggestNames(d, impliedSchema(val, d))...)
	return !d.HasErrors()
}

// String evaluates an optional string attribute: "" when it is absent,
// null or invalid.
func (b *ProviderBlock) String(attr *hcl.Attribute) string {
	s, _ := b.OptionalString(attr)
	return s
}

// OptionalString evaluates an optional string attribute; set is false
// when it is absent, null or invalid. Unlike the language's own string
// arguments it takes no number or bool for a string (image = 5 is an
// error at the value, not the image "5"): a provider's strings are names,
// paths and addresses, where a number is a mistake.
func (b *ProviderBlock) OptionalString(attr *hcl.Attribute) (s string, set bool) {
	if attr == nil {
		return "", false
	}
	v, ok, d := b.ev.typed(attr, scope{}, cty.DynamicPseudoType)
	b.Report(d...)
	if !ok || v.IsNull() {
		return "", false
	}
	if v.Type() != cty.String {
		b.Report(notString(attr, v))
		return "", false
	}
	return v.AsString(), true
}

// notString is the error about an attribute whose value v should have
// been a string.
func notString(attr *hcl.Attribute, v cty.Value) *hcl.Diagnostic {
	detail := fmt.Sprintf("Inappropriate value for attribute %q: a string is required, not %s.", attr.Name, v.Type().FriendlyName())
	switch v.Type() {
	case cty.Number:
		n := v.AsBigFloat().Text('f', -1)
		detail = fmt.Sprintf("Inappropriate value for attribute %q: a string is required, not the number %s; write it in quotes (\"%s\") if that is the value meant.", attr.Name, n, n)
	case cty.Bool:
		detail = fmt.Sprintf("Inappropriate value for attribute %q: a string is required, not the bool %t.", attr.Name, v.True())
	}
	return attrErr(attr, "Incorrect attribute value type", detail)
}

// Bool evaluates an optional bool attribute; def when absent or null.
func (b *ProviderBlock) Bool(attr *hcl.Attribute, def bool) bool {
	v, d := b.ev.boolean(attr, scope{}, def)
	b.Report(d...)
	return v
}

// Int evaluates a whole-number attribute in [min, max]; null reports a
// null value, ok false an invalid one.
func (b *ProviderBlock) Int(attr *hcl.Attribute, min, max int) (n int, null, ok bool) {
	n, null, ok, d := b.ev.intValue(attr, scope{}, min, max)
	b.Report(d...)
	return n, null, ok
}

// Duration evaluates an optional duration attribute ("90s", greater than
// zero); def when absent or null. ok is false for an invalid one.
func (b *ProviderBlock) Duration(attr *hcl.Attribute, def time.Duration) (time.Duration, bool) {
	v, ok, d := b.ev.duration(attr, scope{}, def)
	b.Report(d...)
	return v, ok
}

// DurationZeroOK is Duration for a setting where "0s" is allowed.
func (b *ProviderBlock) DurationZeroOK(attr *hcl.Attribute, def time.Duration) (time.Duration, bool) {
	v, ok, d := b.ev.durationZeroOK(attr, scope{}, def)
	b.Report(d...)
	return v, ok
}

// StringMap evaluates an optional map(string) attribute with no null
// values; never nil.
func (b *ProviderBlock) StringMap(attr *hcl.Attribute) map[string]string {
	m, d := b.ev.stringMap(attr, scope{})
	b.Report(d...)
	return m
}

// Value evaluates attr and converts it to ty. ok is false when there were
// errors; a null value is returned as is.
func (b *ProviderBlock) Value(attr *hcl.Attribute, ty cty.Type) (v cty.Value, ok bool) {
	v, ok, d := b.ev.typed(attr, scope{}, ty)
	b.Report(d...)
	return v, ok
}

// Path makes a path the block names absolute: "~/" is the user's home
// folder, a relative path is joined to the configuration directory.
func (b *ProviderBlock) Path(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(b.dir, p)
}

// AttrError is an error about attr's value, pointing at its expression
// within the attribute, as the language's own errors do.
func AttrError(attr *hcl.Attribute, summary, detail string) *hcl.Diagnostic {
	return attrErr(attr, summary, detail)
}

// providerNames returns the names of the providers pools may name, sorted.
func (l *loader) providerNames() []string {
	names := mapKeys(l.providers)
	sort.Strings(names)
	return names
}

// knownProviders says which providers a pool may name: "The available
// providers are: external, local."
func (l *loader) knownProviders() string {
	names := l.providerNames()
	if len(names) == 0 {
		return "No provider is available."
	}
	return "The available providers are: " + strings.Join(names, ", ") + "."
}

// providerBlockSchema allows one block per provider name in a pool.
func (l *loader) providerBlockSchema() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, n := range l.providerNames() {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: n})
	}
	return s
}

// decodeProviderBlock hands a pool's provider block (body nil when the
// pool has none) to its provider and keeps the settings it returns.
func (l *loader) decodeProviderBlock(p *Pool, schema ProviderSchema, body hcl.Body, rng hcl.Range) {
	if schema.Decode == nil {
		if body != nil {
			// Nothing to configure: the block must be empty.
			_, d := body.Content(&hcl.BodySchema{})
			l.add(d...)
		}
		return
	}
	b := &ProviderBlock{Pool: p.Name, Body: body, DefRange: rng, dir: l.cfg.Dir, ev: l.ev}
	if s := schema.Decode(b); s != nil {
		p.Settings = s
	}
	l.add(b.diags...)
}

// checkProviderName reports what is wrong with a pool's provider name
// (null, empty, unknown) and returns its schema when it is one a pool may
// name.
func (l *loader) checkProviderName(p *Pool, attr *hcl.Attribute, provider string, set bool) (ProviderSchema, bool) {
	schema, known := l.providers[provider]
	switch {
	case l.providers == nil && set && provider != "":
		return ProviderSchema{}, true // unchecked (Inputs.Providers)
	case !set:
		l.add(attrErr(attr, "Missing provider",
			fmt.Sprintf("The provider of pool %q is required; it must not be null. %s", p.Name, l.knownProviders())))
	case provider == "":
		l.add(attrErr(attr, "Missing provider",
			fmt.Sprintf("The provider of pool %q must not be empty. %s", p.Name, l.knownProviders())))
	case !known:
		l.add(attrErr(attr, "Unknown provider",
			fmt.Sprintf("There is no provider named %q.%s %s", provider, didYouMean(provider, l.providerNames()), l.knownProviders())))
	default:
		return schema, true
	}
	return ProviderSchema{}, false
}
