package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/rogpeppe/go-internal/diff"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/regularfile"
)

// FmtCmd rewrites configuration files in the canonical HCL style. It never
// opens the state.
type FmtCmd struct {
	Check bool     `name:"check" help:"Change no file; list the files that are not formatted and exit 1 if there are any."`
	Diff  bool     `name:"diff" help:"Print a unified diff of the changes to each file."`
	Paths []string `arg:"" optional:"" name:"path" predictor:"file" help:"Files or directories to format (directories are not recursed into). Default: the configuration directory and its tests folder (configuration and test files)."`
}

// fmtFile is one file fmt looks at: its path on disk and its path as shown
// to the user.
type fmtFile struct {
	path    string
	display string
}

// Run formats every file named by the arguments (every *.wdc.hcl file of a
// named directory, the configuration directory when there is none), listing
// each changed file on stdout. A file with syntax errors gets the same
// diagnostics as validate and is left untouched. It returns errExit{1} when a
// file had errors or, with --check, when a file is not formatted.
func (c *FmtCmd) Run(e *env) error {
	dir, err := e.configDir()
	if err != nil {
		return err
	}
	files, err := c.files(dir, e.displayDir())
	if err != nil {
		return err
	}
	failed, changed := false, false
	for _, f := range files {
		ch, err := c.format(e, f)
		if err != nil {
			if !errors.Is(err, errExit{1}) {
				fmt.Fprintf(e.stderr, "wdc: error: %v\n", err)
			}
			failed = true
			continue
		}
		changed = changed || ch
	}
	if failed || (c.Check && changed) {
		return errExit{1}
	}
	return nil
}

// files lists the files to format, each once, in argument order (a
// directory's files sorted by name). Relative paths resolve against the
// configuration directory dir and are shown joined to display, the
// configuration directory as the user gave it.
func (c *FmtCmd) files(dir, display string) ([]fmtFile, error) {
	args := c.Paths
	if len(args) == 0 {
		args = []string{"."}
		// The test files of the tests folder too, as wdc test finds them.
		if fi, err := os.Stat(filepath.Join(dir, wdchcl.TestDir)); err == nil && fi.IsDir() {
			args = append(args, wdchcl.TestDir)
		}
	}
	var out []fmtFile
	seen := map[string]bool{}
	add := func(f fmtFile) {
		if !seen[f.path] {
			seen[f.path] = true
			out = append(out, f)
		}
	}
	for _, a := range args {
		path, shown := resolve(dir, a), a
		if !filepath.IsAbs(a) {
			shown = filepath.Join(display, a)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(fmtFile{path: path, display: shown})
			continue
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		// The files the loader reads, as it lists them: every entry named
		// *.wdc.hcl (or *.wdctest.hcl, a test file) but directories. One that is not a regular file (a
		// FIFO, a device, a dangling link) is refused when it is read, as
		// validate refuses it, not skipped.
		var names []string
		for _, ent := range entries {
			if !ent.IsDir() && isConfigFile(ent.Name()) {
				names = append(names, ent.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(path, n)
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				continue // a link to a directory
			}
			add(fmtFile{path: p, display: filepath.Join(shown, n)})
		}
	}
	return out, nil
}

// isConfigFile reports whether a directory entry is a configuration file as
// the loader sees it, or a test file as wdc test sees it: named *.wdc.hcl
// or *.wdctest.hcl and not a hidden or editor file (.*, #*, *~, *#).
func isConfigFile(name string) bool {
	return (strings.HasSuffix(name, wdchcl.FileSuffix) || strings.HasSuffix(name, wdchcl.TestFileSuffix)) &&
		!strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "#") &&
		!strings.HasSuffix(name, "~") && !strings.HasSuffix(name, "#")
}

// format formats one file and reports whether it was (or, with --check,
// would be) changed. A file that does not parse gets its diagnostics printed
// and errExit{1}.
func (c *FmtCmd) format(e *env, f fmtFile) (changed bool, err error) {
	src, err := regularfile.Read(f.path, wdchcl.MaxConfigFileBytes)
	if err != nil {
		return false, err
	}
	file, diags := hclsyntax.ParseConfig(src, f.display, hcl.InitialPos)
	if len(diags) > 0 {
		e.printDiags(&wdchcl.Config{Files: map[string]*hcl.File{f.display: file}}, diags)
	}
	if diags.HasErrors() {
		return false, errExit{1}
	}
	out := hclwrite.Format(src)
	if bytes.Equal(src, out) {
		return false, nil
	}
	if _, err := fmt.Fprintln(e.stdout, f.display); err != nil {
		return true, err
	}
	if c.Diff {
		name := filepath.ToSlash(f.display)
		d := diff.Diff(path.Join("old", name), src, path.Join("new", name), out)
		if _, err := e.stdout.Write(d); err != nil {
			return true, err
		}
	}
	if c.Check {
		return true, nil
	}
	return true, writeFileAtomic(f.path, out)
}

// writeFileAtomic replaces the file at path (following a symbolic link)
// with data, through a temporary file in the same directory renamed over
// it, keeping the file's permissions.
func writeFileAtomic(path string, data []byte) (err error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(fi.Mode().Perm()); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
