package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// FileSuffix is the suffix of the configuration files Load reads.
const FileSuffix = ".wdc.hcl"

// The most Load reads of one file (docs/configuration.md, "Files"): a
// configuration file of 10,000 task blocks is about 2 MiB.
const (
	MaxConfigFileBytes = 32 << 20 // one *.wdc.hcl file
	MaxVarFileBytes    = 8 << 20  // one --var-file
)

// Inputs are the values given to a configuration from outside it.
type Inputs struct {
	// Vars are "NAME=VALUE" strings from --var flags, in order.
	Vars []string
	// VarFiles are --var-file paths, in order. Load opens them as given, so
	// a relative path is relative to the process's working directory; the
	// wdc command resolves them against the configuration directory first
	// and passes absolute paths.
	VarFiles []string
	// Environ is an os.Environ()-style list; WDC_VAR_NAME entries set
	// variables.
	Environ []string
	// Providers are the providers pools may name, by name, with what the
	// language needs of each (providers.Schemas gives wdc's): a pool that
	// names another is an error, and each pool's provider block goes to
	// its provider. Nil leaves providers unchecked, for a caller that
	// launches nothing and needs no provider's settings: a pool may name
	// any provider but have no provider block, its Settings are nil and
	// its launch_timeout has no default.
	Providers map[string]ProviderSchema
	// TestVariables are the attributes of a test run's variables { }
	// block (TestRun.Variables): values that take precedence over every
	// other input. Each is evaluated without references, as a --var-file
	// value is.
	TestVariables []*hcl.Attribute
	// PoolProviders maps a pool's name to the provider that launches its
	// workers instead of the one its block names (a test run's
	// override_pool): the pool gets that provider's defaults, and its
	// block of the provider it names is not decoded.
	PoolProviders map[string]string
}

// EnvVarPrefix prefixes environment variables that set input variables.
const EnvVarPrefix = "WDC_VAR_"

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "wdc"},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "pool", LabelNames: []string{"name"}},
		{Type: "task", LabelNames: []string{"name"}},
		{Type: "edge", LabelNames: []string{"name"}},
	},
}

// loader carries the state of one Load call.
type loader struct {
	parser *hclparse.Parser
	cfg    *Config
	ev     *evaluator
	diags  hcl.Diagnostics
	// sensitiveLocals names the local values computed from a sensitive
	// variable, directly or through other locals.
	sensitiveLocals map[string]bool
	// sensitiveVars counts the variables declared sensitive; while it is
	// 0 no expression can use a sensitive value.
	sensitiveVars int
	// taskBlocks are the decoded task blocks, proposed_only ones too.
	taskBlocks []*taskBlock
	// providers are Inputs.Providers.
	providers map[string]ProviderSchema
	// poolProviders are Inputs.PoolProviders.
	poolProviders map[string]string
}

// usesSensitive reports whether expr refers to a sensitive variable, or to
// a local value computed from one. Values derived from a sensitive value
// (upper(var.token), a list built from it) are sensitive as a whole, as in
// Terraform: outputs show "(sensitive)" instead of any part of them.
func (l *loader) usesSensitive(expr hcl.Expression) bool {
	if expr == nil || l.sensitiveVars == 0 {
		return false
	}
	for _, tr := range expr.Variables() {
		name, ok := traversalStep(tr)
		if !ok {
			continue
		}
		switch tr.RootName() {
		case "var":
			if v := l.cfg.Variables[name]; v != nil && v.Sensitive {
				return true
			}
		case "local":
			if l.sensitiveLocals[name] {
				return true
			}
		}
	}
	return false
}

// sensitiveRefs returns, sorted and without duplicates, the references of
// expr to sensitive variables and to local values computed from one:
// "var.NAME", "local.NAME".
func (l *loader) sensitiveRefs(expr hcl.Expression) []string {
	if expr == nil || l.sensitiveVars == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, tr := range expr.Variables() {
		name, ok := traversalStep(tr)
		if !ok {
			continue
		}
		ref := tr.RootName() + "." + name
		switch tr.RootName() {
		case "var":
			if v := l.cfg.Variables[name]; v == nil || !v.Sensitive {
				continue
			}
		case "local":
			if !l.sensitiveLocals[name] {
				continue
			}
		default:
			continue
		}
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	sort.Strings(out)
	return out
}

// sensitiveFrom fills t.Sensitive.From from the task body's command, dir
// and env expressions (the parts of its definition).
func (l *loader) sensitiveFrom(t *Task, body *taskBody) {
	from := map[string][]string{}
	if t.Sensitive.Command {
		from["command"] = l.sensitiveRefs(body.Command.Expr)
	}
	if t.Sensitive.Dir {
		from["dir"] = l.sensitiveRefs(body.Dir.Expr)
	}
	switch {
	case t.Sensitive.Env:
		from["env"] = l.sensitiveRefs(body.Env.Expr)
	case len(t.Sensitive.EnvKeys) > 0:
		obj, _ := body.Env.Expr.(*hclsyntax.ObjectConsExpr)
		for name := range t.Sensitive.EnvKeys {
			from["env."+name] = nil
		}
		if obj != nil {
			for _, item := range obj.Items {
				name := hcl.ExprAsKeyword(item.KeyExpr)
				if name == "" {
					if v, diags := item.KeyExpr.Value(nil); !diags.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
						name = v.AsString()
					}
				}
				if t.Sensitive.EnvKeys[name] {
					from["env."+name] = l.sensitiveRefs(item.ValueExpr)
				}
			}
		}
	}
	if len(from) > 0 {
		t.Sensitive.From = from
	}
}

