package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/hcl/v2"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/wdctest"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// TestCmd runs the configuration's test files.
type TestCmd struct {
	Filter   []string `name:"filter" sep:"none" placeholder:"NAME" help:"Run only the runs with this name, the runs of this test file (tests/x.wdctest.hcl), or one run as FILE/NAME (repeatable)."`
	JUnitXML string   `name:"junit-xml" placeholder:"FILE" predictor:"file" help:"Also write the results to FILE as JUnit XML, for CI systems (relative to the configuration directory)."`
	JSON     bool     `name:"json" help:"Print the results as one JSON document (docs/json.md) instead of text."`
	Verbose  bool     `name:"verbose" help:"Also print each run's plan and, for apply runs, its progress."`
}

// Run finds the test files (*.wdctest.hcl in the configuration directory
// and its tests folder) and carries out their runs, each on a copy of
// the configuration with a fresh temporary state: it never opens the
// user's state. Exit 0 when every run passed, 1 otherwise.
func (c *TestCmd) Run(e *env) error {
	dir, err := e.configDir()
	if err != nil {
		return err
	}
	files, diags := wdchcl.LoadTestFiles(e.displayDir())
	testFiles := testFileMap(files)
	if len(files) == 0 && !diags.HasErrors() {
		return fmt.Errorf("no test files (*%s) in %s or its %s folder", wdchcl.TestFileSuffix, e.displayDir(), wdchcl.TestDir)
	}
	varFiles := make([]string, len(e.flags.VarFile))
	for i, f := range e.flags.VarFile {
		varFiles[i] = resolve(dir, f)
	}
	in := wdchcl.Inputs{Vars: e.flags.Var, VarFiles: varFiles, Environ: e.environ, Providers: providers.Schemas()}
	// The configuration as it loads without a run's variables: its names
	// check the test files, and its state is left out of the copies.
	// Each run loads it again with its own inputs and reports its errors.
	// (A configuration with a variable only the runs give does not load
	// here; its wdc block still says where its state is.)
	cfg, cdiags := wdchcl.Load(dir, in)
	if !cdiags.HasErrors() {
		for _, f := range files {
			diags = append(diags, wdchcl.CheckTestFile(f, cfg, in.Providers)...)
		}
	}
	skip := []string{}
	if cfg.Settings.Backend == nil {
		if p, err := e.statePath(cfg); err == nil {
			skip = append(skip, p, p+"-wal", p+"-shm", p+"-journal")
			if d := filepath.Dir(p); d != dir {
				skip = append(skip, d)
			}
		}
	}
	if diags.HasErrors() {
		e.printDiagFiles(testFiles, diags)
		return errExit{1}
	}
	if !c.JSON {
		e.printDiagFiles(testFiles, diags) // warnings
	}
	ctx, stop := e.testInterrupts()
	defer stop()
	view := &testCmdView{e: e, json: c.JSON, verbose: c.Verbose}
	res, err := wdctest.Run(ctx, wdctest.Options{
		Dir: dir, DisplayDir: e.displayDir(), Files: files, Inputs: in, Filters: c.Filter, Skip: skip, Now: e.now, View: view,
		Redact: func(cfg *wdchcl.Config) func(string) string { return jsonplan.NewRedactor(cfg).Text },
	})
	view.endFile()
	if errors.Is(err, wdctest.ErrNoMatch) {
		return fmt.Errorf("no run matches --filter %s (the runs are named by run, by file, or as FILE/NAME)", strings.Join(c.Filter, ", --filter "))
	}
	if c.JSON {
		if werr := views.WriteJSON(e.stdout, views.NewTestDoc(res, diags, Version)); werr != nil {
			return werr
		}
	} else {
		fmt.Fprintf(e.stdout, "\n%s\n", views.TestSummaryLine(res))
	}
	if c.JUnitXML != "" {
		if werr := writeJUnit(resolve(dir, c.JUnitXML), res, view.failureText); werr != nil {
			return werr
		}
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted: the runs after the one under way were not carried out")
	}
	if err != nil {
		return err
	}
	if res.Status() != wdctest.StatusPass {
		return errExit{1}
	}
	return nil
}

// testInterrupts turns the first SIGINT or SIGTERM into ctx's
// cancellation: the run under way stops at once (its workers are
// killed: its state is thrown away) and the runs after it are not
// carried out. A second signal ends wdc as the signal does by default.
func (e *env) testInterrupts() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			signal.Stop(sigs)
			fmt.Fprintln(e.stderr, "\nInterrupt received: stopping the run under way (its workers are killed; interrupt again to quit at once).")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// testFileMap maps the test files' names to their parsed files, for the
// snippets of their diagnostics.
func testFileMap(files []*wdchcl.TestFile) map[string]*hcl.File {
	m := map[string]*hcl.File{}
	for _, f := range files {
		if f.File != nil {
			m[f.Name] = f.File
		}
	}
	return m
}

// printDiagFiles prints diagnostics with the snippets of files.
func (e *env) printDiagFiles(files map[string]*hcl.File, diags hcl.Diagnostics) {
	e.printDiags(&wdchcl.Config{Files: files}, diags)
}

