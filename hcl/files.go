package hcl

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// files evaluates a task instance's inputs, outputs and the output
// patterns of its input blocks (their from is resolved with the
// dependencies). Inputs are files of the configuration directory, found by
// pattern; a pattern that leaves the directory (an absolute path, a ".."
// element, a symbolic link that points outside it), matches a folder, or
// matches nothing is an error at the attribute.
func (l *loader) files(t *Task, body *taskBody, sc scope) {
	t.InputsRange = t.DeclRange
	if body.Inputs != nil {
		t.InputsRange = body.Inputs.Range
		patterns, ok, d := l.ev.stringList(body.Inputs, sc)
		l.add(d...)
		if ok {
			t.Inputs = l.inputFiles(body.Inputs, patterns)
		}
	}
	if body.Outputs != nil {
		patterns, ok, d := l.ev.stringList(body.Outputs, sc)
		l.add(d...)
		if ok {
			for _, p := range patterns {
				if msg := checkPattern(p); msg != "" {
					l.add(attrErr(body.Outputs, "Invalid output pattern", fmt.Sprintf("Output %q: %s", p, msg)))
					continue
				}
				if !slices.Contains(t.Outputs, p) {
					t.Outputs = append(t.Outputs, p)
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, m := range body.Mounts {
		rng := m.Body.MissingItemRange()
		switch {
		case !mountName.MatchString(m.Name):
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid input name",
				Detail:  fmt.Sprintf("Input %q: the name is the folder its files go into, so it must be a name like \"build\" (letters, digits, _ and -).", m.Name),
				Subject: rng.Ptr()})
			continue
		case seen[m.Name]:
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate input block",
				Detail: fmt.Sprintf("The task has two input blocks named %q; each names its own folder.", m.Name), Subject: rng.Ptr()})
			continue
		}
		seen[m.Name] = true
		if m.From == nil || m.Output == nil {
			l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
				Detail: fmt.Sprintf("Input %q needs from (the task whose outputs it takes) and output (the pattern of those outputs).", m.Name), Subject: rng.Ptr()})
			continue
		}
		pattern, set, d := l.ev.str(m.Output, sc)
		l.add(d...)
		if !set {
			continue
		}
		if msg := checkPattern(pattern); msg != "" {
			l.add(attrErr(m.Output, "Invalid output pattern", fmt.Sprintf("Output %q: %s", pattern, msg)))
			continue
		}
		// From is filled in by the dependency resolution.
		t.Mounts = append(t.Mounts, Mount{Name: m.Name, Output: pattern, FromRange: m.From.Expr.Range()})
	}
}

var mountName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)

// checkPattern validates a file pattern that is relative to some folder:
// path.Match syntax, and a name as every artifact's
// (protocol.CheckArtifactName: "/"-separated, not absolute, no NUL,
// backslash, empty, "." or ".." part). It returns what is wrong, or "".
func checkPattern(p string) string {
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) {
		return "a pattern is relative (to the configuration directory for inputs, to the attempt's directory for outputs), not absolute."
	}
	if err := protocol.CheckArtifactName(p); err != nil {
		return "the pattern " + err.Error() + "."
	}
	if _, err := path.Match(p, ""); err != nil {
		return "it is not a valid pattern (" + err.Error() + ")."
	}
	return ""
}

// inputFiles resolves input patterns against the configuration directory:
// the regular files they match, as "/"-separated relative paths, sorted.
func (l *loader) inputFiles(attr *hcl.Attribute, patterns []string) []string {
	root, err := filepath.EvalSymlinks(l.cfg.Dir)
	if err != nil {
		root = l.cfg.Dir
	}
	var out []string
	for _, p := range patterns {
		if msg := checkPattern(p); msg != "" {
			l.add(attrErr(attr, "Invalid input pattern", fmt.Sprintf("Input %q: %s", p, msg)))
			continue
		}
		matches, err := filepath.Glob(filepath.Join(l.cfg.Dir, filepath.FromSlash(p)))
		if err != nil {
			l.add(attrErr(attr, "Invalid input pattern", fmt.Sprintf("Input %q: %v.", p, err)))
			continue
		}
		if len(matches) == 0 {
			l.add(attrErr(attr, "Input matches no file", fmt.Sprintf("Input %q matches no file of the configuration directory %s.", p, l.cfg.Dir)))
			continue
		}
		for _, m := range matches {
			rel, _ := filepath.Rel(l.cfg.Dir, m)
			rel = filepath.ToSlash(rel)
			if err := protocol.CheckArtifactName(rel); err != nil {
				// A file whose name would read otherwise where the task runs.
				l.add(attrErr(attr, "Invalid input file name", fmt.Sprintf("Input %q matches %q, whose name %v; rename the file.", p, rel, err)))
				continue
			}
			real, err := filepath.EvalSymlinks(m)
			if err != nil {
				l.add(attrErr(attr, "Unreadable input", fmt.Sprintf("Input %q: %s: %v.", p, rel, err)))
				continue
			}
			if inside, _ := filepath.Rel(root, real); inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) || filepath.IsAbs(inside) {
				l.add(attrErr(attr, "Input leaves the configuration directory",
					fmt.Sprintf("Input %q: %s is a symbolic link to %s, outside the configuration directory; inputs must be files of it.", p, rel, real)))
				continue
			}
			fi, err := os.Stat(real)
			switch {
			case err != nil:
				l.add(attrErr(attr, "Unreadable input", fmt.Sprintf("Input %q: %s: %v.", p, rel, err)))
				continue
			case fi.IsDir():
				l.add(attrErr(attr, "Input is a folder", fmt.Sprintf("Input %q matches the folder %s; inputs are files (write %s/* for the files in it).", p, rel, rel)))
				continue
			case !fi.Mode().IsRegular():
				l.add(attrErr(attr, "Input is not a file", fmt.Sprintf("Input %q matches %s, which is %s, not a regular file.", p, rel, regularfile.Kind(fi.Mode()))))
				continue
			case l.cfg.Settings.MaxArtifactSize > 0 && fi.Size() > l.cfg.Settings.MaxArtifactSize:
				l.add(attrErr(attr, "Input too large", fmt.Sprintf("Input %q: %s is %s, more than max_artifact_size (%s in the wdc block), the largest file the coordinator keeps; raise max_artifact_size or make the file smaller.",
					p, rel, artifact.FormatSize(fi.Size()), artifact.FormatSize(l.cfg.Settings.MaxArtifactSize))))
				continue
			}
			if !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}