// mapSensitivity tells which parts of a map attribute come from a sensitive
// variable. For an object constructor whose keys are plain names or
// literal strings, each entry is judged alone: keys lists the entries whose
// value is sensitive, so the rest stays visible for review. Otherwise, or
// when a key itself is sensitive, whole is true.
func (l *loader) mapSensitivity(a *hcl.Attribute) (whole bool, keys map[string]bool) {
	if a == nil || !l.usesSensitive(a.Expr) {
		return false, nil
	}
	obj, ok := a.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return true, nil
	}
	keys = map[string]bool{}
	for _, item := range obj.Items {
		if l.usesSensitive(item.KeyExpr) {
			return true, nil
		}
		name := hcl.ExprAsKeyword(item.KeyExpr)
		if name == "" {
			v, diags := item.KeyExpr.Value(nil)
			if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
				return true, nil
			}
			name = v.AsString()
		}
		if l.usesSensitive(item.ValueExpr) {
			keys[name] = true
		}
	}
	return false, keys
}

// attrSensitive is usesSensitive for an optional attribute.
func (l *loader) attrSensitive(a *hcl.Attribute) bool {
	return a != nil && l.usesSensitive(a.Expr)
}

func (l *loader) add(diags ...*hcl.Diagnostic) { l.diags = append(l.diags, diags...) }

// Load reads every *.wdc.hcl file of dir (sorted by name, not recursive,
// skipping hidden and editor files: see ignoredFile),
// resolves variables from in, evaluates locals and expressions, expands
// count and depends_on, and validates the result.
//
// The returned Config is never nil and its Files holds every file parsed
// (configuration files and var files), so the diagnostics can be printed
// with hcl.NewDiagnosticTextWriter(w, cfg.Files, width, color). When the
// diagnostics hold errors the rest of the Config may be partial.
func Load(dir string, in Inputs) (cfg *Config, diags hcl.Diagnostics) {
	l := &loader{
		sensitiveLocals: map[string]bool{},
		parser:          hclparse.NewParser(),
		cfg: &Config{
			Files:     map[string]*hcl.File{},
			Variables: map[string]*Variable{},
			Locals:    map[string]cty.Value{},
		},
	}
	defer func() {
		if r := recover(); r != nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error while loading the configuration",
				Detail:   fmt.Sprintf("This is a bug in wdc; please report it with the configuration that caused it.\n\n%v\n\n%s", r, debug.Stack()),
			})
			cfg, diags = l.finish()
		}
	}()
	l.load(dir, in)
	return l.finish()
}

func (l *loader) finish() (*Config, hcl.Diagnostics) {
	for name, f := range l.parser.Files() {
		l.cfg.Files[name] = f
	}
	return l.cfg, sortDiags(l.scrubSensitive(cleanDiags(l.diags)))
}

// sortDiags orders diagnostics as the files read: by file name, then line
// and column, those without a source range (a variable given on the
// command line, no configuration file at all) first. The loader finds
// problems phase by phase and attribute by attribute in the order it
// decodes them, not in the order they are written. The sort is stable:
// diagnostics of one place keep their order.
func sortDiags(diags hcl.Diagnostics) hcl.Diagnostics {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		default:
			return a.Start.Column < b.Start.Column
		}
	})
	return diags
}

// quoted matches a double-quoted string in a diagnostic's text.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// scrubSensitive keeps sensitive values out of diagnostics: a diagnostic
// about an expression that uses a sensitive variable loses its evaluation
// context (the HCL printer would list "with var.token as ...") and every
// quoted string in its text (function errors quote the value); any other
// diagnostic has the text of sensitive values replaced.
func (l *loader) scrubSensitive(diags hcl.Diagnostics) hcl.Diagnostics {
	var secrets []string
	for _, v := range l.cfg.Variables {
		if v.Sensitive && v.Value.IsKnown() && !v.Value.IsNull() && v.Value.Type() == cty.String && v.Value.AsString() != "" {
			secrets = append(secrets, v.Value.AsString())
		}
	}
	for _, d := range diags {
		if d.Expression != nil && l.usesSensitive(d.Expression) {
			d.EvalContext = nil
			d.Summary = quoted.ReplaceAllString(d.Summary, `"(sensitive)"`)
			d.Detail = quoted.ReplaceAllString(d.Detail, `"(sensitive)"`)
		}
		for _, s := range secrets {
			d.Summary = strings.ReplaceAll(d.Summary, s, "(sensitive)")
			d.Detail = strings.ReplaceAll(d.Detail, s, "(sensitive)")
		}
	}
	return diags
}

