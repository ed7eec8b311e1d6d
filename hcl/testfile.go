package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// TestFileSuffix is the suffix of the test files LoadTestFiles reads.
const TestFileSuffix = ".wdctest.hcl"

// TestDir is the folder of the configuration directory whose test files
// LoadTestFiles reads too.
const TestDir = "tests"

// Test commands: what a run block carries out.
const (
	TestCommandApply = "apply"
	TestCommandPlan  = "plan"
)

// TestRoots are the names a run's assertion conditions may refer to:
// task.NAME…, pool.NAME…, plan…, proposals and var.NAME.
var TestRoots = []string{"task", "pool", "plan", "proposals", "var"}

// TestFile is one *.wdctest.hcl file: its run blocks, in order.
type TestFile struct {
	// Name is the file's path as given to the parser (relative to the
	// directory LoadTestFiles was given, joined to it).
	Name string
	// Path is the file's path relative to the configuration directory, in
	// "/" form: "main.wdctest.hcl", "tests/retry.wdctest.hcl".
	Path string
	// File is the parsed file, for diagnostics' snippets.
	File *hcl.File
	Runs []*TestRun
}

// TestRun is one run "NAME" block of a test file.
type TestRun struct {
	Name string
	// Command is TestCommandApply (the default) or TestCommandPlan.
	Command string
	// Variables are the attributes of the variables { } block, in source
	// order: the values of the configuration's variables for this run
	// (Inputs.TestVariables).
	Variables []*hcl.Attribute
	// OverridePools are the override_pool blocks, in source order.
	OverridePools []*PoolOverride
	// Asserts are the assert blocks, in source order.
	Asserts []*TestAssert
	// Faults are the fault blocks, in source order: what the run injects
	// (command = apply only).
	Faults    []*TestFault
	DeclRange hcl.Range
}

// PoolOverride is an override_pool "NAME" block: the pool's workers are
// launched by Provider instead of the provider the configuration names.
type PoolOverride struct {
	Pool      string
	Provider  string
	DeclRange hcl.Range
	// ProviderRange is the range of the provider attribute.
	ProviderRange hcl.Range
}

// TestAssert is an assert block: Condition must be true after the run;
// ErrorMessage says why it matters when it is not.
type TestAssert struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

var testFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "run", LabelNames: []string{"name"}},
	},
}

var testRunSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variables"},
		{Type: "override_pool", LabelNames: []string{"pool"}},
		{Type: "assert"},
		{Type: "fault", LabelNames: []string{"kind"}},
	},
}

var poolOverrideSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}},
}

var assertSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// LoadTestFiles reads every *.wdctest.hcl file of dir and of its tests
// folder (dir's first, each folder's sorted by name, not recursive,
// skipping hidden and editor files as Load does) and parses each with
// ParseTestFile. A missing tests folder is no error; none at all is an
// empty list. It never panics.
func LoadTestFiles(dir string) (files []*TestFile, diags hcl.Diagnostics) {
	for _, sub := range []string{"", TestDir} {
		folder := filepath.Join(dir, sub)
		entries, err := os.ReadDir(folder)
		if err != nil {
			if sub != "" && os.IsNotExist(err) {
				continue
			}
			if sub != "" {
				if fi, serr := os.Stat(folder); serr == nil && !fi.IsDir() {
					continue // a file named tests
				}
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read the test folder",
				Detail:   fmt.Sprintf("The folder %s could not be read: %s.", folder, ioReason(err)),
			})
			continue
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && IsTestFileName(e.Name()) {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			name := filepath.Join(folder, n)
			if fi, err := os.Stat(name); err == nil && fi.IsDir() {
				continue // a link to a directory
			}
			src, err := regularfile.Read(name, MaxConfigFileBytes)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cannot read test file",
					Detail:   fmt.Sprintf("The test file %s could not be read: %s.", name, ioReason(err)),
				})
				continue
			}
			f, d := ParseTestFile(src, name)
			f.Path = filepath.ToSlash(filepath.Join(sub, n))
			diags = append(diags, d...)
			files = append(files, f)
		}
	}
	return files, diags
}

// IsTestFileName reports whether a directory entry's name is a test file's
// as LoadTestFiles sees it: *.wdctest.hcl and not a hidden or editor file.
func IsTestFileName(name string) bool {
	return strings.HasSuffix(name, TestFileSuffix) && !ignoredFile(name)
}