// writeJUnit writes the JUnit XML file, replacing it whole.
func writeJUnit(path string, res *wdctest.Result, text func(*wdctest.RunResult) string) error {
	var buf bytes.Buffer
	if err := views.WriteJUnit(&buf, res, text); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the JUnit file: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the JUnit file: %w", err)
	}
	return nil
}

// testCmdView prints what the runner tells: a file's line as its first
// run starts and once its runs are done, each run's line and, under a run
// that did not pass, why. With --verbose, each run's plan and progress
// too. With --json it prints nothing: the document says it all.
type testCmdView struct {
	e             *env
	json, verbose bool

	file *wdchcl.TestFile
	// fileStatus is the worst status of the current file's runs so far.
	fileStatus wdctest.Status
	mu         sync.Mutex // Event comes from the apply's goroutine
	out        *views.ApplyText
}

var _ wdctest.View = (*testCmdView)(nil)

func (v *testCmdView) RunStarted(f *wdchcl.TestFile, r *wdchcl.TestRun) {
	if v.file != f {
		v.endFile()
		v.file, v.fileStatus = f, wdctest.StatusPass
		if !v.json {
			fmt.Fprintf(v.e.stdout, "%s... in progress\n", f.Path)
		}
	}
	if v.verbose && !v.json {
		fmt.Fprintf(v.e.stdout, "  run %q... %s\n", r.Name, r.Command)
	}
}

// endFile prints the line that ends the current file.
func (v *testCmdView) endFile() {
	if v.file == nil {
		return
	}
	if !v.json {
		fmt.Fprintf(v.e.stdout, "%s... %s\n", v.file.Path, map[bool]string{true: "pass", false: "fail"}[v.fileStatus == wdctest.StatusPass])
	}
	v.file = nil
}

func (v *testCmdView) Planned(cfg *wdchcl.Config, p *plan.Plan, diags hcl.Diagnostics) {
	if !v.verbose || v.json {
		return
	}
	v.e.printDiags(cfg, diags)
	if p == nil {
		return
	}
	doc, err := jsonplan.New(cfg, p, nil, Version)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.out = views.NewApplyText(indented{v.e.stdout}, nil)
	v.out.Plan(doc, false) //nolint:errcheck // progress only
}

func (v *testCmdView) Event(ev coordinator.Event) {
	if !v.verbose || v.json {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.out != nil {
		v.out.Event(ev)
	}
}

func (v *testCmdView) RunFinished(f *wdchcl.TestFile, r *wdctest.RunResult) {
	if r.Status == wdctest.StatusError || (r.Status == wdctest.StatusFail && v.fileStatus == wdctest.StatusPass) {
		v.fileStatus = r.Status
	}
	v.mu.Lock()
	v.out = nil
	v.mu.Unlock()
	if v.json {
		return
	}
	fmt.Fprintln(v.e.stdout, views.TestRunLine(r))
	if r.Stopped != nil {
		fmt.Fprintf(v.e.stdout, "    The apply stopped, as its disk_full fault makes it: %s\n", views.OneLine(r.Stopped.Error()))
	}
	if r.Status == wdctest.StatusPass {
		return
	}
	io.WriteString(v.e.stdout, indent(v.failureText(r), "    ")) //nolint:errcheck // as every line
	var diags hcl.Diagnostics
	diags = append(diags, r.Diags...)
	for _, fl := range r.Failures {
		diags = append(diags, fl.Diags...)
	}
	v.e.printDiags(&wdchcl.Config{Files: r.Files}, diags)
}

// failureText says why run r did not pass: each failed assertion's
// file:line, message and the values of its condition's references; the
// apply's error; that the configuration did not load (its diagnostics,
// with snippets, go to stderr).
func (v *testCmdView) failureText(r *wdctest.RunResult) string {
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "Error: %s\n", views.OneLine(r.Err.Error()))
	}
	for _, d := range r.Diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		at := ""
		if d.Subject != nil {
			at = fmt.Sprintf("%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		fmt.Fprintf(&b, "Error: %s%s\n", at, views.Printable(d.Summary))
		if d.Detail != "" {
			fmt.Fprintf(&b, "  %s\n", views.OneLine(d.Detail)) // the JUnit file has no stderr
		}
	}
	for _, f := range r.Failures {
		what := "Assertion failed"
		switch {
		case f.Fault:
			what = "Fault not injected"
		case f.Diags.HasErrors():
			what = "Assertion could not be evaluated"
		}
		fmt.Fprintf(&b, "%s at %s:%d: %s\n", what, f.Range.Filename, f.Range.Start.Line, views.Printable(f.Message))
		for _, d := range f.Diags {
			fmt.Fprintf(&b, "  %s: %s\n", views.Printable(d.Summary), views.OneLine(d.Detail))
		}
		for _, ref := range f.Values {
			fmt.Fprintf(&b, "  %s is %s\n", ref.Ref, views.Printable(ref.Value))
		}
	}
	return b.String()
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

// indented writes what it is given with every line indented by four
// spaces (a run's plan and progress under its line).
type indented struct{ w io.Writer }

func (i indented) Write(p []byte) (int, error) {
	if _, err := io.WriteString(i.w, indent(string(p), "    ")); err != nil {
		return 0, err
	}
	return len(p), nil
}