func (l *loader) load(dir string, in Inputs) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid configuration directory", Detail: err.Error()})
		return
	}
	l.cfg.Dir = abs
	l.providers = in.Providers
	l.poolProviders = in.PoolProviders
	l.ev = &evaluator{
		dir:       abs,
		vars:      map[string]cty.Value{},
		declared:  map[string]bool{},
		locals:    map[string]cty.Value{},
		localDecl: map[string]bool{},
		funcs:     functions(),
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read the configuration directory",
			Detail:   err.Error(),
		})
		return
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), FileSuffix) && !ignoredFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail:   fmt.Sprintf("The directory %s holds no *%s files (hidden and editor files, named .* or #* or *~, are skipped).", abs, FileSuffix),
		})
		return
	}

	var blocks hcl.Blocks
	for _, name := range names {
		path := filepath.Join(dir, name)
		src, err := regularfile.Read(path, MaxConfigFileBytes)
		if err != nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration file",
				Detail:   fmt.Sprintf("The configuration file %s could not be read: %s.", path, ioReason(err)),
			})
			continue
		}
		// In pieces when large (parseConfig); the parser keeps the file
		// for var files and the diagnostics' snippets.
		f, diags := parseConfig(src, path)
		l.parser.AddFile(path, f)
		l.add(diags...)
		if f == nil || f.Body == nil {
			continue
		}
		content, diags := f.Body.Content(rootSchema)
		l.add(suggestNames(diags, rootSchema)...)
		blocks = append(blocks, content.Blocks...)
	}
	byType := map[string]hcl.Blocks{}
	for _, b := range blocks {
		byType[b.Type] = append(byType[b.Type], b)
	}

	l.variables(byType["variable"], in)
	l.locals(byType["locals"])
	l.ev.freeze()
	l.settings(byType["wdc"])
	l.pools(byType["pool"])
	l.tasks(byType["task"])
	l.edges(byType["edge"])
	l.checkProposed()
}

// ignoredFile reports whether a directory entry is an editor or hidden
// file that Load skips, as Terraform does: a name starting with "." or "#"
// or ending with "~" or "#" (Emacs lock files are ".#main.wdc.hcl",
// dangling symbolic links).
func ignoredFile(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") ||
		strings.HasSuffix(name, "~") || strings.HasSuffix(name, "#")
}

// cleanDiags drops follow-up "value must be known" errors when another
// error exists, and exact duplicates (a counted task repeats an error
// once per instance).
func cleanDiags(in hcl.Diagnostics) hcl.Diagnostics {
	other := false
	for _, d := range in {
		if d.Severity == hcl.DiagError && !isUnknownFollowUp(d) {
			other = true
			break
		}
	}
	seen := map[string]bool{}
	var out hcl.Diagnostics
	for _, d := range in {
		if other && isUnknownFollowUp(d) {
			continue
		}
		key := fmt.Sprintf("%d\x00%s\x00%s", d.Severity, d.Summary, d.Detail)
		if d.Subject != nil {
			key += "\x00" + d.Subject.String()
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, d)
	}
	return out
}

func isUnknownFollowUp(d *hcl.Diagnostic) bool {
	return strings.Contains(d.Detail, unknownDetail) || strings.Contains(d.Summary, unknownDetail)
}

// claimLabel checks the label of a block of kind against the names seen
// so far: an invalid name (validName) or one declared before (duplicate)
// is reported; a good one is recorded in seen, and nil returned.
func claimLabel(kind string, b *hcl.Block, seen map[string]hcl.Range) *hcl.Diagnostic {
	if d := validName(kind, b); d != nil {
		return d
	}
	if first, ok := seen[b.Labels[0]]; ok {
		return duplicate(kind, b, first)
	}
	seen[b.Labels[0]] = b.DefRange
	return nil
}

// duplicate reports a block whose label was already used.
func duplicate(kind string, b *hcl.Block, first hcl.Range) *hcl.Diagnostic {
	article := "A"
	if strings.ContainsAny(kind[:1], "aeiou") {
		article = "An"
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s %q", kind, b.Labels[0]),
		Detail:   fmt.Sprintf("%s %s named %q was already declared at %s. Each %s needs a unique name.", article, kind, b.Labels[0], rangeStart(first), kind),
		Subject:  b.DefRange.Ptr(),
	}
}