// ParseTestFile parses the source of one test file named filename: its run
// blocks, each with its command, variables, pool overrides and asserts.
// Every error is a diagnostic with the range it is about; the references
// of conditions are checked against TestRoots here, the names they use
// against the configuration by CheckTestFile. The returned file is never
// nil, and it never panics.
func ParseTestFile(src []byte, filename string) (tf *TestFile, diags hcl.Diagnostics) {
	tf = &TestFile{Name: filename, Path: filepath.ToSlash(filepath.Base(filename))}
	defer func() {
		if r := recover(); r != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error while reading the test file",
				Detail:   fmt.Sprintf("This is a bug in wdc; please report it with the test file that caused it.\n\n%v\n\n%s", r, debug.Stack()),
			})
		}
	}()
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if f == nil {
		f = &hcl.File{Body: hcl.EmptyBody(), Bytes: src}
	}
	tf.File = f
	if f.Body == nil || diags.HasErrors() {
		// A file that does not parse is reported by its syntax errors
		// alone, not by what a partial body would add to them.
		return tf, diags
	}
	content, d := f.Body.Content(testFileSchema)
	diags = append(diags, suggestNames(d, testFileSchema)...)
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		if d := claimLabel("run", b, seen); d != nil {
			diags = append(diags, d)
			continue
		}
		run, d := parseTestRun(b)
		diags = append(diags, d...)
		tf.Runs = append(tf.Runs, run)
	}
	return tf, diags
}

// parseTestRun decodes one run block.
func parseTestRun(b *hcl.Block) (*TestRun, hcl.Diagnostics) {
	run := &TestRun{Name: b.Labels[0], Command: TestCommandApply, DeclRange: b.DefRange}
	content, diags := b.Body.Content(testRunSchema)
	diags = suggestNames(diags, testRunSchema)
	if a := content.Attributes["command"]; a != nil {
		cmd := hcl.ExprAsKeyword(a.Expr)
		if cmd == "" {
			if v, d := a.Expr.Value(nil); !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
				cmd = v.AsString()
			}
		}
		switch cmd {
		case TestCommandApply, TestCommandPlan:
			run.Command = cmd
		default:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid run command",
				Detail:   fmt.Sprintf("The command of run %q must be apply or plan.", run.Name),
				Subject:  a.Expr.Range().Ptr(),
			})
		}
	}
	var varsBlock *hcl.Block
	overrides := map[string]hcl.Range{}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "variables":
			if varsBlock != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate variables block",
					Detail:   fmt.Sprintf("Run %q already has a variables block at %s; a run has at most one.", run.Name, varsBlock.DefRange),
					Subject:  blk.DefRange.Ptr(),
				})
				continue
			}
			varsBlock = blk
			attrs, d := blk.Body.JustAttributes()
			diags = append(diags, d...)
			for _, a := range attrs {
				run.Variables = append(run.Variables, a)
			}
			sort.Slice(run.Variables, func(i, j int) bool {
				return run.Variables[i].Range.Start.Byte < run.Variables[j].Range.Start.Byte
			})
		case "override_pool":
			if d := claimLabel("override_pool", blk, overrides); d != nil {
				diags = append(diags, d)
				continue
			}
			o, d := parsePoolOverride(blk)
			diags = append(diags, d...)
			if o != nil {
				run.OverridePools = append(run.OverridePools, o)
			}
		case "assert":
			c, d := blk.Body.Content(assertSchema)
			diags = append(diags, d...)
			cond, msg := c.Attributes["condition"], c.Attributes["error_message"]
			if cond == nil || msg == nil {
				continue
			}
			diags = append(diags, checkTestRefs(cond.Expr)...)
			diags = append(diags, checkTestRefs(msg.Expr)...)
			run.Asserts = append(run.Asserts, &TestAssert{Condition: cond.Expr, ErrorMessage: msg.Expr, DeclRange: blk.DefRange})
		case "fault":
			f, d := parseTestFault(run.Name, blk)
			diags = append(diags, d...)
			if f != nil {
				run.Faults = append(run.Faults, f)
			}
		}
	}
	if run.Command == TestCommandPlan && len(run.Faults) > 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Fault in a plan run",
			Detail:   fmt.Sprintf("Run %q plans only, and nothing runs for a fault to act on; faults need command = apply.", run.Name),
			Subject:  run.Faults[0].DeclRange.Ptr(),
		})
	}
	return run, diags
}

// parsePoolOverride decodes an override_pool block; nil when it has no
// usable provider.
func parsePoolOverride(blk *hcl.Block) (*PoolOverride, hcl.Diagnostics) {
	c, diags := blk.Body.Content(poolOverrideSchema)
	a := c.Attributes["provider"]
	if a == nil {
		return nil, diags
	}
	v, d := a.Expr.Value(nil)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.String || v.AsString() == "" {
		return nil, append(diags, attrErr(a, "Invalid provider", fmt.Sprintf("The provider of override_pool %q must be a provider's name, such as \"local\".", blk.Labels[0])))
	}
	return &PoolOverride{Pool: blk.Labels[0], Provider: v.AsString(), DeclRange: blk.DefRange, ProviderRange: a.Expr.Range()}, diags
}

// checkTestRefs reports the references of expr whose root is not one of
// TestRoots.
func checkTestRefs(expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		ok := false
		for _, r := range TestRoots {
			ok = ok || r == root
		}
		if ok {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown reference in an assertion",
			Detail: fmt.Sprintf("An assertion may refer to task.NAME, pool.NAME, plan, proposals and var.NAME, not to %q.%s",
				root, didYouMean(root, TestRoots)),
			Subject: tr.SourceRange().Ptr(),
		})
	}
	return diags
}

