package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// defaultStatePath is the state file, relative to the configuration directory,
// used when neither --state, WDC_STATE nor the wdc block names one.
const defaultStatePath = ".wdc/state.db"

// loadConfig loads the configuration directory with the variables given by
// flags and environment, prints its diagnostics (errors and warnings) to
// stderr, and returns errExit{1} when any is an error.
func (e *env) loadConfig() (*wdchcl.Config, error) {
	dir, err := e.configDir()
	if err != nil {
		return nil, err
	}
	varFiles := make([]string, len(e.flags.VarFile))
	for i, f := range e.flags.VarFile {
		varFiles[i] = resolve(dir, f)
	}
	// Load the directory as the user named it, so diagnostics show paths
	// relative to where they are ("main.wdc.hcl line 3").
	cfg, diags := wdchcl.Load(e.displayDir(), wdchcl.Inputs{Vars: e.flags.Var, VarFiles: varFiles, Environ: e.environ, Providers: providers.Schemas()})
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return cfg, errExit{1}
	}
	return cfg, nil
}

// loadOptionalConfig loads the configuration of dir, when it has one,
// without printing its diagnostics, for commands that work without one and
// use it when they can: doctor (the placement of queued tasks) and
// providers (which pools use which provider). noConfig says why there is
// none to use ("" when cfg loaded); cfg may still be set (for the wdc
// block's state setting) when it did not load cleanly.
func (e *env) loadOptionalConfig(dir string) (cfg *wdchcl.Config, noConfig string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.wdc.hcl"))
	if len(files) == 0 {
		return nil, fmt.Sprintf("no configuration (*.wdc.hcl) in %s", dir)
	}
	varFiles := make([]string, len(e.flags.VarFile))
	for i, f := range e.flags.VarFile {
		varFiles[i] = resolve(dir, f)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: e.flags.Var, VarFiles: varFiles, Environ: e.environ, Providers: providers.Schemas()})
	if diags.HasErrors() {
		return cfg, fmt.Sprintf("the configuration in %s does not load (wdc validate shows why)", dir)
	}
	return cfg, ""
}

// displayDir is the configuration directory as the user gave it: the
// --chdir value, or ".".
func (e *env) displayDir() string {
	if e.flags.Chdir != "" {
		return e.flags.Chdir
	}
	return "."
}

// printDiags renders diagnostics with file:line:column and a source snippet.
func (e *env) printDiags(cfg *wdchcl.Config, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	var files map[string]*hcl.File
	if cfg != nil {
		files = printableFiles(cfg.Files)
	}
	for _, d := range diags {
		var buf bytes.Buffer
		w := hcl.NewDiagnosticTextWriter(&buf, files, 100, e.color(e.stderr))
		shown := *d
		shown.Summary, shown.Detail = views.Printable(d.Summary), printableLines(d.Detail)
		_ = w.WriteDiagnostic(&shown)
		e.stderr.Write(withColumn(buf.Bytes(), d))
	}
}

// printableLines is s with each line made views.Printable.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = views.Printable(l)
	}
	return strings.Join(lines, "\n")
}

// printableFiles returns files with every character that a terminal would
// act on (control characters but tab and newline, bidirectional
// overrides, invalid UTF-8) replaced by as many "?" as it has bytes, so
// that a diagnostic's source snippet shows the line without running it and
// every byte offset of a range still points where it did.
func printableFiles(files map[string]*hcl.File) map[string]*hcl.File {
	out := make(map[string]*hcl.File, len(files))
	for name, f := range files {
		if f == nil || printableSource(f.Bytes) {
			out[name] = f
			continue
		}
		clean := make([]byte, 0, len(f.Bytes))
		for b := f.Bytes; len(b) > 0; {
			r, size := utf8.DecodeRune(b)
			if actsOnTerminal(r, size) {
				clean = append(clean, bytes.Repeat([]byte("?"), size)...)
			} else {
				clean = append(clean, b[:size]...)
			}
			b = b[size:]
		}
		out[name] = &hcl.File{Body: f.Body, Bytes: clean, Nav: f.Nav}
	}
	return out
}

// printableSource reports whether b has nothing actsOnTerminal.
func printableSource(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if actsOnTerminal(r, size) {
			return false
		}
		b = b[size:]
	}
	return true
}

// actsOnTerminal reports whether rune r, of size bytes in its source, is
// one printableFiles replaces.
func actsOnTerminal(r rune, size int) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case r == utf8.RuneError && size == 1:
		return true
	}
	return !unicode.IsGraphic(r) && !unicode.IsSpace(r) || unicode.Is(unicode.Bidi_Control, r)
}

