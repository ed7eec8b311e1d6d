package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Names of the two files that describe a release folder.
const (
	manifestName = "manifest.json"
	sumsName     = "SHA256SUMS"
)

// manifest is manifest.json: what was released and every file of it.
type manifest struct {
	Version string         `json:"version"`
	Commit  string         `json:"commit"`
	Go      string         `json:"go"`
	Files   []manifestFile `json:"files"`
}

// manifestFile is one file of a release.
type manifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// describe lists the regular files of dir (not its subfolders), sorted by
// name, with size and SHA-256, leaving out the names in skip.
func describe(dir string, skip ...string) ([]manifestFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []manifestFile
	for _, e := range entries {
		if !e.Type().IsRegular() || slices.Contains(skip, e.Name()) {
			continue
		}
		sum, size, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, manifestFile{Name: e.Name(), Size: size, SHA256: sum})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// writeManifest writes manifest.json for the files of dir, then SHA256SUMS
// for every file of dir, manifest.json included (as sha256sum prints it:
// "HASH  NAME" lines, sorted by name).
func writeManifest(dir, version, commit, goVersion string) error {
	files, err := describe(dir, manifestName, sumsName)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(manifest{Version: version, Commit: commit, Go: goVersion, Files: files}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, manifestName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	all, err := describe(dir, sumsName)
	if err != nil {
		return err
	}
	var sums bytes.Buffer
	for _, f := range all {
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Name)
	}
	return os.WriteFile(filepath.Join(dir, sumsName), sums.Bytes(), 0o644)
}

// verify checks a release folder: SHA256SUMS names every other file of it,
// each with its hash, and manifest.json names every file but the two with
// its size and hash. It returns the manifest.
func verify(dir string) (*manifest, error) {
	want, err := readSums(filepath.Join(dir, sumsName))
	if err != nil {
		return nil, err
	}
	have, err := describe(dir, sumsName)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, f := range have {
		sum, ok := want[f.Name]
		switch {
		case !ok:
			problems = append(problems, f.Name+" is not in "+sumsName)
		case sum != f.SHA256:
			problems = append(problems, fmt.Sprintf("%s: SHA-256 %s, %s says %s", f.Name, f.SHA256, sumsName, sum))
		}
		delete(want, f.Name)
	}
	for name := range want {
		problems = append(problems, sumsName+" lists "+name+", which is missing")
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestName, err)
	}
	files, err := describe(dir, manifestName, sumsName)
	if err != nil {
		return nil, err
	}
	if a, b := listing(files), listing(m.Files); a != b {
		problems = append(problems, fmt.Sprintf("%s does not describe the files:\n%s\nthe files are:\n%s", manifestName, b, a))
	}
	if m.Version == "" || len(m.Commit) != 40 {
		problems = append(problems, fmt.Sprintf("%s: version %q, commit %q", manifestName, m.Version, m.Commit))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return &m, nil
}

// readSums reads a sha256sum file into name → hash.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("%s:%d: not a \"HASH  NAME\" line", path, n)
		}
		out[name] = sum
	}
	return out, sc.Err()
}

func listing(files []manifestFile) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "  %s %d %s\n", f.Name, f.Size, f.SHA256)
	}
	return b.String()
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