// CheckTestFile checks a test file against the configuration it tests:
// the tasks and pools its conditions name, the pools it overrides and
// their providers, and the variables it sets. providers are the
// providers a pool may name (Inputs.Providers; nil: not checked).
func CheckTestFile(tf *TestFile, cfg *Config, providers map[string]ProviderSchema) hcl.Diagnostics {
	var diags hcl.Diagnostics
	tasks, pools := map[string]bool{}, map[string]bool{}
	for _, t := range cfg.Tasks {
		tasks[t.Name] = true
	}
	for _, t := range cfg.ProposedTasks {
		tasks[t.Name] = true
	}
	for _, p := range cfg.Pools {
		pools[p.Name] = true
	}
	if len(tf.Runs) == 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Test file without runs",
			Detail:   fmt.Sprintf("%s has no run block, so it tests nothing.", tf.Name),
			Subject:  &hcl.Range{Filename: tf.Name, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	}
	for _, run := range tf.Runs {
		for _, a := range run.Variables {
			if _, ok := cfg.Variables[a.Name]; !ok {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Value for undeclared variable",
					Detail: fmt.Sprintf("Run %q sets a variable named %q, but no variable %q is declared in the configuration.%s",
						run.Name, a.Name, a.Name, didYouMean(a.Name, mapKeys(cfg.Variables))),
					Subject: a.NameRange.Ptr(),
				})
			}
		}
		for _, o := range run.OverridePools {
			if !pools[o.Pool] {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Override of an undeclared pool",
					Detail:   fmt.Sprintf("Run %q overrides pool %q, which the configuration does not declare.%s", run.Name, o.Pool, didYouMean(o.Pool, mapKeys(pools))),
					Subject:  o.DeclRange.Ptr(),
				})
			}
			if _, ok := providers[o.Provider]; providers != nil && !ok {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Unknown provider",
					Detail:   fmt.Sprintf("Run %q overrides pool %q with provider %q, which wdc does not know.%s", run.Name, o.Pool, o.Provider, didYouMean(o.Provider, mapKeys(providers))),
					Subject:  o.ProviderRange.Ptr(),
				})
			}
		}
		for _, as := range run.Asserts {
			for _, expr := range []hcl.Expression{as.Condition, as.ErrorMessage} {
				diags = append(diags, checkTestNames(expr, tasks, pools, cfg.Variables)...)
			}
		}
	}
	return diags
}

// checkTestNames reports the references of expr to tasks, pools and
// variables the configuration does not declare.
func checkTestNames(expr hcl.Expression, tasks, pools map[string]bool, vars map[string]*Variable) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		var known map[string]bool
		kind := root
		switch root {
		case "task":
			known = tasks
		case "pool":
			known = pools
		case "var":
			known = map[string]bool{}
			for n := range vars {
				known[n] = true
			}
			kind = "variable"
		default:
			continue
		}
		name, ok := traversalStep(tr)
		if !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid reference in an assertion",
				Detail:   fmt.Sprintf("A reference to %s must name one, as in %s.NAME.", root, root),
				Subject:  tr.SourceRange().Ptr(),
			})
			continue
		}
		if !known[name] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Reference to an undeclared %s", kind),
				Detail:   fmt.Sprintf("The assertion refers to %s.%s, but the configuration declares no %s %q.%s", root, name, kind, name, didYouMean(name, mapKeys(known))),
				Subject:  tr.SourceRange().Ptr(),
			})
			continue
		}
		attrs := map[string][]string{"task": TestTaskAttributes, "pool": TestPoolAttributes}[root]
		if attr, rng, ok := firstAttribute(tr[2:]); ok && attrs != nil && !slices.Contains(attrs, attr) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported attribute",
				Detail: fmt.Sprintf("A %s in an assertion has no attribute %q; it has %s.%s", root, attr,
					strings.Join(attrs, ", "), didYouMean(attr, attrs)),
				Subject: rng.Ptr(),
			})
		}
	}
	return diags
}

// The attributes of a task (of each instance of a counted task) and of a
// pool in a test file's assertions (wdctest.EvalContext gives them).
var (
	TestTaskAttributes = []string{"status", "attempts", "lost", "failed", "outputs", "pool", "action"}
	TestPoolAttributes = []string{"launched", "provider"}
)

// firstAttribute is the first attribute step of steps (after the
// indexes of a counted task's instance).
func firstAttribute(steps hcl.Traversal) (string, hcl.Range, bool) {
	for _, st := range steps {
		switch st := st.(type) {
		case hcl.TraverseAttr:
			return st.Name, st.SrcRange, true
		case hcl.TraverseIndex, hcl.TraverseSplat:
			continue
		}
		return "", hcl.Range{}, false
	}
	return "", hcl.Range{}, false
}