// withColumn rewrites the HCL writer's location line, "on FILE line N", as
// "on FILE:N:C", so that every diagnostic gives file:line:column even where
// colors (which underline the column) are off.
func withColumn(text []byte, d *hcl.Diagnostic) []byte {
	if d.Subject == nil {
		return text
	}
	s := d.Subject
	old := fmt.Sprintf("on %s line %d", s.Filename, s.Start.Line)
	repl := fmt.Sprintf("on %s:%d:%d", s.Filename, s.Start.Line, s.Start.Column)
	return bytes.Replace(text, []byte(old), []byte(repl), 1)
}

// statePath resolves the state file path: --state > WDC_STATE > the wdc
// block's state setting > .wdc/state.db; relative paths resolve against the
// configuration directory. cfg may be nil. With a backend it is the local
// working copy an apply works on (defaultBackendWorkPath), and --state
// and WDC_STATE are refused.
func (e *env) statePath(cfg *wdchcl.Config) (string, error) {
	dir, err := e.configDir()
	if err != nil {
		return "", err
	}
	if cfg != nil && cfg.Settings.Backend != nil {
		// The local working copy of the backend's state (an apply's).
		if _, err := e.stateBackend(cfg); err != nil {
			return "", err
		}
		return resolve(dir, defaultBackendWorkPath), nil
	}
	p := e.flags.State
	if p == "" {
		p = e.getenv("WDC_STATE")
	}
	if p == "" && cfg != nil {
		p = cfg.Settings.State
	}
	if p == "" {
		p = defaultStatePath
	}
	return resolve(dir, p), nil
}

// statePathForReading resolves the state path for commands that only read
// the state: they look at the configuration only for its wdc block, and a
// configuration that does not load (a missing variable, say) does not stop
// them. With a backend it is a copy pulled from the store, removed when
// the command ends.
func (e *env) statePathForReading() (string, error) {
	if e.flags.State != "" || e.getenv("WDC_STATE") != "" {
		return e.statePath(nil)
	}
	dir, err := e.configDir()
	if err != nil {
		return "", err
	}
	cfg, _ := wdchcl.Load(dir, wdchcl.Inputs{Vars: e.flags.Var, Environ: e.environ, Providers: providers.Schemas()})
	b, err := e.stateBackend(cfg)
	if err != nil {
		return "", err
	}
	if b != nil {
		// With a backend, what there is to read is in the store.
		return e.pullForReading(context.Background(), b)
	}
	return e.statePath(cfg)
}

// readSnapshot opens the state read-only and returns a snapshot of it; an
// absent state file is an empty state (lineage "", serial 0) and is not
// created.
func readSnapshot(ctx context.Context, path string) (*state.Snapshot, error) {
	st, err := openForReading(ctx, path)
	if err != nil || st == nil {
		return state.EmptySnapshot(), err
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", path, err)
	}
	return snap, nil
}

// readCheckedSnapshot is readSnapshot for a command that plans from the
// state (plan, apply that cannot ask): it first refuses a damaged state
// file as apply does, with the same words (Store.QuickCheck: a
// *state.CorruptError), rather than plan from rows SQLite would refuse.
func readCheckedSnapshot(ctx context.Context, path string) (*state.Snapshot, error) {
	st, err := openForReading(ctx, path)
	if err != nil || st == nil {
		return state.EmptySnapshot(), err
	}
	defer st.Close()
	if err := st.QuickCheck(ctx); err != nil {
		return nil, err
	}
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", path, err)
	}
	return snap, nil
}

// openExistingState opens the state for a command that changes what is
// in it and never creates it: with no state file it fails with "no state
// file at PATH: " and why (what there is not to change). It returns the
// store and its path. With a backend it refuses (errBackendUnsupported:
// verb names the command).
func (e *env) openExistingState(verb, why string) (*state.Store, string, error) {
	if err := e.refuseBackend(verb); err != nil {
		return nil, "", err
	}
	path, err := e.statePathForReading()
	if err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, path, fmt.Errorf("no state file at %s: %s", path, why)
	}
	store, err := state.Open(context.Background(), path)
	return store, path, err
}

// openForReading opens the state read-only, for commands that only read
// it; it returns a nil store and no error when there is no state file (it
// never creates one).
func openForReading(ctx context.Context, path string) (*state.Store, error) {
	st, err := state.OpenReadOnly(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return st, err
}

// noStateHint is the note an empty listing adds when there is no state file
// at all.
func noStateHint(exists bool, path string) string {
	if exists {
		return ""
	}
	return fmt.Sprintf(" (there is no state file at %s yet: wdc apply creates it)", path)
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}
