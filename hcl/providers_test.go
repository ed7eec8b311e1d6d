package hcl

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// testProviders are the providers the tests' configurations name: stand-ins
// named like wdc's own, so that the fixtures read like real configurations.
// Each provider package tests its own schema (providers/local,
// providers/kubernetes, providers/ray); these only take what the fixtures
// write: a local block's env, and nothing in the others.
var testProviders = map[string]ProviderSchema{
	"external":   {LaunchTimeout: 10 * time.Minute},
	"kubernetes": {LaunchTimeout: 5 * time.Minute},
	"local":      {LaunchTimeout: time.Minute, Decode: decodeTestLocal},
	"ray":        {LaunchTimeout: 5 * time.Minute},
}

// testLocal is the stand-in local provider's settings.
type testLocal struct {
	Env   map[string]string
	Range hcl.Range
}

func (s *testLocal) WritesAllowed() bool   { return false }
func (s *testLocal) BlockRange() hcl.Range { return s.Range }

func decodeTestLocal(b *ProviderBlock) ProviderSettings {
	if b.Body == nil {
		return nil
	}
	var body struct {
		Env *hcl.Attribute `hcl:"env,optional"`
	}
	if !b.DecodeBody(&body) {
		return nil
	}
	return &testLocal{Env: b.StringMap(body.Env), Range: b.DefRange}
}

// withProviders returns in with testProviders when it names none.
func withProviders(in Inputs) Inputs {
	if in.Providers == nil {
		in.Providers = testProviders
	}
	return in
}

// recorded is what the recording provider's Decode was handed.
type recorded struct {
	pool     string
	hasBody  bool
	defRange hcl.Range
}

// recordingSettings are the recording provider's settings: what its block
// evaluated to.
type recordingSettings struct {
	name, path string
	size       int
	wait       time.Duration
	on         bool
	tags       map[string]string
	ratio      cty.Value
	rng        hcl.Range
}

func (s *recordingSettings) WritesAllowed() bool   { return s.on }
func (s *recordingSettings) BlockRange() hcl.Range { return s.rng }

