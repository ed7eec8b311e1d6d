package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// check proves the release in dist, using work for scratch folders:
//
//  1. SHA256SUMS and manifest.json match the files, and the linux/amd64
//     binary's version --json names the manifest's version and commit;
//  2. linux/amd64, built twice more from the source archive in two clean
//     folders, each with its own empty GOCACHE, is byte for byte the
//     released binary;
//  3. in an empty folder (no .git) holding the extracted source archive,
//     exactly `go build ./cmd/wdc`, `go vet ./...` and the quickstart
//     (validate, apply, apply again: no changes) with the binary it built
//     succeed.
//
// It does not run the test suite: make test does that before it.
func check(dist, work string) error {
	m, err := verify(dist)
	if err != nil {
		return err
	}
	r := &release{commit: m.Commit, version: m.Version}
	fmt.Printf("  %-44s ok (%d files, commit %s)\n", "verify "+sumsName+" and "+manifestName, len(m.Files)+1, m.Commit)
	archive := filepath.Join(dist, r.archiveName())
	released, err := os.ReadFile(filepath.Join(dist, r.binaryName("linux/amd64")))
	if err != nil {
		return err
	}

	// The released binary says what it is.
	bin := filepath.Join(dist, r.binaryName("linux/amd64"))
	if runtime.GOOS+"/"+runtime.GOARCH == "linux/amd64" {
		out, err := output("", nil, bin, "version", "--json")
		if err != nil {
			return err
		}
		var v struct{ Version, Commit, Go, Platform string }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return fmt.Errorf("%s version --json: %w", bin, err)
		}
		if v.Version != m.Version || v.Commit != m.Commit || v.Go != m.Go || v.Platform != "linux/amd64" {
			return fmt.Errorf("%s version --json says %+v; the manifest says version %s, commit %s, %s", bin, v, m.Version, m.Commit, m.Go)
		}
		fmt.Printf("  %-44s ok\n", "version --json of the linux/amd64 binary")
	}

	// 2. Reproducible: two clean builds agree with the release.
	for _, n := range []string{"1", "2"} {
		dir := filepath.Join(work, "repro"+n)
		cache := filepath.Join(work, "gocache"+n)
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := extract(archive, dir); err != nil {
			return err
		}
		out := filepath.Join(work, "wdc-repro"+n)
		if err := r.timed("clean build "+n+" of linux/amd64 (empty GOCACHE)", func() error {
			return r.goBuild(filepath.Join(dir, r.base()), "linux/amd64", out, []string{"GOCACHE=" + cache})
		}); err != nil {
			return err
		}
		got, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, released) {
			return fmt.Errorf("clean build %s of linux/amd64 differs from the released binary (%d bytes, released %d): the build is not reproducible", n, len(got), len(released))
		}
	}
	fmt.Printf("  %-44s ok\n", "three linux/amd64 builds identical")

	// 3. The source archive alone builds, vets and runs the quickstart.
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := extract(archive, src); err != nil {
		return err
	}
	tree := filepath.Join(src, r.base())
	if _, err := os.Stat(filepath.Join(tree, ".git")); err == nil {
		return fmt.Errorf("the source archive holds a .git")
	}
	run := func(what string, env []string, name string, args ...string) (string, error) {
		var out string
		err := r.timed(what, func() error {
			var err error
			out, err = output(tree, env, name, args...)
			return err
		})
		return out, err
	}
	if _, err := run("go build ./cmd/wdc (source archive)", nil, "go", "build", "./cmd/wdc"); err != nil {
		return err
	}
	if _, err := run("go vet ./... (source archive)", nil, "go", "vet", "./..."); err != nil {
		return err
	}
	wdc := filepath.Join(tree, "wdc")
	qs := []string{"--chdir", "examples/quickstart"}
	if _, err := run("quickstart: validate", nil, wdc, append(qs, "validate")...); err != nil {
		return err
	}
	out, err := run("quickstart: apply", nil, wdc, append(qs, "apply", "--auto-approve")...)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Apply complete! Tasks: 5 succeeded, 0 failed") {
		return fmt.Errorf("the quickstart did not succeed:\n%s", out)
	}
	if out, err = run("quickstart: apply again (no changes)", nil, wdc, append(qs, "apply")...); err != nil {
		return err
	}
	if !strings.Contains(out, "No changes.") {
		return fmt.Errorf("the second quickstart apply changed something:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(tree, "examples", "quickstart", "out", "MANIFEST")); err != nil {
		return fmt.Errorf("the quickstart wrote no out/MANIFEST: %w", err)
	}
	return nil
}