// TestProviderBlocks: Load hands every pool of a provider to its Decode,
// once, in order (the block's body, or nil with the end of the pool when
// it has none), evaluates the block's attributes as the language does
// everywhere (variables, locals, path.root, functions), keeps the settings
// Decode returns and reports its diagnostics where it pointed them, after
// the pool's own, with sensitive values scrubbed.
func TestProviderBlocks(t *testing.T) {
	var calls []recorded
	schema := ProviderSchema{LaunchTimeout: 42 * time.Second, Decode: func(b *ProviderBlock) ProviderSettings {
		calls = append(calls, recorded{b.Pool, b.Body != nil, b.DefRange})
		if b.Body == nil {
			b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing rec block", Subject: b.DefRange.Ptr()})
			return nil
		}
		var body struct {
			Name  *hcl.Attribute `hcl:"name"`
			Path  *hcl.Attribute `hcl:"path,optional"`
			Size  *hcl.Attribute `hcl:"size,optional"`
			Wait  *hcl.Attribute `hcl:"wait,optional"`
			On    *hcl.Attribute `hcl:"on,optional"`
			Tags  *hcl.Attribute `hcl:"tags,optional"`
			Ratio *hcl.Attribute `hcl:"ratio,optional"`
		}
		if !b.DecodeBody(&body) {
			return nil
		}
		s := &recordingSettings{name: b.String(body.Name), rng: b.DefRange}
		if p, set := b.OptionalString(body.Path); set {
			s.path = b.Path(p)
		}
		if body.Size != nil {
			s.size, _, _ = b.Int(body.Size, 1, 10)
		}
		s.wait, _ = b.Duration(body.Wait, time.Minute)
		s.on = b.Bool(body.On, false)
		s.tags = b.StringMap(body.Tags)
		if body.Ratio != nil {
			s.ratio, _ = b.Value(body.Ratio, cty.Number)
		}
		if s.name == "bad" {
			b.Report(AttrError(body.Name, "Bad name", "The name is bad."))
		}
		return s
	}}
	providers := map[string]ProviderSchema{"rec": schema, "local": testProviders["local"]}
	dir := writeDir(t, map[string]string{"main.wdc.hcl": `variable "token" {
  default   = "s3cret"
  sensitive = true
}

locals {
  team = "data"
}

pool "a" {
  provider = "rec"
  rec {
    name  = upper("x")
    path  = "sub/file"
    size  = 3
    wait  = "2s"
    on    = true
    tags  = { team = local.team, root = path.root }
    ratio = 0.5
  }
}

pool "b" {
  provider = "rec"
}

pool "c" {
  provider = "rec"
  max      = 0
  rec {
    name = "bad"
    size = 11
  }
}

pool "d" {
  provider = "rec"
  rec {
    name = "${var.token}x"
    wait = var.token
  }
}
`})
	cfg, diags := Load(dir, Inputs{Providers: providers})
	if len(calls) != 4 {
		t.Fatalf("Decode called %d times, want once per pool: %+v", len(calls), calls)
	}
	for i, want := range []recorded{{"a", true, hcl.Range{}}, {"b", false, hcl.Range{}}, {"c", true, hcl.Range{}}, {"d", true, hcl.Range{}}} {
		if calls[i].pool != want.pool || calls[i].hasBody != want.hasBody {
			t.Errorf("call %d: %+v, want pool %s with body %v", i, calls[i], want.pool, want.hasBody)
		}
	}
	if r := calls[0].defRange; r.Start.Line != 12 {
		t.Errorf("pool a's block range %v, want line 12", r)
	}
	if r := calls[1].defRange; r.Start.Line != 23 {
		t.Errorf("pool b without a block: range %v, want the pool block's (MissingItemRange), line 23", r)
	}
	a, ok := cfg.Pools[0].Settings.(*recordingSettings)
	if !ok {
		t.Fatalf("pool a's settings %T, want what Decode returned", cfg.Pools[0].Settings)
	}
	if a.name != "X" || a.path != dir+"/sub/file" || a.size != 3 || a.wait != 2*time.Second || !a.on ||
		a.tags["team"] != "data" || a.tags["root"] != dir || !a.ratio.RawEquals(cty.NumberFloatVal(0.5)) || a.rng.Start.Line != 12 {
		t.Errorf("pool a's settings %+v", a)
	}
	if cfg.Pools[0].LaunchTimeout != 42*time.Second {
		t.Errorf("launch_timeout %s, want the provider's default", cfg.Pools[0].LaunchTimeout)
	}
	if cfg.Pools[1].Settings != nil {
		t.Errorf("pool b's settings %v, want none", cfg.Pools[1].Settings)
	}
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
	}
	want := []string{
		"23:10 Missing rec block: ",
		`29:14 Value out of range: "max" must be at least 1; got 0.`,
		"31:12 Bad name: The name is bad.",
		`32:12 Value out of range: "size" must be at most 10; got 11.`,
		`40:12 Invalid duration: "(sensitive)" is not a duration: write a number and a unit, such as "90s", "10m" or "1h30m".`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProviderWithoutSettings: a provider without Decode takes an empty
// block only, and its pools have no settings.
func TestProviderWithoutSettings(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.wdc.hcl": "pool \"e\" {\n  provider = \"external\"\n  external {\n  }\n}\n\npool \"f\" {\n  provider = \"external\"\n  external {\n    x = 1\n  }\n}\n"})
	cfg, diags := Load(dir, Inputs{Providers: testProviders})
	if len(diags) != 1 || diags[0].Subject.Start.Line != 10 || !strings.Contains(diags[0].Detail, `An argument named "x" is not expected here`) {
		t.Errorf("diagnostics %v, want one on line 10", diags)
	}
	if cfg.Pools[0].Settings != nil || cfg.Pools[0].LaunchTimeout != 10*time.Minute {
		t.Errorf("pool e: settings %v, launch_timeout %s", cfg.Pools[0].Settings, cfg.Pools[0].LaunchTimeout)
	}
}

// TestNoProviders: with an empty set of providers every pool names an
// unknown one; without any (nil) provider names are not checked, and no
// provider block is taken.
func TestNoProviders(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.wdc.hcl": "pool \"p\" {\n  provider = \"local\"\n}\n"})
	_, diags := Load(dir, Inputs{Providers: map[string]ProviderSchema{}})
	if len(diags) != 1 || diags[0].Summary != "Unknown provider" || !strings.Contains(diags[0].Detail, "No provider is available.") {
		t.Errorf("diagnostics %v", diags)
	}
	cfg, diags := Load(dir, Inputs{})
	if len(diags) != 0 || cfg.Pools[0].Provider != "local" || cfg.Pools[0].Settings != nil || cfg.Pools[0].LaunchTimeout != 0 {
		t.Errorf("unchecked: %v, %+v", diags, cfg.Pools[0])
	}
	dir = writeDir(t, map[string]string{"main.wdc.hcl": "pool \"p\" {\n  provider = \"\"\n}\n\npool \"q\" {\n  provider = \"x\"\n  x {\n  }\n}\n"})
	_, diags = Load(dir, Inputs{})
	if len(diags) != 2 || diags[0].Summary != "Missing provider" || diags[1].Subject.Start.Line != 7 {
		t.Errorf("unchecked: %v, want an empty provider and the block refused", diags)
	}
}
